package window

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/keyed"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/shardmap"
)

// A KeyedLog holds one exact sliding log per key: at most N events in any
// rolling window of length W for every key, under any interleaving. Each
// key costs its ring, 8·N + 32 bytes, and admits one event per call (see
// Log). It is safe for concurrent use; the hot path for a key already
// present is one lock-free map lookup, one clock read and Log's protocol on
// the key's ring, and it allocates nothing.
//
// A ring is idle once its latest admission has left the window: every slot
// has expired, and the ring decides every request at or after then as an
// empty ring would. Eviction is exact, as for Keyed: the floor (the latest
// expiry of any ring removed as idle) is raised first, and new rings start
// with every slot expiring at the floor, so a request with a stale time is
// never admitted beside the removed ring's events; then the ring is retired
// by a CompareAndSwap of the slot its next admission would write, which
// that admission, if it comes, finds and denies; then the entry is deleted.
type KeyedLog[K comparable] struct {
	m      *shardmap.Map[K, *LogRing] // st.Map: the hot path's lookup
	st     *keyed.Store[K, *LogRing]
	cells  *logCells
	src    timebase.Source
	p      LogParams
	create func() *LogRing
}

// NewKeyedLog returns a keyed exact sliding log of n events per rolling
// window of length period for each key. It takes the clock options and the
// keyed options of NewKeyedFixed.
func NewKeyedLog[K comparable](n int, period time.Duration, opts ...Option) (*KeyedLog[K], error) {
	cfg, err := configure(opts, false, true)
	if err != nil {
		return nil, err
	}
	k := &KeyedLog[K]{}
	k.src = newSource(&cfg, k)
	if k.p, err = NewLogParams(n, period); err != nil {
		return nil, err
	}
	k.cells = &logCells{}
	k.st = keyed.New[K, *LogRing](cfg.keyed, k.src, k.cells)
	k.m = k.st.Map
	cells, p := k.cells, k.p
	k.create = func() *LogRing { return newLogRingAt(&p, cells.floor.Load()) }
	keyed.Start(k, k.st)
	return k, nil
}

// Allow reports whether key may have one event now, and records it if so.
// Allow is shorthand for AllowN(key, clock.Now(), 1).
func (k *KeyedLog[K]) Allow(key K) bool { return k.allow(key, k.src.Now(), 1) }

// AllowN reports whether key may have n events at now; n == 1 is decided,
// n == 0 is admitted and records nothing (creating no key), any other n is
// denied.
func (k *KeyedLog[K]) AllowN(key K, now time.Time, n int) bool {
	return k.allow(key, k.src.At(now), n)
}

func (k *KeyedLog[K]) allow(key K, now int64, n int) bool {
	if n != 1 {
		return n == 0 // a peek, or invalid: no ring needed, no key created
	}
	if r, ok := k.m.Load(key); ok {
		// A retired ring denies everything: only a denial needs the check.
		if ok := r.Allow(&k.p, now); ok || !r.isRetired() {
			return ok
		}
	}
	for {
		r := k.ring(key, now)
		if r == nil {
			k.st.Refused()
			return false
		}
		if r.Allow(&k.p, now) {
			return true
		}
		if !r.isRetired() {
			return false
		}
	}
}

// Decide is Allow for n events with the whole decision. Decide is shorthand
// for DecideAt(key, clock.Now(), n). A new key refused by a full limiter
// gets Allowed false and RetryAfter W, the longest a key takes to become
// idle.
func (k *KeyedLog[K]) Decide(key K, n int) gcra.Decision { return k.decide(key, k.src.Now(), n) }

// DecideAt is Decide at the given time.
func (k *KeyedLog[K]) DecideAt(key K, now time.Time, n int) gcra.Decision {
	return k.decide(key, k.src.At(now), n)
}

func (k *KeyedLog[K]) decide(key K, now int64, n int) gcra.Decision {
	if n != 1 {
		return k.peek(key, now, n) // records nothing: create no key for it
	}
	for {
		r := k.ring(key, now)
		if r == nil {
			k.st.Refused()
			return gcra.Decision{RetryAfter: k.p.Period()}
		}
		d := r.decideN(&k.p, now, n, false)
		if d.Allowed || !r.isRetired() {
			return d
		}
	}
}

// ring returns key's live ring, creating it if needed, or nil if the
// limiter is full and refuses the key.
func (k *KeyedLog[K]) ring(key K, now int64) *LogRing {
	if r, ok := k.m.Load(key); ok && !r.isRetired() {
		return r
	}
	r, ok := k.st.Cell(key, now, k.create)
	if !ok {
		return nil
	}
	return r
}

// Peek returns the decision Decide(key, n) would make now, recording
// nothing and creating no key. Peek is shorthand for PeekAt(key,
// clock.Now(), n).
func (k *KeyedLog[K]) Peek(key K, n int) gcra.Decision { return k.peek(key, k.src.Now(), n) }

// PeekAt is Peek at the given time.
func (k *KeyedLog[K]) PeekAt(key K, now time.Time, n int) gcra.Decision {
	return k.peek(key, k.src.At(now), n)
}

func (k *KeyedLog[K]) peek(key K, now int64, n int) gcra.Decision {
	if r, ok := k.m.Load(key); ok {
		if d := r.decideN(&k.p, now, n, true); d.Allowed || !r.isRetired() {
			return d
		}
	}
	// A new ring, on which every slot expires at the floor: full until
	// then, empty after.
	var d gcra.Decision
	if floor := k.cells.floor.Load(); floor > now {
		wait := time.Duration(floor - now)
		d = gcra.Decision{RetryAfter: wait, ResetAfter: wait, TokenAfter: wait}
	} else {
		d = gcra.Decision{Allowed: n == 1, Remaining: k.p.limit}
		if n == 1 {
			// As after the hypothetical admission: one slot taken, the
			// latest (and, for N = 1, the oldest) admission leaving at now + W.
			d.Remaining--
			d.ResetAfter = k.p.Period()
			if d.Remaining == 0 {
				d.TokenAfter = k.p.Period()
			}
		}
	}
	switch {
	case n == 0: // a peek, admitted: the state as it is
		d.Allowed, d.RetryAfter = true, 0
	case n != 1:
		d.Allowed, d.RetryAfter = false, gcra.Never
	}
	return d
}

// Sweep removes every key that is idle now and returns how many it retired.
// Sweep is shorthand for SweepAt(clock.Now()).
func (k *KeyedLog[K]) Sweep() int { return k.st.Sweep(k.src.Now()) }

// SweepAt removes every key idle at now and returns how many it retired.
func (k *KeyedLog[K]) SweepAt(now time.Time) int { return k.st.Sweep(k.src.At(now)) }

// Close stops the background sweeper and waits until it has stopped.
func (k *KeyedLog[K]) Close() { k.st.Close() }

// Len returns the number of keys held.
func (k *KeyedLog[K]) Len() int { return k.m.Len() }

// Stats returns the limiter's counters.
func (k *KeyedLog[K]) Stats() KeyedStats { return k.st.Stats() }

// Params returns the limiter's parameters.
func (k *KeyedLog[K]) Params() *LogParams { return &k.p }

// String describes the configuration, e.g. "keyed log 100/1s".
func (k *KeyedLog[K]) String() string {
	return fmt.Sprintf("keyed log %d/%v", k.p.limit, k.p.Period())
}

// logCells tells the key store how to evict rings, and holds the floor.
type logCells struct {
	// floor is at least the latest expiry of every ring retired as idle;
	// new rings expire every slot at it. It only grows.
	floor atomic.Int64
}

// RetireIdle retires r if it is idle at now: first the floor, then the
// retiring CompareAndSwap (see LogRing.retireFrom).
func (g *logCells) RetireIdle(r *LogRing, now int64) bool {
	k, cur, latest, idle := r.idle(now)
	if !idle {
		return false
	}
	keyed.Raise(&g.floor, latest)
	return r.retireFrom(k, cur) // fails if an admission came meanwhile
}

// IdleFrom returns the ring's latest expiry.
func (g *logCells) IdleFrom(r *LogRing) (int64, bool) {
	_, cur, latest, _ := r.idle(0)
	if cur == retiredSlot {
		return math.MaxInt64, false
	}
	return latest, true
}

// RetireStale retires r if its latest expiry is at most limit; the floor
// is raised only if r is idle at now.
func (g *logCells) RetireStale(r *LogRing, limit, now int64) (retired, idle bool) {
	k, cur, latest, idle := r.idle(now)
	if cur == retiredSlot || latest > limit {
		return false, false
	}
	if idle {
		keyed.Raise(&g.floor, latest)
	}
	return r.retireFrom(k, cur), idle
}

// IsRetired reports whether r is retired.
func (g *logCells) IsRetired(r *LogRing) bool { return r.isRetired() }
