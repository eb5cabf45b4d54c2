package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// FixedWindow is n per window of length period, the windows starting when
// the limiter is created.
func FixedWindow(n int, period time.Duration) Rule { return Rule{fixedRule{n: n, period: period}} }

// FixedWindowUTC is n per window of length period, the windows starting at
// 1970-01-01T00:00:00Z + offset + k·period.
func FixedWindowUTC(n int, period, offset time.Duration) Rule {
	return Rule{fixedRule{n: n, period: period, utc: true, offset: offset}}
}

type fixedRule struct {
	n              int
	period, offset time.Duration
	utc            bool
}

func (f fixedRule) algorithms(src *timebase.Source, start int64) ([]algo.Algorithm, error) {
	align := window.AlignStart
	if f.utc {
		align = window.AlignUTC(f.offset)
	}
	p, err := window.NewFixedParams(f.n, f.period, align.Start(src.Time(0), start, f.period))
	if err != nil {
		return nil, err
	}
	return []algo.Algorithm{window.FixedAlgorithm(p)}, nil
}

func (f fixedRule) maxN() int { return f.n }

func (f fixedRule) String() string {
	switch {
	case !f.utc:
		return algo.DescribeWindow(f.n, f.period, "fixed window")
	case f.offset == 0:
		return algo.DescribeWindow(f.n, f.period, "fixed window, UTC")
	}
	return algo.DescribeWindow(f.n, f.period, "fixed window, UTC+"+algo.Period(f.offset))
}

func (f fixedRule) visit(v RuleVisitor) { v.FixedWindow(f.n, f.period, f.utc, f.offset) }
