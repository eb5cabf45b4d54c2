package redisgcra

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"
)

// ErrInvalidLease: NewLeased was given a nil Limiter, one of NewRule or of a
// static limit (Unlimited, DenyAll), a maxLease outside 1 … MaxLease, or a
// minLife ≤ 0.
var ErrInvalidLease = errors.New("redisgcra: invalid lease")

// MaxLease is the largest maxLease NewLeased accepts: a cell counts its
// tokens in 24 bits.
const MaxLease = 1<<leaseTokenBits - 1

// A Leased decides a Limiter's requests from leases: a process takes up to k
// tokens of a key in one round trip and spends them locally, lock-free, until
// they run out or expire. The fleet bound, its proof and how k adapts are in
// the package doc ("Leases"). It is safe for concurrent use.
//
// Spending from a lease is one lock-free map load, one clock read and a CAS
// on one word; it takes no lock and allocates nothing. Taking a new lease
// locks the key's cell in this process for one round trip, so that the
// process holds at most one lease of a key at a time (the bound needs it);
// the other goroutines that find the lease empty wait for that round trip.
//
// Leased uses the Limiter's client, key prefix, timeout, breaker and Outage
// policy; it reports nothing to the Limiter's Hook and does not consult its
// over-limit cache. It has no receipts: an admission from a lease cannot be
// refunded, and Leased is not a KeyedLimiter. Each key this process has
// leased keeps a cell (a word, a mutex and k) for the life of the Leased.
type Leased struct {
	l *Limiter
	// maxLease is k_max: no lease holds more tokens. Immutable.
	maxLease int
	// minLife is the shortest lifetime of a lease, in ns. Immutable.
	minLife int64
	cells   *xsync.MapOf[string, *leaseCell]

	// epoch is the time base of the lifetimes: ns since it, monotonic.
	epoch time.Time
	// Tests only: nowHook replaces time.Since(epoch); onAdmit sees every
	// admission with the clock reading it was decided at.
	nowHook func() int64
	onAdmit func(t int64, n int)
}

// A leaseCell is this process's lease of one key.
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
	state atomic.Uint64
	// mu is held for a refill: at most one lease of the key is granted or
	// in flight in this process at a time.
	mu sync.Mutex
	// k is the size of the next lease, 1 ≤ k ≤ maxLease. Guarded by mu.
	k int
}

const (
	leaseTokenBits = 24
	leaseTokenMask = 1<<leaseTokenBits - 1
	leaseTimeShift = 20
)

// NewLeased returns a Leased that spends l's tokens from leases of at most
// maxLease tokens each. A lease of k tokens lives max(k·T, minLife) from the
// moment its request was sent; minLife should exceed the round trip to
// Redis by a good margin, or leases arrive expired and are dropped unspent.
// l must be a GCRA limiter of New (not NewRule) with a finite, non-zero
// limit. Errors wrap ErrInvalidLease.
func NewLeased(l *Limiter, maxLease int, minLife time.Duration) (*Leased, error) {
	switch {
	case l == nil:
		return nil, fmt.Errorf("%w: nil Limiter", ErrInvalidLease)
	case l.rule != nil || l.static:
		return nil, fmt.Errorf("%w: %v: only New's finite GCRA limits lease", ErrInvalidLease, l)
	case maxLease < 1 || maxLease > MaxLease:
		return nil, fmt.Errorf("%w: maxLease %d not in 1…%d", ErrInvalidLease, maxLease, MaxLease)
	case minLife <= 0:
		return nil, fmt.Errorf("%w: minLife %v", ErrInvalidLease, minLife)
	}
	return &Leased{
		l:        l,
		maxLease: min(maxLease, l.params.Burst()),
		minLife:  int64(minLife),
		cells:    xsync.NewMapOf[string, *leaseCell](),
		epoch:    time.Now(),
	}, nil
}

// Limiter returns the Limiter that the leases are taken from.
func (ls *Leased) Limiter() *Limiter { return ls.l }

// MaxLife is the longest a lease lives, L_max = max(k_max·T, minLife), where
// k_max is maxLease, or the burst if that is smaller (package doc, "Leases").
func (ls *Leased) MaxLife() time.Duration {
	return time.Duration(max(int64(ls.maxLease)*int64(ls.l.params.Interval()), ls.minLife))
}

// Allow is shorthand for AllowN(ctx, key, 1).
func (ls *Leased) Allow(ctx context.Context, key string) bool {
	return ls.AllowN(ctx, key, 1)
}

// AllowN reports whether n events for key may happen now, and spends n
// tokens if so: from this process's lease of key when it holds n unexpired
// tokens (no round trip, no lock, no allocation), else from a new lease
// (one round trip). n = 0 is admitted and spends nothing; n < 0 is denied.
// n > the most one lease holds is decided by the Limiter, in one call
// (Limiter.AllowN). When Redis fails, the Limiter's Outage policy decides
// the request (FailOpen admits, FallbackTo's limiter decides), without a
// lease.
//
// A request that Redis cannot cover (it has fewer than n tokens) is denied
// and takes nothing. ctx bounds the round trip only: a spend from a lease
// answers whatever ctx, as the over-limit cache does.
func (ls *Leased) AllowN(ctx context.Context, key string, n int) bool {
	if uint64(int64(n)-1) >= uint64(ls.maxLease) {
		if n > ls.maxLease {
			return ls.l.AllowN(ctx, key, n)
		}
		return n == 0
	}
	if c, ok := ls.cells.Load(key); ok && ls.spend(c, n) {
		return true
	}
	return ls.refill(ctx, key, n)
}

// spend takes n from c's lease if it holds n unexpired tokens.
func (ls *Leased) spend(c *leaseCell, n int) bool {
	for {
		// First load the lease, then read the clock: the reading is then
		// no earlier than the lease's arrival (the package doc's proof
		// counts an admission at this reading).
		w := c.state.Load()
		now := ls.now()
		if uint64(now)>>leaseTimeShift >= w>>leaseTokenBits || w&leaseTokenMask < uint64(n) {
			return false // expired or too few: no store
		}
		if c.state.CompareAndSwap(w, w-uint64(n)) {
			if ls.onAdmit != nil {
				ls.onAdmit(now, n)
			}
			return true
		}
		// Lost the race to another spend (or a refill's drop): try again.
	}
}

// refill is AllowN's slow path: under c.mu, a lease of k tokens (or n, if
// more) in one round trip.
func (ls *Leased) refill(ctx context.Context, key string, n int) bool {
	c, _ := ls.cells.LoadOrCompute(key, func() *leaseCell { return &leaseCell{k: 1} })
	c.mu.Lock()
	defer c.mu.Unlock()
	if ls.spend(c, n) {
		return true // another goroutine took a lease while we waited
	}
	// First drop what is left of the old lease, then ask for a new one: the
	// process never holds two leases of key (the P·k_max bound needs it).
	old := c.state.Swap(0)
	sent := ls.now()
	switch expired := uint64(sent)>>leaseTimeShift >= old>>leaseTokenBits; {
	case old == 0: // the first lease, or the last one was denied
	case !expired:
		c.k = min(c.k*2, ls.maxLease) // spent (all but < n) in time: busier than k
	case old&leaseTokenMask > 0:
		c.k = max(c.k/2, 1) // expired unspent: quieter than k
	}
	got, err := ls.lease(ctx, key, n, max(c.k, n))
	if err != nil {
		return ls.l.fail(key, n, true, err).Allowed
	}
	if got == 0 {
		return false // Redis had fewer than n: it took nothing
	}
	// First install the lease, then spend n from it as any spend does: a
	// lease that arrived expired is never spent (the next refill drops it
	// and halves k).
	life := max(int64(got)*int64(ls.l.params.Interval()), ls.minLife)
	exp := uint64(sent+life) >> leaseTimeShift
	c.state.Store(exp<<leaseTokenBits | uint64(got))
	return ls.spend(c, n)
}

// leaseArgs are the arguments that follow n in a lease's call: the op, and
// an empty now (read TIME).
var leaseArgs = [...]any{opArgs[opLease], ""}

// lease takes as many tokens of key as Redis has, up to q, if that is at
// least n (1 ≤ n ≤ q ≤ B), in one call, and returns how many (0: none). An
// error is call's; a corrupt state is repaired (as Decide repairs it), and
// leases nothing.
func (ls *Leased) lease(ctx context.Context, key string, n, q int) (int, error) {
	l := ls.l
	reply, err := l.call(ctx, &decideScript, []string{l.Key(key)}, l.argT, l.argSpan, q, leaseArgs[0], leaseArgs[1], n)
	if err != nil {
		return 0, err
	}
	r, ok := reply.([]any)
	if !ok || len(r) < 2 || len(r) > 3 {
		return 0, rejectedReply(&decideScript, reply)
	}
	got, ok := r[1].(int64)
	if !ok || got < 0 || got > int64(q) || (got > 0 && got < int64(n)) {
		return 0, rejectedReply(&decideScript, reply)
	}
	return int(got), nil
}

// now is ns since the epoch, on the monotonic clock.
func (ls *Leased) now() int64 {
	if ls.nowHook != nil {
		return ls.nowHook()
	}
	return int64(time.Since(ls.epoch))
}
