package window

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// AnchoredParams are a validated fixed window anchored at each cell's first
// request: "the whole quota back one interval after the first token was
// taken". A window opens at the time a of the first request admitted after
// the previous window ended and lasts W: at most N events are counted in
// it, and the first request at or after a + W opens the next window at its
// own time. They are immutable and safe to share between any number of
// cells.
//
// The state is one word, the anchor in units of g = 2^k ns and the count:
//
//	 63                        b  b-1               0
//	+----------------------------+-------------------+
//	|   anchor / g  (64−b bits)  |   count (b bits)  |
//	+----------------------------+-------------------+
//
// with b = bits.Len(N). A count ≥ 1 is an open window [A, A + W), A the
// stored anchor. A count of 0 is no open window, and the anchor field then
// is the earliest instant the next window may open: a request at now opens
// it at max(now, A). The zero word is "no window, none before 0": a fresh
// cell with the whole quota. The all-ones word is Retired.
//
// Anchors are rounded up to a multiple of g, so a window ends less than g
// late: stricter, never looser. g is the smallest power of two with which
// every field a state can hold (MaxNow/g + 2, see Idle) stays below the
// all-ones field beside b count bits: g = 2^max(0, b−2) ns, so 1 ns for
// N ≤ 3, 4 ns for N ≤ 15, 32 ns for N ≤ 127, 16 µs for N < 2^16, about
// 1 s for N < 2^32 (Resolution). NewAnchoredParams rejects an N whose g
// exceeds W.
//
// Why at most N per window: every admission adds to the count of the window
// current for the stored state and keeps it ≤ N. The anchor never moves
// back: a new window opens only at or after the stored one's end (or the
// stored earliest anchor), and a request stamped before the stored anchor
// (a stale now) is counted in the stored window, which only makes it
// stricter. So windows do not overlap, and each counts at most N. Times
// outside [0, gcra.MaxNow] are clamped to it.
type AnchoredParams struct {
	limit  uint64 // N ≥ 1
	period int64  // W in ns, g ≤ W ≤ MaxSpan
	shift  uint   // b: count bits
	mask   uint64 // 2^b − 1
	gshift uint   // k: g = 2^k
}

// NewAnchoredParams validates a limit of n events per window of length
// period, anchored at each cell's first request. Errors wrap
// ErrInvalidLimit, ErrInvalidPeriod or ErrOverflow (the anchor resolution
// for n would exceed period).
func NewAnchoredParams(n int, period time.Duration) (AnchoredParams, error) {
	if n < 1 {
		return AnchoredParams{}, fmt.Errorf("%w: %d (must be at least 1)", ErrInvalidLimit, n)
	}
	if period <= 0 || period > gcra.MaxSpan {
		return AnchoredParams{}, fmt.Errorf("%w: %v (must be in (0, %v])", ErrInvalidPeriod, period, gcra.MaxSpan)
	}
	shift := uint(bits.Len64(uint64(n)))
	k := uint(0)
	// The largest field is MaxNow/g + 2 (a floor); it and the next value
	// must fit 64−b bits, the all-ones field being the retired state's.
	for (uint64(gcra.MaxNow)>>k+3)>>(64-shift) != 0 {
		k++
	}
	if int64(1)<<k > int64(period) {
		return AnchoredParams{}, fmt.Errorf("%w: %d per %v needs anchors in units of %v", ErrOverflow, n, period, time.Duration(1)<<k)
	}
	return AnchoredParams{limit: uint64(n), period: int64(period), shift: shift, mask: 1<<shift - 1, gshift: k}, nil
}

// Limit returns N.
func (p *AnchoredParams) Limit() int { return int(p.limit) }

// Period returns W.
func (p *AnchoredParams) Period() time.Duration { return time.Duration(p.period) }

// Resolution returns g, the unit of the stored anchors.
func (p *AnchoredParams) Resolution() time.Duration { return time.Duration(1) << p.gshift }

// units returns the field of the instant t ≥ 0, rounded up.
func (p *AnchoredParams) units(t int64) uint64 { return (uint64(t) + 1<<p.gshift - 1) >> p.gshift }

// end returns the end of the window anchored at field f.
func (p *AnchoredParams) end(f uint64) int64 { return int64(f<<p.gshift) + p.period }

// current returns the window a request at now (clamped) is counted in and
// its count: the stored window while it is open at now (a stale now before
// its anchor included), else a new one at max(now, the stored earliest
// anchor), count 0. The anchor never moves back: a new window opens only
// after the stored one ended (now ≥ its end > its anchor).
func (p *AnchoredParams) current(state uint64, now int64) (f, c uint64) {
	f, c = state>>p.shift, state&p.mask
	if c > 0 && now < p.end(f) {
		return f, c
	}
	return max(f, p.units(now)), 0
}

// Grid: the anchored window reads the time alone.
func (p *AnchoredParams) Grid() algo.Grid { return algo.Grid{} }

func clampNow(now int64) int64 { return min(max(now, 0), int64(gcra.MaxNow)) }

// Admit decides a request for n events at now against the stored state. It
// returns the state to store and whether the request is admitted; when it
// is denied, next == state: a denial writes nothing. n = 0 is admitted and
// changes nothing; n < 0 or n > N is denied.
//
//	(A, c) = current window and count   (see above)
//	admit ⇔ c + n ≤ N;   next = (A, c + n)
func (p *AnchoredParams) Admit(state uint64, now int64, n int) (next uint64, ok bool) {
	return p.AdmitAt(state, p.Grid().At(now), n)
}

// AdmitAt is Admit at a time At prepared.
func (p *AnchoredParams) AdmitAt(state uint64, m algo.Moment, n int) (next uint64, ok bool) {
	if n == 0 {
		return state, state != Retired
	}
	if uint64(int64(n)-1) >= p.limit || state == Retired {
		return state, false
	}
	f, c := p.current(state, clampNow(m.Now))
	if c+uint64(n) > p.limit {
		return state, false
	}
	return f<<p.shift | (c + uint64(n)), true
}

// Decide is Admit with the whole decision, for the state after the call
// (after the hypothetical admission, so that a caller that peeks gets what
// an admission would report). Remaining is N minus the current window's
// count; RetryAfter (denied) is the time until that window ends, or
// gcra.Never for n < 0, n > N or a retired state; ResetAfter is the time
// until the window ends if it counts anything, else 0; TokenAfter is 0
// while Remaining ≥ 1, else the time until the window ends.
func (p *AnchoredParams) Decide(state uint64, now int64, n int) (next uint64, d gcra.Decision) {
	next, ok := p.Admit(state, now, n)
	if state == Retired {
		return state, gcra.Decision{RetryAfter: gcra.Never}
	}
	d = p.State(next, now)
	if n == 0 {
		d = p.State(state, now)
	}
	f, _ := p.current(next, clampNow(now))
	return next, windowDecision(d, ok, n, p.limit, p.end(f)-clampNow(now))
}

// State describes the cell whose state is state, at now, without a request.
func (p *AnchoredParams) State(state uint64, now int64) gcra.Decision {
	if state == Retired {
		return gcra.Decision{}
	}
	now = clampNow(now)
	f, c := p.current(state, now)
	// c may exceed N after a tier lowered N on a live state: none left.
	d := gcra.Decision{Remaining: int(p.limit - min(c, p.limit))}
	if c > 0 {
		d.ResetAfter = time.Duration(p.end(f) - now)
		if c >= p.limit {
			d.TokenAfter = d.ResetAfter
		}
	}
	return d
}

// Refund takes back the n events of the admission taken, if the cell
// still counts the window it was admitted in; it returns the state to
// store and whether there is anything to store (shifts is always false:
// the give-back of one admission changes no other's). It cannot create
// quota: counts add, so removing n from a count that includes the
// admission leaves exactly the count of the others.
//
// The window's anchor is its first admission's time. If that admission is
// the one given back:
//
//   - alone in its window (count n), the window closes: the next request
//     opens one at its own time, no earlier than the anchor, as if the
//     admission had never been made;
//   - with others after it, the anchor moves to now, the give-back's time,
//     and the others stay counted. Without the admission the window would
//     have opened at the earliest of the others, at or before now (each of
//     them was decided before the state was loaded, and the caller reads
//     now after that load, under its give-back lock: algo.Stripe), so the
//     moved window ends no sooner than that one would have: stricter by at
//     most now minus that time, never looser. Leaving the anchor in place
//     would be looser (AnchoredWindow(2, 1m), admissions at 0s and 59s, the
//     first given back: two more at 60s, three in two seconds).
//
// A later admission of the same window still finds it after the move: its
// anchor lies between the one it stored and that window's end, which no
// later window's anchor does.
func (p *AnchoredParams) Refund(state uint64, taken algo.Taken, now int64, n int, _ gcra.Since) (back uint64, shifts, ok bool) {
	if state == Retired || uint64(int64(n)-1) >= p.limit {
		return state, false, false
	}
	f, c := state>>p.shift, state&p.mask
	af := taken.Word >> p.shift
	if c < uint64(n) || f < af || int64(f<<p.gshift) >= p.end(af) {
		return state, false, false // not the window it was counted in
	}
	if taken.Word&p.mask > uint64(n) || c == uint64(n) {
		// Not the window's first admission, or alone in it: its count.
		return state - uint64(n), false, true
	}
	// The first of several: the window now opens at now.
	now = clampNow(now)
	if now >= p.end(f) {
		return state, false, false // the window is over: its counts decide nothing
	}
	return max(f, p.units(now))<<p.shift | (c - uint64(n)), false, true
}

// Idle tells a keyed limiter when state stops mattering: from is when it
// became or becomes idle, floor the state a replacement cell must start in,
// and idle whether it is idle at now. An open window is idle from its end
// e; the floor is then no window, none before e (rounded up to g). An empty
// state is idle from its earliest anchor and is its own floor. A retired
// state is never idle.
//
// Why the floor is exact: a replacement cell in state floor opens every
// window at max(now, e) or later, so no window of it overlaps the removed
// one [A, e), and a request stamped before e (a caller that read the clock
// before the removal) cannot open a second window with a fresh quota inside
// it. At any now ≥ e, the idle cell would open a new window at now, and so
// does the replacement: every decision from now on is the same. The floor
// 0 would not do: a request stamped in [A, e) would be admitted N more
// times in the removed window's span. Floors of several cells combine by
// their maximum (the packed order is the anchor's), and a floor from a now
// at which it is idle is never later than that now, so a floor shared by
// every key only makes stale requests stricter.
func (p *AnchoredParams) Idle(state uint64, now int64) (from int64, floor uint64, idle bool) {
	if state == Retired {
		return 0, 0, false
	}
	now = clampNow(now)
	f, c := state>>p.shift, state&p.mask
	if c == 0 {
		return int64(f << p.gshift), state, now >= int64(f<<p.gshift)
	}
	e := p.end(f)
	// A window ending after MaxNow never becomes idle (no now exceeds
	// MaxNow); its floor is clamped to keep the field in range.
	ef := min(p.units(e), uint64(gcra.MaxNow)>>p.gshift+1)
	return e, ef << p.shift, now >= e
}
