package window

import (
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	iw "github.com/atomiclimit/atomiclimit/internal/window"
)

// RollingParams are at most q admissions in every run of K consecutive
// slices of length slice aligned to start (the rolling window K·slice), and
// with a per-slice cap, at most that many in any one slice. The state is
// Words() words: a head (the latest slice and its count) and a ring of K
// slots holding the counts of the slices before it; all zero is a fresh
// state.
type RollingParams struct{ p iw.RollingParams }

// NewRollingParams validates q ≥ 1, a window that is 1 to 1024 whole
// slices, and 0 ≤ perSlice ≤ q (0: no cap).
func NewRollingParams(q int, window, slice time.Duration, perSlice int, start int64) (RollingParams, error) {
	p, err := iw.NewRollingParams(q, window, slice, perSlice, start)
	return RollingParams{p}, err
}

// Limit returns q.
func (p *RollingParams) Limit() int { return p.p.Limit() }

// PerSlice returns the per-slice cap, 0 for none.
func (p *RollingParams) PerSlice() int { return p.p.PerSlice() }

// Words returns the number of state words, K + 1.
func (p *RollingParams) Words() int { return p.p.Words() }

// Decide decides a request for n at now on the state words (Words() of
// them, the head first) and, unless peek, records an admission in them: the
// in-process limiters' lock-free protocol on the words, which a caller
// that holds them alone (a copy) runs as plain arithmetic.
func (p *RollingParams) Decide(words []atomic.Uint64, now int64, n int, peek bool) gcra.Decision {
	return p.p.Decide(words, now, n, peek)
}
