package window

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// FixedParams are a validated fixed-window limit: at most Limit events in
// each window [start + k·period, start + (k+1)·period). They are immutable
// and safe to share between any number of cells.
//
// The state of a window cell is one word: the index of the window it counts
// (windows since start) and the count admitted in it, packed as
//
//	 63                        s  s-1               0
//	+----------------------------+-------------------+
//	|  window index (64−s bits)  |   count (s bits)  |
//	+----------------------------+-------------------+
//
// where the index takes bits.Len(MaxNow/period + 2) bits, enough that it
// never wraps within the time range the arithmetic accepts and never
// reaches the all-ones index, and the count s, every bit left. The layout
// depends on the window alone, so a tier may change the limit and read the
// counts an older limit wrote. The state 0 is window 0 with nothing
// admitted, so the zero cell is ready to use; a cell can be idle forever and
// still be read right; the all-ones word is the retired state of a keyed
// cell (Retired). NewFixedParams rejects a limit that needs more than s
// bits. In practice: any limit below 2^32 for windows of 1 s or more, below
// 2^22 for windows of 1 ms.
type FixedParams struct{ grid }

// grid is what the fixed window and the sliding counter share: a count
// limit, windows of one length from a start, and the packing of counts
// beside the window index.
type grid struct {
	limit  uint64 // N ≥ 1
	period int64  // W in ns, 1 ≤ W ≤ MaxSpan
	start  int64  // start of window 0, ns on the owner's time base
	shift  uint   // s: count bits
	mask   uint64 // 2^s − 1
}

// newGrid validates n per window of length period from start, with counts
// counts of s bits beside the window index.
func newGrid(n int, period time.Duration, start int64, counts uint) (grid, error) {
	shift, err := validate(n, period, start, counts)
	if err != nil {
		return grid{}, err
	}
	return grid{limit: uint64(n), period: int64(period), start: start, shift: shift, mask: 1<<shift - 1}, nil
}

// NewFixedParams validates a limit of n events per window of length period,
// the windows starting at start (ns on the caller's time base; Align.Start
// computes it). Times before start count as start.
//
// Errors wrap ErrInvalidLimit, ErrInvalidPeriod or ErrOverflow.
func NewFixedParams(n int, period time.Duration, start int64) (FixedParams, error) {
	g, err := newGrid(n, period, start, 1)
	return FixedParams{g}, err
}

// validate checks a count limit n and window length period for a state word
// that holds `counts` counts of bits.Len(n) bits beside the window index,
// and returns the count width.
func validate(n int, period time.Duration, start int64, counts uint) (uint, error) {
	if n < 1 {
		return 0, fmt.Errorf("%w: %d (must be at least 1)", ErrInvalidLimit, n)
	}
	if period <= 0 || period > gcra.MaxSpan {
		return 0, fmt.Errorf("%w: %v (must be in (0, %v])", ErrInvalidPeriod, period, gcra.MaxSpan)
	}
	if start < -int64(period) || start > int64(gcra.MaxNow) {
		return 0, fmt.Errorf("%w: start %d outside [-period, MaxNow]", ErrInvalidPeriod, start)
	}
	// The largest index: now ≤ MaxNow and start ≥ −period. It must stay
	// below the all-ones index, which only the retired state has: the index
	// field takes ib bits, and the counts share the rest. The layout depends
	// on the window alone, not on n, so that a tier or a key may change n
	// and still read the states the old n wrote.
	maxIndex := uint64(gcra.MaxNow)/uint64(period) + 1
	ib := uint(bits.Len64(maxIndex + 1))
	shift := (64 - ib) / counts
	if need := uint(bits.Len64(uint64(n))); need > shift {
		return 0, fmt.Errorf("%w: %d per %v needs %d bits per count; the window index leaves %d",
			ErrOverflow, n, period, need, shift)
	}
	return shift, nil
}

// Limit returns N, the most events admitted in one window.
func (p *grid) Limit() int { return int(p.limit) }

// Period returns the window length.
func (p *grid) Period() time.Duration { return time.Duration(p.period) }

// index returns the window that contains now (times before start count as
// start).
func (p *grid) index(now int64) uint64 {
	return uint64(max(now-p.start, 0)) / uint64(p.period)
}

// end returns the end of window w (the start of w+1).
func (p *FixedParams) end(w uint64) int64 { return p.start + int64(w+1)*p.period }

// current returns the window a request at now is counted in and that
// window's count: see currentAt.
func (p *FixedParams) current(state uint64, now int64) (w, count uint64) {
	return p.currentAt(state, p.index(now))
}

// currentAt returns the window a request in window w is counted in and
// that window's count: the later of w and the stored one. A stale now (a
// caller preempted between reading the clock and deciding) whose window
// has already been replaced is counted in the stored, newer window: that
// only makes it stricter, and the index in the state never moves back.
func (p *FixedParams) currentAt(state, w uint64) (uint64, uint64) {
	if sw := state >> p.shift; w <= sw {
		return sw, state & p.mask
	}
	return w, 0 // a new window: the whole quota again
}

// Grid: windows of the period from start. Its At is now's window, the one
// division of the decision (index).
func (p *FixedParams) Grid() algo.Grid { return algo.Grid{Start: p.start, Period: p.period} }

// Admit decides a request for n events at now against the stored state. It
// returns the state to store and whether the request is admitted; when it is
// denied, next == state: a denial writes nothing.
//
//	(w, c) = current window and count   (see above)
//	admit ⇔ 1 ≤ n ≤ N  and  c + n ≤ N;   next = (w, c + n)
//	n = 0: a peek, admitted, next = state (the caller stores nothing)
//
// Every admission adds to the count of one window, whose index never
// decreases, and keeps that count ≤ N: at most N events are counted in any
// one window, whatever the interleaving. A stale now is counted in the
// newer window the cell already holds: the window of the decision, which a
// caller preempted across a boundary reaches only after it.
func (p *FixedParams) Admit(state uint64, now int64, n int) (next uint64, ok bool) {
	return p.AdmitAt(state, p.Grid().At(now), n)
}

// AdmitAt is Admit at a time At prepared: shifts and compares only.
func (p *FixedParams) AdmitAt(state uint64, m algo.Moment, n int) (next uint64, ok bool) {
	if uint64(int64(n)-1) >= p.limit { // n < 1 (wraps) or n > N
		return state, n == 0 // n = 0: a peek, admitted, consumes nothing
	}
	w, c := p.currentAt(state, m.Index)
	if c+uint64(n) > p.limit {
		return state, false
	}
	return w<<p.shift | (c + uint64(n)), true
}

// Decide is Admit with the whole decision. Remaining is N minus the count of
// the current window after the call; RetryAfter (denied) is the time until
// that window ends, or gcra.Never for n < 0 or n > N (n = 0 is admitted and
// describes the state as it is); ResetAfter is the
// time until the window ends if anything is counted in it, else 0;
// TokenAfter is 0 while Remaining ≥ 1, else the time until the window ends.
func (p *FixedParams) Decide(state uint64, now int64, n int) (next uint64, d gcra.Decision) {
	next, ok := p.Admit(state, now, n)
	w, _ := p.current(next, now)
	return next, windowDecision(p.State(next, now), ok, n, p.limit, p.end(w)-now)
}

// windowDecision completes a window's decision d, which describes the state
// after the call: admitted, or denied until the window ends (wait from now),
// or never for n < 0 or n > limit.
func windowDecision(d gcra.Decision, ok bool, n int, limit uint64, wait int64) gcra.Decision {
	d.Allowed = ok
	switch {
	case ok:
	case uint64(int64(n)-1) >= limit:
		d.RetryAfter = gcra.Never
	default:
		d.RetryAfter = time.Duration(wait)
	}
	return d
}

// State describes the cell whose state is state, at now, without a request.
func (p *FixedParams) State(state uint64, now int64) gcra.Decision {
	w, c := p.current(state, now)
	left := time.Duration(p.end(w) - now)
	// c may exceed N after a tier lowered N on a live state: none left.
	d := gcra.Decision{Remaining: int(p.limit - min(c, p.limit))}
	if c > 0 {
		d.ResetAfter = left
	}
	if c >= p.limit {
		d.TokenAfter = left
	}
	return d
}

// Refund takes back the n events of the admission taken, if the cell
// still counts the window it was admitted in; it returns the state to store
// and whether there is anything to store (shifts is always false). It
// cannot create quota: counts add, so removing n from a count that includes
// the admission leaves exactly the count of the other admissions in that
// window, whatever happened since; and once the window has been replaced
// there is nothing to give back.
func (p *FixedParams) Refund(state uint64, taken algo.Taken, _ int64, n int, _ gcra.Since) (back uint64, shifts, ok bool) {
	if state>>p.shift != taken.Word>>p.shift || uint64(int64(n)-1) >= p.limit || state&p.mask < uint64(n) {
		return state, false, false
	}
	return state - uint64(n), false, true
}

// Retired is the state of a window cell that a keyed limiter has removed:
// the all-ones word. Its window index lies beyond every window a time can
// fall in, and its count is at least N, so every request is denied against
// it and nothing is stored: a goroutine that still holds the cell can never
// admit on it.
const Retired = ^uint64(0)

// idleIndex returns the first window from which state no longer affects any
// decision: the next window if the stored one counts anything, else the
// stored one. A cell whose state is idle at now (index(now) ≥ idleIndex)
// decides every request at or after now as a cell in the state
// idleIndex<<shift (a floor) does.
func (p *FixedParams) idleIndex(state uint64) uint64 {
	if state&p.mask > 0 {
		return state>>p.shift + 1
	}
	return state >> p.shift
}

// Idle tells a keyed limiter when state stops mattering: from is the start
// of its idle window (idleIndex), floor that window as a state with a zero
// count (a replacement cell must start no earlier), and ok whether state is
// idle at now. An idle state decides every request at or after now as a
// fresh cell in floor's window would.
func (p *FixedParams) Idle(state uint64, now int64) (from int64, floor uint64, ok bool) {
	i := p.idleIndex(state)
	return p.start + int64(i)*p.period, i << p.shift, p.index(now) >= i
}
