package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// AnchoredWindow is n per window of length period, each key's window
// opening at its first admitted request and closing period later: the next
// request after it opens the next. A provider that counts "n calls, the
// whole quota back one period after the first" decides this way.
func AnchoredWindow(n int, period time.Duration) Rule { return Rule{anchoredRule{n, period}} }

type anchoredRule struct {
	n      int
	period time.Duration
}

func (a anchoredRule) algorithms(*timebase.Source, int64) ([]algo.Algorithm, error) {
	p, err := window.NewAnchoredParams(a.n, a.period)
	if err != nil {
		return nil, err
	}
	return []algo.Algorithm{window.AnchoredAlgorithm(p)}, nil
}

func (a anchoredRule) maxN() int           { return a.n }
func (a anchoredRule) String() string      { return algo.DescribeWindow(a.n, a.period, "anchored window") }
func (a anchoredRule) visit(v RuleVisitor) { v.AnchoredWindow(a.n, a.period) }
