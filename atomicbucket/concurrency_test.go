package atomicbucket_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// Eight goroutines share one bucket on a clock that each call moves (so that
// times go stale between a read and the CompareAndSwap), some taking and
// refunding: admissions not given back never exceed B + elapsed/T, and the
// state never moves below what a refund can explain.
func TestBucketConcurrentBound(t *testing.T) {
	const workers, calls, burst = 8, 5000, 4
	T := int64(100)
	p, err := gcra.NewParams(gcra.Every(time.Duration(T)), burst)
	if err != nil {
		t.Fatal(err)
	}
	var b atomicbucket.Bucket
	var clock atomic.Int64
	now := func() int64 { return clock.Load() }
	var kept atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				at := clock.Add(7) // every call moves time on
				d, tk := b.TakeN(&p, at, 1)
				if !d.Allowed {
					continue
				}
				if (i+w)%3 == 0 && b.Refund(&p, tk, 1, now) {
					continue // given back (all of it, or the part certainly its own)
				}
				kept.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := clock.Load()
	if max := int64(burst) + elapsed/T + 1; kept.Load() > max {
		t.Fatalf("kept %d admissions in %d ns, over B + d/T = %d", kept.Load(), elapsed, max)
	}
	t.Logf("kept %d admissions of a bound of %d", kept.Load(), int64(burst)+elapsed/T)
}
