package core_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/core"
)

// TestKeyedEvictionRace hammers four keys from many goroutines while another
// goroutine sweeps idle keys without pause, and every worker sweeps too every
// eighth step, so that removals land between any load of a cell and its
// CompareAndSwap. Time is a fake clock that the
// workers advance in random jumps, some shorter and some longer than B·T, so
// keys keep going idle and being removed while in use.
//
// The check is GCRA's exact bound, per key, over every window of request
// times: tokens admitted with times in [t1, t2] ≤ B + (t2 − t1)/T. It holds
// for any arrival order, stale times included (each admission raises TAT by
// n·T from at least t1, and none leaves it beyond t2 + B·T), and eviction
// must preserve it: a cell removed at TAT ≤ floor is replaced by one that
// starts at floor. A lost admission, or a second full burst granted on a
// fresh cell while the old one still admits, breaks the window [t, t].
func TestKeyedEvictionRace(t *testing.T) {
	decisions := int64(10_000_000)
	if raceEnabled || testing.Short() {
		decisions = 400_000
	}
	const (
		burst    = 5
		keys     = 4
		workers  = 8
		interval = time.Millisecond
		jumpEach = 48 // decisions per worker between clock jumps
	)
	clk := newFakeClock()
	k := newKeyed[string](t, gcra.Every(interval), burst, core.WithClock(clk), core.WithSweepInterval(0), core.WithShards(2))
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("key-%d", i)
	}
	// admitted[w][key][now] = tokens admitted by worker w at that request time.
	admitted := make([][keys]map[int64]int64, workers)
	var done atomic.Bool
	var made, sweeps, swept atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for i := range admitted[w] {
				admitted[w][i] = map[int64]int64{}
			}
			for i := 0; made.Add(1) <= decisions; i++ {
				if i%jumpEach == 0 {
					// 0.2 ms … 12 ms: B·T is 5 ms.
					clk.Advance(time.Duration(200_000 + rng.Int64N(int64(12*time.Millisecond))))
				}
				if i%8 == 0 {
					swept.Add(int64(k.SweepAt(clk.Now()))) // workers sweep too: removals between any two steps
					sweeps.Add(1)
				}
				key := rng.IntN(keys)
				n := 1 + rng.IntN(2)
				now := clk.Now()
				var ok bool
				if i%2 == 0 {
					ok = k.AllowN(names[key], now, n)
				} else {
					ok = k.DecideAt(names[key], now, n).Allowed // the other retry path
				}
				if ok {
					admitted[w][key][k.Nanos(now)] += int64(n)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			swept.Add(int64(k.SweepAt(clk.Now())))
			sweeps.Add(1)
		}
	}()
	// Wait for the workers (all but the sweeper), then stop the sweeper.
	for made.Load() <= decisions+workers-1 {
		time.Sleep(time.Millisecond) // polling for completion, not synchronising
	}
	done.Store(true)
	wg.Wait()

	T := int64(interval)
	for key := range keys {
		perTime := map[int64]int64{}
		for w := range workers {
			for at, n := range admitted[w][key] {
				perTime[at] += n
			}
		}
		times := make([]int64, 0, len(perTime))
		for at := range perTime {
			times = append(times, at)
		}
		slices.Sort(times)
		// With C(t) the tokens admitted at times ≤ t, the bound for all
		// t1 ≤ t2 is C(t2)·T − t2 ≤ B·T + C(t1−)·T − t1, C(t1−) counting
		// times < t1. One pass keeps the smallest right-hand side so far.
		var cum, total int64
		best := int64(1<<62 - 1) // min over t1 of C(t1−)·T − t1
		for _, at := range times {
			best = min(best, cum*T-at)
			cum += perTime[at]
			total += perTime[at]
			if lhs := cum*T - at; lhs-best > burst*T {
				t.Fatalf("%s: over-admission: a window ending at %v holds %.3f tokens more than B + Δ/T allows",
					names[key], time.Duration(at), float64(lhs-best-burst*T)/float64(T))
			}
		}
		t.Logf("%s: %d tokens at %d distinct times, within the bound in every window", names[key], total, len(times))
	}

	st := k.Stats()
	// Evicted counts retirements; swept the removals the sweeps finished
	// themselves (a caller that meets a retired cell may remove it first).
	require.GreaterOrEqual(t, st.Evicted, uint64(swept.Load()))
	require.Greater(t, st.Evicted, uint64(decisions/20_000), "keys must really be removed while in use")
	require.Equal(t, st.Created-st.Evicted, uint64(st.Keys))
	t.Logf("%d decisions; %d sweeps; %d cells retired (%d removed by their sweep, the rest by callers that met them retired); %d created",
		decisions, sweeps.Load(), st.Evicted, swept.Load(), st.Created)
}
