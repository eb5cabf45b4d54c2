package atomiclimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// A GCRA band before another band, under contention: eight goroutines ask
// one key, whose second band (5 per hour) denies nearly all of them, some
// only when they take from it after the first band admitted them. The first
// band is charged what was served, within a token (its give-backs are
// stricter by the time between an admission and its give-back), in every
// one of 20 runs.
func TestBandsRefundUnderContention(t *testing.T) {
	const workers, calls, quota = 8, 300, 100_000
	for run := range 20 {
		k, err := atomiclimit.NewKeyedRule[string](atomiclimit.Bands(atomiclimit.GCRA(gcra.Per(quota, 24*time.Hour), quota), atomiclimit.FixedWindow(5, time.Hour)),
			atomiclimit.WithSweepInterval(0))
		require.NoError(t, err)
		var served sync.WaitGroup
		var mu sync.Mutex
		n := 0
		start := make(chan struct{})
		for range workers {
			served.Add(1)
			go func() {
				defer served.Done()
				<-start
				for range calls {
					if k.Allow("k") {
						mu.Lock()
						n++
						mu.Unlock()
					}
				}
			}()
		}
		close(start)
		served.Wait()
		require.Equal(t, 5, n, "run %d: the window's 5", run)
		charged := quota - k.BandRemaining("k", 0)
		require.GreaterOrEqual(t, charged, n, "run %d: the bucket band created quota", run)
		require.LessOrEqual(t, charged, n+1, "run %d: the bucket band was charged %d for %d served", run, charged, n)
		require.Equal(t, 0, k.BandRemaining("k", 1), "run %d", run)
		k.Close()
	}
}
