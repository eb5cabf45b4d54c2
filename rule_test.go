package atomiclimit_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// recorder writes down what a RuleVisitor is told, one line per call.
type recorder struct{ calls []string }

func (r *recorder) add(f string, args ...any) { r.calls = append(r.calls, fmt.Sprintf(f, args...)) }

func (r *recorder) GCRA(l atomiclimit.Limit, burst int) { r.add("GCRA(%v, %d)", l, burst) }
func (r *recorder) FixedWindow(n int, period time.Duration, utc bool, offset time.Duration) {
	r.add("FixedWindow(%d, %v, %v, %v)", n, period, utc, offset)
}
func (r *recorder) AnchoredWindow(n int, period time.Duration) {
	r.add("AnchoredWindow(%d, %v)", n, period)
}
func (r *recorder) SlidingCounter(n int, period time.Duration) {
	r.add("SlidingCounter(%d, %v)", n, period)
}
func (r *recorder) SlidingLog(n int, period time.Duration) { r.add("SlidingLog(%d, %v)", n, period) }
func (r *recorder) Rolling(q int, window, slice time.Duration, perSlice int) {
	r.add("Rolling(%d, %v, %v, %d)", q, window, slice, perSlice)
}
func (r *recorder) Bands(rules ...atomiclimit.Rule) {
	r.add("Bands(%d)", len(rules))
	for _, b := range rules {
		b.Visit(r)
	}
}

// Rule.Visit hands back exactly what each constructor was given, for every
// kind (RuleVisitor has a method per kind: a kind added without one fails
// to compile here), and Rule.Quota is what a limiter of the rule reports.
func TestRuleVisit(t *testing.T) {
	g := atomiclimit.GCRA(gcra.Per(10, time.Second), 3)
	log := atomiclimit.SlidingLog(60, time.Minute)
	for _, c := range []struct {
		rule atomiclimit.Rule
		want string
	}{
		{g, "GCRA(10/s, 3)"},
		{atomiclimit.FixedWindow(5, time.Minute), "FixedWindow(5, 1m0s, false, 0s)"},
		{atomiclimit.FixedWindowUTC(7, time.Hour, 15*time.Minute), "FixedWindow(7, 1h0m0s, true, 15m0s)"},
		{atomiclimit.AnchoredWindow(4, time.Second), "AnchoredWindow(4, 1s)"},
		{atomiclimit.SlidingCounter(100, time.Minute), "SlidingCounter(100, 1m0s)"},
		{log, "SlidingLog(60, 1m0s)"},
		{atomiclimit.Rolling(1000, 24*time.Hour, time.Hour, 100), "Rolling(1000, 24h0m0s, 1h0m0s, 100)"},
		{atomiclimit.Bands(g, log), "Bands(2); GCRA(10/s, 3); SlidingLog(60, 1m0s)"},
		{atomiclimit.Rule{}, ""},
	} {
		var r recorder
		c.rule.Visit(&r)
		assert.Equal(t, c.want, strings.Join(r.calls, "; "), "%v", c.rule)
		if c.rule == (atomiclimit.Rule{}) {
			assert.Zero(t, c.rule.Quota(), "the zero Rule")
			continue
		}
		k, err := atomiclimit.NewKeyedRule[string](c.rule, atomiclimit.WithSweepInterval(0))
		if assert.NoError(t, err) {
			assert.Equal(t, k.Quota("k"), c.rule.Quota(), "%v: Quota", c.rule)
		}
	}
}
