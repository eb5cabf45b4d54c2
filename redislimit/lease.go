package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// errInvalidLease: NewLeased was given a nil Limiter, one of NewRule (or
// NewKeyedRule) or of a static limit (Unlimited, DenyAll), a maxLease outside 1 … MaxLease, or a
// minLife ≤ 0.
var errInvalidLease = configErr("invalid lease")

// MaxLease is the largest maxLease NewLeased accepts: a cell counts its
// tokens in 24 bits.
const MaxLease = 1<<leaseTokenBits - 1

// A Leased decides a Limiter's requests from leases: a process takes up to k
// tokens of a key in one round trip and spends them locally, lock-free, until
// they run out or expire. The fleet bound, its proof and how k adapts are in
// the package doc ("Leases"). It is safe for concurrent use. Its verbs are
// the Limiter's Allow and Take: Take's decision from a lease reports the
// lease's tokens left, not the key's state in Redis (see Take).
//
// Spending from a lease is one lock-free map load, one clock read and a CAS
// on one word; it takes no lock and allocates nothing. Taking a new lease
// locks the key's cell in this process for one round trip, so that the
// process holds at most one lease of a key at a time (the bound needs it);
// the other goroutines that find the lease empty wait for that round trip.
//
// Leased uses the Limiter's client, key prefix, timeout, breaker and Outage
// policy; its leases report nothing to the Limiter's Hook and do not
// consult its over-limit cache (a request larger than a lease is the
// Limiter's decision, and does both). It has no receipts: an admission from a lease cannot be
// refunded, and Leased is not a KeyedLimiter.
//
// Memory. Each key this process leases has a cell: its lease word, a mutex,
// k and the time of its last lease request, 32 bytes; 73 to 90 bytes with
// the map's entry and share of its table (which doubles as it fills), plus
// the key's own bytes (TestLeasedMemory measures it). A cell is freed once
// its key has asked for no lease for 2·MaxLife: its last lease then expired
// at least MaxLife ago, so the cell holds nothing but k, and the key starts
// again at k = 1, as a new key does. Sweep frees such cells, and Leased
// sweeps by itself, on a goroutine of its own, each time the lease requests
// since the last sweep began reach the larger of 1024 and the number of
// cells that sweep kept: so it holds at most about twice the larger of 1024
// and the keys leased within 2·MaxLife before its last sweep, and sweeping
// costs O(1) per lease request, amortized. A sweep never waits for a cell's lock and never makes a spend
// wait; a refill of a key may wait for the sweep's look at that one cell.
type Leased[K comparable] struct {
	l *Limiter[K]
	// maxLease is k_max: no lease holds more tokens. Immutable.
	maxLease int
	// minLife is the shortest lifetime of a lease, in ns. Immutable.
	minLife int64
	cells   *xsync.MapOf[K, *leaseCell]

	// epoch is the time base of the lifetimes: ns since it, monotonic.
	epoch time.Time
	// Tests only: nowHook replaces time.Since(epoch); onAdmit sees every
	// admission with the clock reading it was decided at.
	nowHook func() int64
	onAdmit func(t int64, n int)

	// The automatic sweep's counters, written by refills, sit on a cache
	// line of their own, away from the fields above that every spend reads.
	//lint:ignore U1000 prevents false sharing
	_ [64]byte
	// requests counts the lease requests since NewLeased.
	requests atomic.Int64
	// nextSweep is the value of requests at which an automatic sweep starts.
	nextSweep atomic.Int64
	// sweeping is set while an automatic sweep is started or running.
	sweeping atomic.Bool
	// idle is how long a cell's key asks for no lease before a sweep
	// frees the cell, in ns: 2·MaxLife. Immutable (tests set it first).
	idle int64
	// test holds the tests' hooks into refills and sweeps; nil outside them.
	test *leaseHooks[K]
}

// A leaseCell is this process's lease of one key.
//
// Cells come and go, and the process still holds at most one lease of the
// key: a refill asks for a lease only on the cell the map holds for the
// key, under its mu, after dropping its old lease (refill); a sweep frees a
// cell only under its mu, taken without waiting, and first drops its lease,
// then marks it dead, then deletes it from the map (freeLocked). So a cell
// leaves the map holding no lease and never asks for one again (a refill
// that took its mu after the sweep finds it dead and goes back to the map),
// and the key's next cell can only be made after that. The leases of a key
// in this process, over all its cells, are asked for one at a time, each
// after the last was dropped, as with one cell.
type leaseCell struct {
	// state is the lease, one word, so that a spend is one CAS:
	//
	//	63            24 23          0
	//	+---------------+------------+
	//	| expiry (40 b) | left (24 b)|
	//	+---------------+------------+
	//
	// expiry in units of 2^20 ns (about 1.05 ms) since the Leased's epoch:
	// the lease may be spent while now>>20 < expiry. The zero word is a
	// valid "no lease" (expired, nothing left). 2^60 ns is 36 years.
	// A dead cell's state is 0 for ever: every spend on it fails.
	state atomic.Uint64
	// mu is held for a refill: at most one lease of the key is granted or
	// in flight in this process at a time. A sweep holds it to free the
	// cell.
	mu sync.Mutex
	// asked is the clock reading (ns since the epoch) at which the last
	// lease of the cell was asked for, or at which the cell was made: a
	// new cell is not idle. Guarded by mu.
	asked int64
	// k is the size of the next lease, 1 ≤ k ≤ maxLease. Guarded by mu.
	k int32
	// dead is set when a sweep has freed the cell: it is no longer in the
	// map, or about to leave it, and never leases again. Guarded by mu.
	dead bool
}

// A leaseHooks is the tests' view into refills and sweeps.
type leaseHooks[K comparable] struct {
	locking func(key K, retry bool)   // a refill is about to lock the key's cell (retry: again, the last was dead)
	asking  func(key K, c *leaseCell) // a refill asks for a lease, under c.mu
	replied func(key K)               // its reply came, under c.mu
	swept   func(freed int)           // a sweep ended
}

// sweepFloor is the fewest lease requests between two automatic sweeps.
const sweepFloor = 1024

const (
	leaseTokenBits = 24
	leaseTokenMask = 1<<leaseTokenBits - 1
	leaseTimeShift = 20
	leaseMaxExpiry = 1<<(64-leaseTokenBits) - 1 // the largest expiry field
)

// NewLeased returns a Leased that spends l's tokens from leases of at most
// maxLease tokens each. A lease of k tokens lives max(k·T, minLife) from the
// moment its request was sent; minLife should exceed the round trip to
// Redis by a good margin, or leases arrive expired and are dropped unspent.
// l must be a GCRA limiter of New or NewKeyed (not NewRule or NewKeyedRule)
// with a finite, non-zero limit; the Leased takes its key type. Errors wrap
// ErrConfig.
func NewLeased[K comparable](l *Limiter[K], maxLease int, minLife time.Duration) (*Leased[K], error) {
	switch {
	case l == nil:
		return nil, fmt.Errorf("%w: nil Limiter", errInvalidLease)
	case l.rule != nil || l.static:
		return nil, fmt.Errorf("%w: %v: only New's finite GCRA limits lease", errInvalidLease, l)
	case maxLease < 1 || maxLease > MaxLease:
		return nil, fmt.Errorf("%w: maxLease %d not in 1…%d", errInvalidLease, maxLease, MaxLease)
	case minLife <= 0:
		return nil, fmt.Errorf("%w: minLife %v", errInvalidLease, minLife)
	}
	ls := &Leased[K]{
		l:        l,
		maxLease: min(maxLease, l.params.Burst()),
		minLife:  int64(minLife),
		cells:    xsync.NewMapOf[K, *leaseCell](),
		epoch:    time.Now(),
	}
	ls.idle = int64(ls.MaxLife())
	ls.idle += min(ls.idle, math.MaxInt64-ls.idle) // 2·MaxLife, saturated
	ls.nextSweep.Store(sweepFloor)
	return ls, nil
}

// Limiter returns the Limiter that the leases are taken from.
func (ls *Leased[K]) Limiter() *Limiter[K] { return ls.l }

// MaxLife is the longest a lease lives, L_max = max(k_max·T, minLife), where
// k_max is maxLease, or the burst if that is smaller (package doc, "Leases").
func (ls *Leased[K]) MaxLife() time.Duration {
	return time.Duration(max(int64(ls.maxLease)*int64(ls.l.params.Interval()), ls.minLife))
}

// Allow reports whether one event for key may happen now, and spends a
// token if so: Take(ctx, key, 1)'s Allowed, without building the rest.
func (ls *Leased[K]) Allow(ctx context.Context, key K) bool {
	// Take's path for n = 1, which every lease can hold (maxLease ≥ 1).
	if c, ok := ls.cells.Load(key); ok {
		if _, ok := ls.spend(c, 1); ok {
			return true
		}
	}
	d, _ := ls.refill(ctx, key, 1)
	return d.Allowed
}

// Take decides a request for n events for key, and spends n tokens if it
// is admitted: from this process's lease of key when it holds n unexpired
// tokens (no round trip, no lock, no allocation), else from a new lease
// (one round trip). n > the most one lease holds is decided by the
// Limiter, in one call (its Take's decision). n = 0 is admitted and spends
// nothing; n < 0 is denied (RetryAfter gcra.Never); neither makes a call.
// A request that Redis cannot cover (it has fewer than n tokens) is denied
// and takes nothing. ctx bounds the round trip only: a spend from a lease
// answers whatever ctx, as the over-limit cache does.
//
// A decision made in this process, from a lease (n = 0 included), says
// Allowed and, as Remaining, the tokens left in this process's lease of
// key, which it may spend without a round trip (Redis may hold more); its
// durations are 0: a spend reads nothing of the key's state in Redis. A
// denial is made in Redis, and is the Limiter's decision, every field:
// Redis had fewer than n tokens. The exception is a lease that arrived
// already expired (its life was shorter than the round trip: see
// NewLeased's minLife): its tokens are dropped and the request is denied
// with RetryAfter 0, as there was room.
//
// The receipt is always the zero Receipt: an admission from a lease cannot
// be given back (Leased has no Refund, and is not a KeyedLimiter). The
// error is the Limiter's Take's: ErrCorrupt for a state the lease's call
// repaired (and the request is denied); when Redis fails, an error
// wrapping ErrUnavailable or ErrRejected with the Limiter's Outage
// policy's decision (FailOpen admits, FallbackTo's limiter decides, with
// atomiclimit.ErrFallback wrapped too), without a lease; the caller's
// ctx.Err() when it gave up first.
func (ls *Leased[K]) Take(ctx context.Context, key K, n int) (atomiclimit.Decision, atomiclimit.Receipt, error) {
	if uint64(int64(n)-1) >= uint64(ls.maxLease) {
		switch {
		case n > ls.maxLease:
			r := ls.l.decide(ctx, key, n, opTake, -1)
			return r.Decision, atomiclimit.Receipt{}, r.Err
		case n == 0:
			return gcra.Decision{Allowed: true}, atomiclimit.Receipt{}, nil
		}
		return gcra.Decision{RetryAfter: gcra.Never}, atomiclimit.Receipt{}, nil
	}
	if c, ok := ls.cells.Load(key); ok {
		if left, ok := ls.spend(c, n); ok {
			return gcra.Decision{Allowed: true, Remaining: left}, atomiclimit.Receipt{}, nil
		}
	}
	d, err := ls.refill(ctx, key, n)
	return d, atomiclimit.Receipt{}, err
}

// spend takes n from c's lease if it holds n unexpired tokens, and returns
// how many are left.
func (ls *Leased[K]) spend(c *leaseCell, n int) (left int, ok bool) {
	for {
		// First load the lease, then read the clock: the reading is then
		// no earlier than the lease's arrival (the package doc's proof
		// counts an admission at this reading).
		w := c.state.Load()
		now := ls.now()
		if uint64(now)>>leaseTimeShift >= w>>leaseTokenBits || w&leaseTokenMask < uint64(n) {
			return 0, false // expired or too few: no store
		}
		if c.state.CompareAndSwap(w, w-uint64(n)) {
			if ls.onAdmit != nil {
				ls.onAdmit(now, n)
			}
			return int(w&leaseTokenMask) - n, true
		}
		// Lost the race to another spend (or a refill's drop): try again.
	}
}

// refill is Take's slow path: under the key's cell's mu, a lease of k
// tokens (or n, if more) in one round trip.
func (ls *Leased[K]) refill(ctx context.Context, key K, n int) (gcra.Decision, error) {
	c := ls.lockCell(key)
	defer c.mu.Unlock()
	if left, ok := ls.spend(c, n); ok {
		return gcra.Decision{Allowed: true, Remaining: left}, nil // another goroutine took a lease while we waited
	}
	// First drop what is left of the old lease, then ask for a new one: the
	// process never holds two leases of key (the P·k_max bound needs it).
	old := c.state.Swap(0)
	sent := ls.now()
	c.asked = sent
	switch expired := uint64(sent)>>leaseTimeShift >= old>>leaseTokenBits; {
	case old == 0: // the first lease, or the last one was denied
	case !expired:
		c.k = min(c.k*2, int32(ls.maxLease)) // spent (all but < n) in time: busier than k
	case old&leaseTokenMask > 0:
		c.k = max(c.k/2, 1) // expired unspent: quieter than k
	}
	if ls.test != nil && ls.test.asking != nil {
		ls.test.asking(key, c)
	}
	ls.countRequest()
	got, debt, err := ls.lease(ctx, key, n, max(int(c.k), n))
	if ls.test != nil && ls.test.replied != nil {
		ls.test.replied(key)
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		r := ls.l.fail(key, n, true, err)
		return r.Decision, r.Err
	}
	if got == 0 {
		// Redis had fewer than n (or repaired a corrupt state): it took
		// nothing. Its decision for n, as the Limiter rebuilds it.
		_, d := ls.l.params.Decide(debt, 0, n)
		if d.Allowed {
			// Unreachable (see gcraRemote.decide): trust what Redis did.
			scriptMismatches.Add(1)
			d.Allowed = false
		}
		return d, err
	}
	// First install the lease, then spend n from it as any spend does: a
	// lease that arrived expired is never spent (the next refill drops it
	// and halves k).
	// The expiry saturates: at the field's end (2^60 ns, 36 years after the
	// epoch) for a minLife or a k·T that reaches past it, never wrapping
	// to an early one. A lease cut short only admits less.
	life := max(int64(got)*int64(ls.l.params.Interval()), ls.minLife)
	end := sent + min(life, math.MaxInt64-sent)
	exp := min(uint64(end)>>leaseTimeShift, leaseMaxExpiry)
	c.state.Store(exp<<leaseTokenBits | uint64(got))
	left, ok := ls.spend(c, n)
	return gcra.Decision{Allowed: ok, Remaining: left}, nil
}

// lockCell returns key's cell, the one the map holds (made if there is
// none), with its mu held and not dead. A cell that a sweep freed while we
// waited for its mu is dead: we leave it and look in the map again, where
// the key has no cell or a newer one.
func (ls *Leased[K]) lockCell(key K) *leaseCell {
	for retry := false; ; retry = true {
		c, _ := ls.cells.LoadOrCompute(key, func() *leaseCell {
			return &leaseCell{k: 1, asked: ls.now()}
		})
		if ls.test != nil && ls.test.locking != nil {
			ls.test.locking(key, retry)
		}
		c.mu.Lock()
		if !c.dead {
			return c
		}
		c.mu.Unlock()
	}
}

// countRequest counts a lease request, and starts an automatic sweep on a
// goroutine of its own (never the caller's) when the requests since the
// last one reach the larger of sweepFloor and the number of cells it kept,
// and no automatic sweep is running.
func (ls *Leased[K]) countRequest() {
	if ls.requests.Add(1) < ls.nextSweep.Load() || !ls.sweeping.CompareAndSwap(false, true) {
		return
	}
	go func() {
		// The next threshold counts from the requests when this sweep
		// began, so that cells made during a long sweep count towards it.
		began := ls.requests.Load()
		_, kept := ls.sweep()
		// First set the next threshold, then let the next sweep start.
		ls.nextSweep.Store(began + max(int64(kept), sweepFloor))
		ls.sweeping.Store(false)
	}()
}

// Sweep frees the cells of the keys that have asked for no lease for
// 2·MaxLife (their leases expired at least MaxLife ago), and returns how
// many it freed. Such a key's next request makes a new cell, with k = 1.
// Sweep takes no cell's lock that is held: a cell with a lease request in
// flight is busy, and is kept. Leased also sweeps by itself (see Leased);
// Sweep is for a process that wants the memory back at a time of its
// choosing. It scans every cell, so it takes time in proportion to them.
func (ls *Leased[K]) Sweep() (freed int) {
	freed, _ = ls.sweep()
	return freed
}

// sweep is Sweep, and also reports how many cells it kept.
func (ls *Leased[K]) sweep() (freed, kept int) {
	ls.cells.Range(func(key K, c *leaseCell) bool {
		if !c.mu.TryLock() {
			kept++ // a refill holds it: busy
			return true
		}
		if ls.freeLocked(key, c) {
			freed++
		} else if !c.dead {
			kept++
		}
		c.mu.Unlock()
		return true
	})
	if ls.test != nil && ls.test.swept != nil {
		ls.test.swept(freed)
	}
	return freed, kept
}

// freeLocked frees c, key's cell, if it is not dead and its key has asked
// for no lease for ls.idle, and reports whether it did. It requires c.mu
// held: no lease of c is in flight, and none can start.
func (ls *Leased[K]) freeLocked(key K, c *leaseCell) bool {
	if c.dead || ls.now()-c.asked < ls.idle {
		return false
	}
	// First drop the lease: a spend that loaded it fails its CAS, finds 0
	// and refills. Then mark c dead: a refill waiting for c.mu leaves it.
	// Only then delete it from the map, so that the key's next cell is made
	// after c can lease nothing more. The map holds c (a live cell leaves
	// it only here, under its mu); the compare keeps that an invariant of
	// this function rather than of its callers.
	c.state.Store(0)
	c.dead = true
	ls.cells.Compute(key, func(cur *leaseCell, loaded bool) (*leaseCell, bool) {
		return cur, !loaded || cur == c
	})
	return true
}

// leaseArgs are the arguments that follow n in a lease's call: the op, and
// an empty now (read TIME).
var leaseArgs = [...]any{opArgs[opLease], ""}

// lease takes as many tokens of key as Redis has, up to q, if that is at
// least n (1 ≤ n ≤ q ≤ B), in one call, and returns how many (0: none) and
// the key's debt before the call, in ns. An error is call's, or wraps
// ErrCorrupt: the call repaired a corrupt state (as Take repairs it), and
// leased nothing.
func (ls *Leased[K]) lease(ctx context.Context, key K, n, q int) (got int, debt int64, err error) {
	l := ls.l
	rkey := l.Key(key)
	reply, err := l.call(ctx, &decideScript, []string{rkey}, l.argT, l.argSpan, q, leaseArgs[0], leaseArgs[1], n)
	if err != nil {
		return 0, 0, err
	}
	r, ok := reply.([]any)
	if !ok || len(r) < 2 || len(r) > 3 {
		return 0, 0, rejectedReply(&decideScript, reply)
	}
	v, ok := r[0].(int64)
	if !ok || v < 0 {
		return 0, 0, rejectedReply(&decideScript, reply)
	}
	k, ok := r[1].(int64)
	if !ok || k < 0 || k > int64(q) || (k > 0 && k < int64(n)) || (len(r) == 3 && k > 0) {
		return 0, 0, rejectedReply(&decideScript, reply)
	}
	if len(r) == 3 {
		err = corrupt(rkey, r[2])
	}
	return int(k), min(v>>1, maxDebtMicros) * 1000, err
}

// now is ns since the epoch, on the monotonic clock.
func (ls *Leased[K]) now() int64 {
	if ls.nowHook != nil {
		return ls.nowHook()
	}
	return int64(time.Since(ls.epoch))
}
