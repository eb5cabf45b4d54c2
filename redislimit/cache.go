package redislimit

import (
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// An overLimitCache remembers, per key that Redis denied, a lower bound of
// the key's TAT on this process's monotonic clock (ns since Limiter.epoch),
// and denies without a round trip whatever gcra denies on that bound.
//
// Why a cached denial is one Redis would give. Measure real time τ; the
// local clock reads τ + c and Redis TIME reads ⌊τ + r⌋ (whole µs), for
// constants c and r (the clocks run at the same rate). The local clock read
// s = σ + c just before the call; Redis read TIME t_R at some τ_R ≥ σ, so
// t_R > σ + r − 1µs, and reported the debt D = TAT₀ − t_R. The entry stores
//
//	tat_local = s + D − 1µs
//
// At a later instant τ, with local reading s + e (e = τ − σ), the cached debt
// is tat_local − (s + e) = TAT₀ − t_R − 1µs − e, and Redis's debt would be
// TAT_τ − ⌊τ + r⌋ ≥ TAT₀ − τ − r, because TAT only grows (other clients
// admit), refunds aside (below). The first is at most the second exactly
// when σ + r ≤ t_R + 1µs, which holds. gcra's denial is monotone in the
// debt (max(debt, 0) + n·T > B·T, or n out of range), so whatever the cache
// denies, Redis denies; what it does not deny goes to Redis. The cache thus
// changes the cost of a denial, never a decision, as long as TIME does not
// run faster than the local monotonic clock (drift of a few ppm, over the
// cached retry-after) and no refund intervenes. Its RetryAfter is then at
// most Redis's, short by up to the time from s to Redis's TIME reading
// plus 1µs.
//
// Refunds lower TAT: a give-back of an admission of n lowers it by at most
// n·T (gcra.Params.Refund gives back at most n·T, and at most
// at + n·T − now when not alone). So an entry's bound exceeds what Redis
// holds after give-backs by at most the n·T they gave back since the denial
// it was recorded from. Such an entry can deny, for at most that long
// beyond Redis's own retry-after, a request Redis would admit: stricter,
// never more permissive. Refund forgets the key's entry in the refunding
// process; other processes' entries age out.
//
// Resets lower TAT too, and other processes' are invisible here: a DEL,
// FLUSHALL, a restart without persistence, a failover to a replica that
// lacked the key. So an entry answers only for maxAge after the Redis
// denial that last refreshed it (its seen time, read before that call was
// sent): after a reset at local time x, every entry recorded from a read
// of Redis before x has seen < x, and denies nothing from x + maxAge on.
// That is the cache's whole staleness after a reset, and after a refund in
// another process. Reset in this process forgets the key's entry at once.
//
// The hit path is Load (lock-free, allocation-free in xsync's MapOf), two
// atomic loads and gcra's pure Decide. Entries are stable pointers updated
// in place, so a repeated denial of a known key allocates nothing either;
// only a key's first denial inserts (a lock on one MapOf bucket, two
// allocations).
type overLimitCache[K comparable] struct {
	m   *xsync.MapOf[K, *cacheEntry]
	max int
	// maxAge is how long an entry answers after its seen time (ns).
	// Immutable once the Limiter is built.
	maxAge int64
	// lastSweep is the local time of the last sweep, so that a full cache
	// of live entries is scanned at most once per sweepGap.
	lastSweep atomic.Int64
}

// A cacheEntry is what the cache knows of one key. Both fields only grow
// (raise), so a reader that pairs a newer seen with an older tat holds a
// weaker bound than the truth, never a stronger one.
type cacheEntry struct {
	tat  atomic.Int64 // a lower bound of the key's TAT (local clock)
	seen atomic.Int64 // the local time the bound was last confirmed
}

// answers reports whether e may still answer at local time now.
func (c *overLimitCache[K]) answers(e *cacheEntry, now int64) bool {
	return now-e.seen.Load() < c.maxAge
}

// cacheMargin is the 1µs that TIME's truncation may add to the debt Redis
// reports, taken off the cached TAT (see overLimitCache).
const cacheMargin = int64(time.Microsecond)

// sweepGap is the least time between two sweeps of a full cache.
const sweepGap = int64(100 * time.Millisecond)

func newOverLimitCache[K comparable](size int, maxAge int64) *overLimitCache[K] {
	c := &overLimitCache[K]{m: xsync.NewMapOf[K, *cacheEntry](), max: size, maxAge: maxAge}
	c.lastSweep.Store(-sweepGap)
	return c
}

// deny returns gcra's decision for n tokens at now on key's cached TAT, and
// true, if that decision is a denial; otherwise false (ask Redis).
func (c *overLimitCache[K]) deny(key K, p *gcra.Params, now int64, n int) (gcra.Decision, bool) {
	e, ok := c.m.Load(key)
	if !ok || !c.answers(e, now) {
		return gcra.Decision{}, false
	}
	_, d := p.Decide(e.tat.Load(), now, n)
	return d, !d.Allowed
}

// denies reports whether gcra denies n tokens at now on key's cached TAT:
// deny's answer without the rest of the decision.
func (c *overLimitCache[K]) denies(key K, p *gcra.Params, now int64, n int) bool {
	e, ok := c.m.Load(key)
	if !ok || !c.answers(e, now) {
		return false
	}
	_, ok = p.Admit(e.tat.Load(), now, n)
	return !ok
}

// record raises key's cached TAT to tat, a lower bound of the TAT Redis
// holds (local clock), after a denial whose call was sent at local time
// now, and raises its seen time to now.
func (c *overLimitCache[K]) record(key K, tat, now int64) {
	if e, ok := c.m.Load(key); ok {
		raise(&e.tat, tat)
		raise(&e.seen, now)
		return
	}
	if c.m.Size() >= c.max && !c.sweep(now) {
		return // full of live entries: this denial goes uncached
	}
	e, loaded := c.m.LoadOrCompute(key, func() *cacheEntry {
		e := new(cacheEntry)
		e.tat.Store(tat)
		e.seen.Store(now)
		return e
	})
	if loaded {
		raise(&e.tat, tat)
		raise(&e.seen, now)
	}
}

// raise stores v in e unless e already holds a later value: the bound only
// ever tightens, and seen only moves forward.
func raise(e *atomic.Int64, v int64) {
	for {
		old := e.Load()
		if old >= v || e.CompareAndSwap(old, v) {
			return
		}
	}
}

// sweep removes the entries whose TAT ≤ now or whose age is maxAge (they
// deny nothing any more), at most once per sweepGap, and reports whether
// the cache has room.
func (c *overLimitCache[K]) sweep(now int64) bool {
	last := c.lastSweep.Load()
	if now-last < sweepGap || !c.lastSweep.CompareAndSwap(last, now) {
		return false
	}
	c.m.Range(func(key K, _ *cacheEntry) bool {
		// Delete only if still stale: a denial may have raised it meanwhile.
		c.m.Compute(key, func(e *cacheEntry, loaded bool) (*cacheEntry, bool) {
			return e, !loaded || e.tat.Load() <= now || !c.answers(e, now)
		})
		return true
	})
	return c.m.Size() < c.max
}

// forget removes key's entry, after a refund or a reset lowered key's TAT
// below what it may hold.
func (c *overLimitCache[K]) forget(key K) { c.m.Delete(key) }

// len is the number of cached keys (tests).
func (c *overLimitCache[K]) len() int { return c.m.Size() }
