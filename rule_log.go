package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// SlidingLog is exactly at most n per rolling window of length period: a
// log of the last n admissions' times per key, one request at a time.
func SlidingLog(n int, period time.Duration) Rule { return Rule{logRule{n, period}} }

type logRule struct {
	n      int
	period time.Duration
}

func (l logRule) algorithms(*timebase.Source, int64) ([]algo.Algorithm, error) {
	p, err := window.NewLogParams(l.n, l.period)
	if err != nil {
		return nil, err
	}
	return []algo.Algorithm{window.LogAlgorithm(p)}, nil
}

func (l logRule) maxN() int           { return 1 } // one request, one entry of the log
func (l logRule) String() string      { return algo.DescribeWindow(l.n, l.period, "sliding log") }
func (l logRule) visit(v RuleVisitor) { v.SlidingLog(l.n, l.period) }
