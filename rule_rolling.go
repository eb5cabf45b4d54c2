package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// Rolling is at most q per rolling window, counted in slices of length
// slice ("10,000 per rolling day, recalculated hourly"), and, when
// perSlice > 0, at most perSlice in any one slice.
func Rolling(q int, window, slice time.Duration, perSlice int) Rule {
	return Rule{rollingRule{q: q, window: window, slice: slice, perSlice: perSlice}}
}

type rollingRule struct {
	q, perSlice   int
	window, slice time.Duration
}

func (r rollingRule) algorithms(_ *timebase.Source, start int64) ([]algo.Algorithm, error) {
	p, err := window.NewRollingParams(r.q, r.window, r.slice, r.perSlice, start)
	if err != nil {
		return nil, err
	}
	return []algo.Algorithm{window.RollingAlgorithm(p)}, nil
}

func (r rollingRule) maxN() int {
	if r.perSlice > 0 {
		return min(r.q, r.perSlice)
	}
	return r.q
}

func (r rollingRule) String() string {
	return algo.DescribeRolling(r.q, r.window, r.slice, r.perSlice)
}

func (r rollingRule) visit(v RuleVisitor) { v.Rolling(r.q, r.window, r.slice, r.perSlice) }
