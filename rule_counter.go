package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// SlidingCounter is about n per rolling window of length period, estimated
// from two fixed windows: the current one's count and the previous one's,
// weighted by how much of it the rolling window still covers.
func SlidingCounter(n int, period time.Duration) Rule { return Rule{counterRule{n, period}} }

type counterRule struct {
	n      int
	period time.Duration
}

func (c counterRule) algorithms(_ *timebase.Source, start int64) ([]algo.Algorithm, error) {
	p, err := window.NewCounterParams(c.n, c.period, start)
	if err != nil {
		return nil, err
	}
	return []algo.Algorithm{window.CounterAlgorithm(p)}, nil
}

func (c counterRule) maxN() int           { return c.n }
func (c counterRule) String() string      { return algo.DescribeWindow(c.n, c.period, "sliding counter") }
func (c counterRule) visit(v RuleVisitor) { v.SlidingCounter(c.n, c.period) }
