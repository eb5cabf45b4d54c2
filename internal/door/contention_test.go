package door

import (
	"context"
	"testing"

	"github.com/atomiclimit/atomiclimit/internal/stacktest"
)

// Stacked policies under contention, every kind before every other: eight
// goroutines send 300 requests each for one key, a generous policy first
// and a strict one (5 per hour) after it. The generous policy is charged
// exactly what was served (a window), or at most a token more (a bucket,
// whose give-backs are stricter by the time between an admission and its
// give-back); the strict one too; and at most 5 are served.
func TestStackContention(t *testing.T) {
	const workers, calls = 8, 300
	ctx := context.Background()
	for _, p := range stacktest.Pairs() {
		t.Run(stacktest.Name(p), func(t *testing.T) {
			gen := stacktest.Keyed[string](t, p[0].Generous)
			strict := stacktest.Keyed[string](t, p[1].Strict)
			s := stackOf(t, newPolicy[string]("generous", gen, ""), newPolicy[string]("strict", strict, ""))
			served := stacktest.Hammer(workers, calls, func(int, int) bool {
				var out [2]Outcome
				res, _ := s.Decide(ctx, "k", 1, out[:], nil)
				return res == Pass
			})
			if served == 0 || served > stacktest.StrictQuota {
				t.Fatalf("served %d of %d, want 1 to %d", served, workers*calls, stacktest.StrictQuota)
			}
			stacktest.Check(t, "generous", p[0], stacktest.Charged[string](gen, "k", p[0].Quota), served)
			stacktest.Check(t, "strict", p[1], stacktest.Charged[string](strict, "k", stacktest.StrictQuota), served)
			t.Logf("served %d; generous charged %d, strict %d", served,
				stacktest.Charged[string](gen, "k", p[0].Quota), stacktest.Charged[string](strict, "k", stacktest.StrictQuota))
		})
	}
}
