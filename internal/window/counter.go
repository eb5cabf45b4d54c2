package window

import (
	"math/bits"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// CounterParams are a validated sliding-window-counter limit: N events per
// rolling window of length W, estimated from two fixed windows. A request at
// position pos ∈ [0, W) of the current window is admitted when
//
//	prev·(W − pos)/W + cur + n ≤ N
//
// prev and cur being the counts admitted in the previous and the current
// fixed window: the previous window's events are assumed spread evenly over
// it, and the part of it still inside the rolling window is weighted in. The
// test is exact integer arithmetic (128-bit products), never floating point.
//
// It is an estimate. Each fixed window counts at most N, and the worst case
// is 2N−1 events in one rolling window (N at the very end of one window, then
// N−1 just before the end of the next; a test shows it). Both bounds are on
// the times the decisions are made at: a stale now, from a caller preempted
// after reading the clock, is decided at the start of the window the cell
// already counts (where the estimate is highest), and counts there. It costs
// one word, against N words for the exact Log.
//
// The state of a counter cell is one word:
//
//	 63                          2s 2s-1          s s-1            0
//	+------------------------------+---------------+---------------+
//	|   window index (64−2s bits)  | prev (s bits) | cur (s bits)  |
//	+------------------------------+---------------+---------------+
//
// with s half the bits the window index leaves (the layout depends on the
// window alone, as FixedParams'). The state 0 is window 0 with both counts
// 0: the zero cell is ready to use. NewCounterParams rejects limits that
// need more than s bits, so the index never wraps. That allows N < 2^16 per second, < 2^19 per minute, < 2^22
// per hour and < 2^24 per day; ErrOverflow names the bits needed.
type CounterParams struct{ grid }

// NewCounterParams validates a limit of n events per rolling window of
// length period, its fixed windows starting at start (ns on the caller's
// time base). Errors wrap ErrInvalidLimit, ErrInvalidPeriod or ErrOverflow.
func NewCounterParams(n int, period time.Duration, start int64) (CounterParams, error) {
	g, err := newGrid(n, period, start, 2)
	return CounterParams{g}, err
}

// view is a state seen from a time: the fixed window w it falls in, its
// start, the position in it, and the counts of w and w−1.
type view struct {
	w          uint64
	start, pos int64
	prev, cur  uint64
}

// at reads state at now: see view.
func (p *CounterParams) at(state uint64, now int64) view { return p.view(state, p.Grid().At(now)) }

// Grid: windows of the period from start. Its At is now's window and the
// position in it (0 before start), the one division of the decision.
func (p *CounterParams) Grid() algo.Grid { return algo.Grid{Start: p.start, Period: p.period} }

// view reads state at the time m. A stale time, in a window before the
// stored one, is read at the start of the stored window, where the
// estimate is highest: stricter, and the stored index never moves back.
func (p *CounterParams) view(state uint64, m algo.Moment) view {
	w, pos := m.Index, m.Pos
	sw := state >> (2 * p.shift)
	prev, cur := state>>p.shift&p.mask, state&p.mask
	switch {
	case w == sw:
	case w == sw+1:
		prev, cur = cur, 0
	case w > sw+1:
		prev, cur = 0, 0
	default: // w < sw: stale now
		w, pos = sw, 0
	}
	return view{w: w, start: p.start + int64(w)*p.period, pos: pos, prev: prev, cur: cur}
}

// fits reports whether n more events fit v: cur + n ≤ N and
// prev·(W − pos) ≤ (N − cur − n)·W, in 128 bits.
func (p *CounterParams) fits(v view, n uint64) bool {
	if v.cur+n > p.limit {
		return false
	}
	h1, l1 := bits.Mul64(v.prev, uint64(p.period-v.pos))
	h2, l2 := bits.Mul64(p.limit-v.cur-n, uint64(p.period))
	return h1 < h2 || h1 == h2 && l1 <= l2
}

// Admit decides a request for n events at now against the stored state and
// returns the state to store (state itself when denied: a denial writes
// nothing) and whether it is admitted.
func (p *CounterParams) Admit(state uint64, now int64, n int) (next uint64, ok bool) {
	return p.AdmitAt(state, p.Grid().At(now), n)
}

// AdmitAt is Admit at a time At prepared: view and fits written out, with
// the common case (the stored window is now's) first: shifts, compares and
// two 64×64 multiplies, no division and no call, for the short stretch
// between a loop's load and its CompareAndSwap (algo.WordRule).
func (p *CounterParams) AdmitAt(state uint64, m algo.Moment, n int) (next uint64, ok bool) {
	if uint64(int64(n)-1) >= p.limit { // n < 1 (wraps) or n > N
		return state, n == 0 // n = 0: a peek, admitted, consumes nothing
	}
	w, pos := m.Index, m.Pos
	prev, cur := state>>p.shift&p.mask, state&p.mask
	if sw := state >> (2 * p.shift); w != sw {
		switch { // as view
		case w == sw+1:
			prev, cur = cur, 0
		case w > sw+1:
			prev, cur = 0, 0
		default: // w < sw: stale now, read at the start of the stored window
			w, pos = sw, 0
		}
	}
	// As fits: cur + n ≤ N and prev·(W − pos) ≤ (N − cur − n)·W.
	c := cur + uint64(n)
	if c > p.limit {
		return state, false
	}
	h1, l1 := bits.Mul64(prev, uint64(p.period-pos))
	h2, l2 := bits.Mul64(p.limit-c, uint64(p.period))
	if h1 > h2 || h1 == h2 && l1 > l2 {
		return state, false
	}
	return w<<(2*p.shift) | prev<<p.shift | c, true
}

// Decide is Admit with the whole decision:
//
//	Remaining   N − cur − ⌈prev·(W − pos)/W⌉ after the call (≥ 0)
//	RetryAfter  (denied) the exact wait after which the same request fits,
//	            if nothing else is admitted meanwhile; gcra.Never for n < 0
//	            or n > N (n = 0 is admitted: the state as it is)
//	ResetAfter  until the estimate is 0 again: the end of the next window
//	            if cur > 0, of this one if only prev > 0, else 0
//	TokenAfter  RetryAfter of one event (0 while Remaining ≥ 1)
func (p *CounterParams) Decide(state uint64, now int64, n int) (next uint64, d gcra.Decision) {
	next, ok := p.Admit(state, now, n)
	d = p.State(next, now)
	d.Allowed = ok
	if !ok {
		d.RetryAfter = gcra.Never
		if uint64(int64(n)-1) < p.limit {
			d.RetryAfter = time.Duration(p.fitAt(p.at(next, now), uint64(n)) - now)
		}
	}
	return next, d
}

// State describes state at now without a request.
func (p *CounterParams) State(state uint64, now int64) gcra.Decision {
	v := p.at(state, now)
	var d gcra.Decision
	if used := v.cur + ceilWeight(v.prev, v.pos, p.period); used < p.limit {
		d.Remaining = int(p.limit - used)
	} else {
		d.TokenAfter = time.Duration(p.fitAt(v, 1) - now)
	}
	switch {
	case v.cur > 0:
		d.ResetAfter = time.Duration(v.start + 2*p.period - now)
	case v.prev > 0:
		d.ResetAfter = time.Duration(v.start + p.period - now)
	}
	return d
}

// ceilWeight is ⌈prev·(W − pos)/W⌉ ≤ prev, in 128 bits.
func ceilWeight(prev uint64, pos, period int64) uint64 {
	hi, lo := bits.Mul64(prev, uint64(period-pos))
	q, r := bits.Div64(hi, lo, uint64(period)) // hi < period: prev·(W−pos) < 2^64·W
	if r != 0 {
		q++
	}
	return q
}

// fitAt returns the earliest time at which n (1 ≤ n ≤ N) more events fit
// v, if nothing else is admitted: in this window if cur + n ≤ N, when the
// weight of prev has fallen far enough; else in the next one, where cur
// becomes prev. The weight falls as pos grows, so the least pos' with
// c·(W − pos') ≤ (N − k)·W is W − ⌊(N − k)·W / c⌋ (0 if that is negative).
func (p *CounterParams) fitAt(v view, n uint64) int64 {
	if p.fits(v, n) {
		return v.start + v.pos
	}
	if v.cur+n <= p.limit {
		return v.start + p.settle(v.prev, p.limit-v.cur-n)
	}
	return v.start + p.period + p.settle(v.cur, p.limit-n)
}

// settle returns the least position pos' in [0, W] with
// c·(W − pos') ≤ room·W.
func (p *CounterParams) settle(c, room uint64) int64 {
	if c == 0 {
		return 0
	}
	hi, lo := bits.Mul64(room, uint64(p.period))
	if hi >= c {
		return 0 // room·W/c ≥ 2^64 > W
	}
	q, _ := bits.Div64(hi, lo, c)
	if q >= uint64(p.period) {
		return 0
	}
	return p.period - int64(q)
}

// Refund takes back the n events of the admission taken: from cur while
// the cell still counts that window, from prev once it is the previous one.
// Counts add, so this leaves exactly the counts of the other admissions,
// whatever happened since; once the window has left the estimate there is
// nothing to give back. It returns the state to store and whether there is
// anything to store (shifts is always false).
func (p *CounterParams) Refund(state uint64, taken algo.Taken, _ int64, n int, _ gcra.Since) (back uint64, shifts, ok bool) {
	if uint64(int64(n)-1) >= p.limit {
		return state, false, false
	}
	sw, aw := state>>(2*p.shift), taken.Word>>(2*p.shift)
	prev, cur := state>>p.shift&p.mask, state&p.mask
	switch {
	case sw == aw && cur >= uint64(n):
		return state - uint64(n), false, true
	case sw == aw+1 && prev >= uint64(n):
		return state - uint64(n)<<p.shift, false, true
	}
	return state, false, false
}

// idleIndex returns the first window from which state no longer affects any
// decision: two windows on if the stored window counts anything (it is the
// previous window one window on), one if only its previous window does,
// else the stored one.
func (p *CounterParams) idleIndex(state uint64) uint64 {
	w := state >> (2 * p.shift)
	switch {
	case state&p.mask > 0:
		return w + 2
	case state>>p.shift&p.mask > 0:
		return w + 1
	}
	return w
}

// Idle is FixedParams.Idle for the counter: its state is idle once neither
// of its counts is inside the estimate any more.
func (p *CounterParams) Idle(state uint64, now int64) (from int64, floor uint64, ok bool) {
	i := p.idleIndex(state)
	return p.start + int64(i)*p.period, i << (2 * p.shift), p.index(now) >= i
}
