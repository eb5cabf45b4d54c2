package atomiclimit

import (
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// GCRA is the token bucket as GCRA: limit's rate, up to burst at once.
func GCRA(limit gcra.Limit, burst int) Rule { return Rule{gcraRule{limit, burst}} }

type gcraRule struct {
	limit gcra.Limit
	burst int
}

func (g gcraRule) algorithms(src *timebase.Source, _ int64) ([]algo.Algorithm, error) {
	p, err := paramsFor(src, g.limit, g.burst)
	if err != nil {
		return nil, err
	}
	return []algo.Algorithm{algo.NewGCRA(*p)}, nil
}

func (g gcraRule) maxN() int {
	p, err := gcra.NewParams(g.limit, g.burst)
	if err != nil {
		return 0
	}
	return p.Burst()
}

func (g gcraRule) String() string      { return algo.DescribeGCRA(g.limit, g.burst) }
func (g gcraRule) visit(v RuleVisitor) { v.GCRA(g.limit, g.burst) }
