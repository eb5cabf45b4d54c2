package redislimit

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/atomiclimit/atomiclimit"
)

// Test hooks. None of them is reachable from outside the package's tests.

// DecideLua and DecideSHA are the script and the name EVALSHA uses.
const DecideLua = decideLua

var DecideSHA = decideSHA

// RefundSHA is the name EVALSHA gives the refund script.
var RefundSHA = refundSHA

// Result is a decision with who made it and its error: what Take and Peek
// return, with the Source the Hook hears.
type Result = result

// TakeResult is Take with its Source, in one Result.
func (l *Limiter[K]) TakeResult(ctx context.Context, key K, n int) Result {
	return l.decide(ctx, key, n, opReceipt, -1)
}

// AllowResult is Allow's decision with its Source and error (Allow returns
// only Allowed): the script's op that takes without a receipt, whose reply
// is one integer.
func (l *Limiter[K]) AllowResult(ctx context.Context, key K) Result {
	return l.decide(ctx, key, 1, opTake, -1)
}

// PeekResult is Peek with its Source, in one Result.
func (l *Limiter[K]) PeekResult(ctx context.Context, key K, n int) Result {
	return l.decide(ctx, key, n, opPeek, -1)
}

// DecideAt is Allow's decision for n (take: the script's op that takes
// without a receipt) or Peek (!take), at an explicit Redis time, in µs
// since the Unix epoch, instead of Redis TIME.
func (l *Limiter[K]) DecideAt(ctx context.Context, key K, n int, take bool, nowMicros int64) Result {
	o := opPeek
	if take {
		o = opTake
	}
	return l.decide(ctx, key, n, o, nowMicros)
}

// TakeAt is Take at an explicit Redis time (µs), with its Source.
func (l *Limiter[K]) TakeAt(ctx context.Context, key K, n int, nowMicros int64) (Result, atomiclimit.Receipt) {
	r := l.decide(ctx, key, n, opReceipt, nowMicros)
	return r, r.receipt
}

// Hooked reports whether the Limiter has a hook to report to.
func (l *Limiter[K]) Hooked() bool { return l.hook != nil }

// SetLocalClock replaces the over-limit cache's clock (ns).
func (l *Limiter[K]) SetLocalClock(now func() int64) { l.nowHook = now }

// CacheLen is the number of keys in the over-limit cache.
func (l *Limiter[K]) CacheLen() int { return l.cache.len() }

// ScriptMismatches is the number of decisions where the script and gcra
// disagreed on Allowed.
func ScriptMismatches() uint64 { return scriptMismatches.Load() }

// RefundAt is Refund at an explicit Redis time (µs).
func (l *Limiter[K]) RefundAt(ctx context.Context, key K, n int, r atomiclimit.Receipt, nowMicros int64) (bool, error) {
	return l.refund(ctx, key, n, r, nowMicros)
}

// SetClock replaces the lease lifetimes' clock (ns since the epoch).
func (ls *Leased[K]) SetClock(now func() int64) { ls.nowHook = now }

// OnAdmit has f see every admission from a lease, with the clock reading
// (ns since the epoch) it was decided at. Set it before any Take.
func (ls *Leased[K]) OnAdmit(f func(t int64, n int)) { ls.onAdmit = f }

// SetEpoch sets the lease clock's epoch, so that several Leased share one.
func (ls *Leased[K]) SetEpoch(t time.Time) { ls.epoch = t }

// LeaseState reports key's next lease size and the tokens left in its lease
// (expired or not); 0, 0 for a key never leased.
func (ls *Leased[K]) LeaseState(key K) (k, left int) {
	c, ok := ls.cells.Load(key)
	if !ok {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.k), int(c.state.Load() & leaseTokenMask)
}

// HasCell reports whether the map holds a cell for key.
func (ls *Leased[K]) HasCell(key K) bool {
	_, ok := ls.cells.Load(key)
	return ok
}

// Cells is the number of cells in the map.
func (ls *Leased[K]) Cells() int { return ls.cells.Size() }

// LeaseCellSize is the size of a cell, in bytes.
const LeaseCellSize = unsafe.Sizeof(leaseCell{})

// SweepFloor is the fewest lease requests between two automatic sweeps.
const SweepFloor = sweepFloor

// SetIdle sets how long a key asks for no lease before a sweep frees its
// cell (2·MaxLife by default); 0 frees every cell whose lock is free. Set
// it before any Take.
func (ls *Leased[K]) SetIdle(d time.Duration) { ls.idle = int64(d) }

func (ls *Leased[K]) hooks() *leaseHooks[K] {
	if ls.test == nil {
		ls.test = new(leaseHooks[K])
	}
	return ls.test
}

// OnLocking has f run when a refill of key is about to lock its cell,
// between finding the cell in the map and locking it; retry reports that
// the refill locked a cell before and found it dead. Set it before any
// Take.
func (ls *Leased[K]) OnLocking(f func(key K, retry bool)) { ls.hooks().locking = f }

// OnRequest has start run when a refill of key asks for a lease, and done
// when the reply came, both under the cell's lock. start's current reports
// whether the cell asking is the map's cell of key and not dead (a request
// on any other cell would be a second lease of key in this process). Set
// it before any Take.
func (ls *Leased[K]) OnRequest(start func(key K, current bool), done func(key K)) {
	h := ls.hooks()
	h.asking = func(key K, c *leaseCell) {
		cur, ok := ls.cells.Load(key)
		start(key, ok && cur == c && !c.dead)
	}
	h.replied = done
}

// AutoSweeping reports whether an automatic sweep is running.
func (ls *Leased[K]) AutoSweeping() bool { return ls.sweeping.Load() }

// OnSwept has f see the end of every sweep, with the cells it freed, on
// the sweep's goroutine. Set it before any Take or Sweep.
func (ls *Leased[K]) OnSwept(f func(freed int)) { ls.hooks().swept = f }

// HoldCell returns a spend of n tokens on key's cell as the map holds it
// now, as a goroutine that loaded the cell and spends on it later does.
func (ls *Leased[K]) HoldCell(key K) (spend func(n int) bool) {
	c, ok := ls.cells.Load(key)
	if !ok {
		panic(fmt.Sprint("HoldCell: no cell for ", key))
	}
	return func(n int) bool { _, ok := ls.spend(c, n); return ok }
}

// DecideArgs are the ARGV of the EVALSHA that Take(ctx, key, n) sends
// (opReceipt, Redis TIME): what a raw EVALSHA of the same size sends.
func (l *Limiter[K]) DecideArgs(n int) []any {
	return []any{l.argT, l.argSpan, n, opArgs[opReceipt]}
}

// MaxBandsForTest is maxBands.
const MaxBandsForTest = maxBands

// ReserveAt is Reserve with an explicit longest wait (maxWait ≥ 0 ns, or
// < 0 for ctx's and the limiter's) at an explicit Redis time (µs; < 0 for
// TIME).
func (l *Limiter[K]) ReserveAt(ctx context.Context, key K, n int, maxWait time.Duration, nowMicros int64) (*Reservation, error) {
	rv := l.reserve(ctx, key, n, int64(maxWait), nowMicros)
	return rv.res, rv.err
}

// Taken is what the reservation's Cancel gives to the script: the TAT it
// stored, its time and the key's latest stamp, µs on Redis TIME; zero for
// a reservation with nothing in Redis.
func (r *Reservation) Taken() (stored, at, stamp int64) {
	return int64(r.tk.tat), int64(r.tk.at), int64(r.tk.stamp)
}

// IsLocal reports whether FallbackTo's limiter made the reservation.
func (r *Reservation) IsLocal() bool { return r.local != nil }

// CancelAt is Cancel at an explicit Redis time (µs), with no local check
// of the due time: Redis decides whether the tokens are due. It reports
// whether anything was given back.
func (r *Reservation) CancelAt(ctx context.Context, nowMicros int64) (bool, error) {
	if r.done || r.c == nil {
		r.done = true
		return false, nil
	}
	r.done = true
	return r.cancel(ctx, nowMicros)
}

// SetTimer replaces time.NewTimer in WaitN.
func (l *Limiter[K]) SetTimer(f func(time.Duration) (<-chan time.Time, func() bool)) { l.newTimer = f }

// OnReserved has f hear every reservation Redis decided, in the caller's
// goroutine, with ctx, whether it reserved, the wait, and what its Cancel
// needs (µs on Redis TIME), before the local time its Delay counts from is
// read. Set it before any Reserve or Wait.
func (l *Limiter[K]) OnReserved(f func(ctx context.Context, ok bool, wait time.Duration, stored, at, stamp int64)) {
	l.onReserved = func(ctx context.Context, ok bool, wait time.Duration, tk taken) {
		f(ctx, ok, wait, int64(tk.tat), int64(tk.at), int64(tk.stamp))
	}
}

// WindowSleep is windowSleep.
var WindowSleep = windowSleep

// The kinds of ErrConfig, by name, for the tests that tell them apart
// (users match ErrConfig and read the message).
var (
	ErrNilClient              = errNilClient
	ErrRateTooHigh            = errRateTooHigh
	ErrInvalidPrefix          = errInvalidPrefix
	ErrInvalidTimeout         = errInvalidTimeout
	ErrContextTimeoutDisabled = errContextTimeoutDisabled
	ErrInvalidCacheSize       = errInvalidCacheSize
	ErrInvalidOutage          = errInvalidOutage
	ErrInvalidMaxWait         = errInvalidMaxWait
	ErrInvalidBreaker         = errInvalidBreaker
	ErrInvalidCacheMaxAge     = errInvalidCacheMaxAge
	ErrUnsupported            = errUnsupported
	ErrResolution             = errResolution
	ErrKeyType                = errKeyType
	ErrInvalidLease           = errInvalidLease
)
