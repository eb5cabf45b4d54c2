package window

import (
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	iw "github.com/atomiclimit/atomiclimit/internal/window"
)

// FixedParams are n per window of length period, the windows aligned to
// start (window k is [start + k·period, start + (k+1)·period)). The state
// is one word: the window index in its high bits, the count of that window
// in its low CountBits bits; 0 is a fresh state. A request stamped in an
// older window than the state's is counted in the state's (stricter).
type FixedParams struct{ p iw.FixedParams }

// NewFixedParams validates n ≥ 1 and 0 < period ≤ gcra.MaxSpan, and that
// the window index fits beside the count for every time up to gcra.MaxNow.
func NewFixedParams(n int, period time.Duration, start int64) (FixedParams, error) {
	p, err := iw.NewFixedParams(n, period, start)
	return FixedParams{p}, err
}

// Limit returns n.
func (p *FixedParams) Limit() int { return p.p.Limit() }

// CountBits returns the width of the count in the state word.
func (p *FixedParams) CountBits() uint { return p.p.Layout().Shift }

// Decide decides a request for n at now on state: the state to store
// (state itself when denied, or for n = 0, a peek) and the decision.
func (p *FixedParams) Decide(state uint64, now int64, n int) (uint64, gcra.Decision) {
	return p.p.Decide(state, now, n)
}
