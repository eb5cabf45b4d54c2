package window

import (
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	iw "github.com/atomiclimit/atomiclimit/internal/window"
)

// CounterParams are about n per rolling window of length period, estimated
// from two fixed windows aligned to start: the current window's count plus
// the previous one's, weighted by the share of it the rolling window still
// covers. The state is one word: the current window's index and the two
// counts, CountBits bits each; 0 is a fresh state.
type CounterParams struct{ p iw.CounterParams }

// NewCounterParams validates n and period as NewFixedParams does.
func NewCounterParams(n int, period time.Duration, start int64) (CounterParams, error) {
	p, err := iw.NewCounterParams(n, period, start)
	return CounterParams{p}, err
}

// Limit returns n.
func (p *CounterParams) Limit() int { return p.p.Limit() }

// CountBits returns the width of each count in the state word.
func (p *CounterParams) CountBits() uint { return p.p.Layout().Shift }

// Decide decides a request for n at now on state: the state to store
// (state itself when denied, or for n = 0) and the decision.
func (p *CounterParams) Decide(state uint64, now int64, n int) (uint64, gcra.Decision) {
	return p.p.Decide(state, now, n)
}
