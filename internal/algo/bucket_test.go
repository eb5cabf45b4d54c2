package algo_test

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// Bucket's loops are AdmitWord's specialised to GCRA: the same random
// sequence of requests (stale times, peeks, n out of range) through a
// Bucket and through Word(&GCRA{p}) stores the same states and decides
// the same, request for request.
func TestBucketDecidesAsWord(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		p, err := gcra.NewParams(gcra.Every(time.Duration(1+rng.IntN(100))), 1+rng.IntN(5))
		if err != nil {
			t.Fatal(err)
		}
		var bw, ww atomic.Uint64
		b, w := algo.BucketOf(&bw), algo.NewGCRA(p)
		st := algo.State{Word: &ww}
		now := int64(0)
		for i := range 300 {
			now = max(0, now+rng.Int64N(200)-50)
			n := rng.IntN(p.Burst()+2) - rng.IntN(2)
			var got, want gcra.Decision
			switch i % 3 {
			case 0:
				got, _ = b.TakeN(&p, now, n)
				want = w.Decide(st, now, n, false)
			case 1:
				got.Allowed = b.AllowN(&p, now, n)
				_, want.Allowed = w.Admit(st, now, n)
			default:
				got, want = b.PeekN(&p, now, n), w.Decide(st, now, n, true)
			}
			if got != want || bw.Load() != ww.Load() {
				t.Fatalf("trial %d step %d (n %d at %d): bucket %+v state %d, word %+v state %d", trial, i, n, now, got, bw.Load(), want, ww.Load())
			}
		}
	}
}
