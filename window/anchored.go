package window

import (
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	iw "github.com/atomiclimit/atomiclimit/internal/window"
)

// AnchoredParams are n per window of length period, each key's window
// opening at its first admitted request (the anchor), in units of
// Resolution. The state is one word: the anchor in its high bits and the
// window's count in its low CountBits bits; 0 is a fresh state.
type AnchoredParams struct{ p iw.AnchoredParams }

// NewAnchoredParams validates n and period as NewFixedParams does.
func NewAnchoredParams(n int, period time.Duration) (AnchoredParams, error) {
	p, err := iw.NewAnchoredParams(n, period)
	return AnchoredParams{p}, err
}

// Limit returns n.
func (p *AnchoredParams) Limit() int { return p.p.Limit() }

// CountBits returns the width of the count in the state word.
func (p *AnchoredParams) CountBits() uint { return p.p.Layout().Shift }

// Resolution returns the unit anchors are kept in: a window opens at the
// first request's time rounded up to it (never earlier: stricter).
func (p *AnchoredParams) Resolution() time.Duration { return p.p.Resolution() }

// Decide decides a request for n at now on state: the state to store
// (state itself when denied, or for n = 0) and the decision.
func (p *AnchoredParams) Decide(state uint64, now int64, n int) (uint64, gcra.Decision) {
	return p.p.Decide(state, now, n)
}
