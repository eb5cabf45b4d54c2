package window_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// Every WordRule decides in two parts (algo.WordRule): Grid().At(now), then
// AdmitAt on the state. TakeWord admits with them and describes the
// admission with Decide, so the two must agree: on states reached by
// random requests, at random times (stale ones included: before the stored
// window, before the start), AdmitAt(state, Grid().At(now), n) stores and
// admits as Decide(state, now, n) does.
func TestAdmitAtDecidesAsDecide(t *testing.T) {
	gp, err := gcra.NewParams(gcra.Every(7*time.Millisecond), 5)
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]algo.WordRule{
		"gcra":     &algo.GCRA{P: gp},
		"fixed":    mustFixed(t, 5, 100*time.Millisecond, 30*int64(time.Millisecond)),
		"counter":  mustCounter(t, 5, 100*time.Millisecond, -40*int64(time.Millisecond)),
		"anchored": mustAnchored(t, 5, 100*time.Millisecond),
	}
	for name, r := range rules {
		rng := rand.New(rand.NewPCG(1, 2))
		var state uint64
		now := int64(0)
		for i := range 20000 {
			now = max(0, now+rng.Int64N(int64(40*time.Millisecond))-int64(15*time.Millisecond))
			at := max(0, now-rng.Int64N(int64(300*time.Millisecond))*int64(rng.IntN(4)/3)) // stale one time in four
			n := rng.IntN(7) - rng.IntN(2)
			next, ok := r.AdmitAt(state, r.Grid().At(at), n)
			want, d := r.Decide(state, at, n)
			if next != want || ok != d.Allowed {
				t.Fatalf("%s step %d: n %d at %d on %#x: AdmitAt %#x %v, Decide %#x %v", name, i, n, at, state, next, ok, want, d.Allowed)
			}
			state = next
		}
	}
}
