package redislimit_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// TestConcurrentBound: many goroutines on several clients (each with its own
// connection pool and Limiter, as separate processes would have) hammer one
// key. With t0 and t1 Redis TIME readings taken before the first and after
// the last decision, every decision's now lies in [t0, t1], so
//
//	admitted·T ≤ TAT_final − t0 ≤ (t1 + B·T) − t0,  i.e.  admitted ≤ B + (t1 − t0)/T
//
// (each admission raises TAT by T from at least max(TAT, now) ≥ t0, and no
// stored TAT runs more than B·T ahead of its now). The run is bounded by a
// count of attempts, not by time; no sleep orders anything.
func TestConcurrentBound(t *testing.T) {
	for _, cache := range []bool{false, true} {
		t.Run("cache="+strconv.FormatBool(cache), func(t *testing.T) {
			s := sharedServer(t)
			ctx := context.Background()
			const (
				clients    = 4
				goroutines = 8 // per client
				burst      = 20
			)
			attempts := int64(6000)
			if testing.Short() || raceEnabled {
				attempts = 2000
			}
			// T = 500µs: over a run of a second or so, thousands of tokens
			// refill, so both the bound and the denials are exercised.
			interval := 500 * time.Microsecond
			prefix := uniq(t)
			var opts []redislimit.Option
			opts = append(opts, redislimit.WithKeyPrefix(prefix))
			if cache {
				opts = append(opts, redislimit.WithOverLimitCache(16))
			}
			admin := s.client(t)
			lims := make([]*redislimit.Limiter[string], clients)
			for i := range lims {
				l, err := redislimit.New(s.client(t), gcra.Every(interval), burst, opts...)
				require.NoError(t, err)
				lims[i] = l
			}
			T := int64(lims[0].Params().Interval() / time.Microsecond)

			start, err := admin.Time(ctx).Result()
			require.NoError(t, err)
			var next, admitted, denied, errs atomic.Int64
			var wg sync.WaitGroup
			for i := range clients * goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := lims[i%clients]
					for next.Add(1) <= attempts {
						r := l.TakeResult(ctx, "hot", 1)
						switch {
						case r.Err != nil:
							errs.Add(1)
						case r.Allowed:
							admitted.Add(1)
						default:
							denied.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			end, err := admin.Time(ctx).Result()
			require.NoError(t, err)
			t0, t1 := start.UnixMicro(), end.UnixMicro()

			require.Zero(t, errs.Load())
			bound := burst + (t1-t0)/T
			a := admitted.Load()
			assert.LessOrEqual(t, a, bound, "admitted %d > B + elapsed/T = %d + %d/%d", a, burst, t1-t0, T)
			assert.GreaterOrEqual(t, a, int64(burst), "a full bucket admits its burst")
			assert.Positive(t, denied.Load(), "the limit was never reached: the test tests nothing")
			// The stored TAT is at most B·T ahead of the last TIME reading.
			val, err := admin.Get(ctx, lims[0].Key("hot")).Result()
			require.NoError(t, err)
			tat, err := strconv.ParseInt(val, 10, 64)
			require.NoError(t, err)
			assert.LessOrEqual(t, tat, t1+burst*T)
			assert.GreaterOrEqual(t, tat, t0+a*T)
			t.Logf("attempts %d admitted %d (bound %d) denied %d over %v", attempts, a, bound, denied.Load(), time.Duration(t1-t0)*time.Microsecond)
		})
	}
}
