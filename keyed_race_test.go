package atomiclimit_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// An admission as the race test records it: the request's time (ns since
// the limiter's epoch), its n, and the decision's ResetAfter, from which the
// window an admission was counted in can be read back (a stale time is
// counted in the window the state already holds, so the request's own time
// does not say).
type admission struct {
	at, n, reset int64
}

// raceCase is one algorithm under TestKeyedEvictionRace: its rule, how many
// tokens a request takes (the log takes one), and the bound every key's
// admissions must keep.
type raceCase struct {
	name  string
	rule  atomiclimit.Rule
	maxN  int
	check func(t *testing.T, key string, adm []admission)
}

// TestKeyedEvictionRace hammers four keys from many goroutines while another
// goroutine sweeps idle keys without pause, and every worker sweeps too every
// eighth step, so that removals land between any load of a state and its
// CompareAndSwap. Time is a fake clock that the workers advance in random
// jumps, some shorter and some longer than the time a key takes to become
// idle, so keys keep going idle and being removed while in use. It runs for
// every algorithm, and for bands, each against its exact bound per key:
//
//   - GCRA, over every window of request times: tokens admitted with times
//     in [t1, t2] ≤ B + (t2 − t1)/T. It holds for any arrival order, stale
//     times included (each admission raises TAT by n·T from at least t1, and
//     none leaves it beyond t2 + B·T), and eviction must preserve it: a state
//     removed at TAT ≤ floor is replaced by one that starts at floor.
//   - The fixed window and the sliding counter: at most N counted in any one
//     fixed window, the window read back from ResetAfter.
//   - The sliding log, over request times: at most N in any (t − W, t].
//   - Bands of GCRA and a log: both bounds at once.
//
// A lost admission, or a second full quota granted on a fresh state while
// the old one still admits, breaks them. At full length (go test without
// -race or -short, as CI runs it) the cases make 2.6·10^7 decisions.
func TestKeyedEvictionRace(t *testing.T) {
	const interval = time.Millisecond
	T := int64(interval)
	cases := []raceCase{
		{"gcra", atomiclimit.GCRA(gcra.Every(interval), 5), 2, func(t *testing.T, key string, adm []admission) {
			checkGCRA(t, key, adm, 5, T)
		}},
		{"fixed", atomiclimit.FixedWindow(5, 5*interval), 2, func(t *testing.T, key string, adm []admission) {
			checkWindows(t, key, adm, 5, 0)
		}},
		{"counter", atomiclimit.SlidingCounter(5, 5*interval), 2, func(t *testing.T, key string, adm []admission) {
			checkWindows(t, key, adm, 5, 5*T) // ResetAfter runs to the end of the next window
		}},
		{"log", atomiclimit.SlidingLog(5, 5*interval), 1, func(t *testing.T, key string, adm []admission) {
			checkLog(t, key, adm, 5, 5*T)
		}},
		{"anchored", atomiclimit.AnchoredWindow(5, 5*interval), 2, func(t *testing.T, key string, adm []admission) {
			checkWindows(t, key, adm, 5, 0) // ResetAfter runs to the end of the key's window
			checkAnchored(t, key, adm, 5*T)
		}},
		{"rolling", atomiclimit.Rolling(8, 5*interval, interval, 3), 2, func(t *testing.T, key string, adm []admission) {
			checkRolling(t, key, adm, 8, 3, 5, T)
		}},
		{"bands", atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(interval), 5), atomiclimit.SlidingLog(4, 3*interval)), 1, func(t *testing.T, key string, adm []admission) {
			checkGCRA(t, key, adm, 5, T)
			checkLog(t, key, adm, 4, 3*T)
		}},
	}
	for _, c := range cases {
		t.Run("algo="+c.name, func(t *testing.T) {
			decisions := int64(10_000_000)
			if c.name != "gcra" {
				decisions = 4_000_000
			}
			if raceEnabled || testing.Short() {
				decisions /= 25
			}
			evictionRace(t, c, decisions)
		})
	}
}

func evictionRace(t *testing.T, c raceCase, decisions int64) {
	const (
		keys     = 4
		workers  = 8
		jumpEach = 48 // decisions per worker between clock jumps
	)
	clk := newFakeClock()
	k, err := atomiclimit.NewKeyedRule[string](c.rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0), atomiclimit.WithShards(2))
	require.NoError(t, err)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("key-%d", i)
	}
	admitted := make([][keys][]admission, workers)
	var done atomic.Bool
	var made, sweeps, swept atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for i := 0; made.Add(1) <= decisions; i++ {
				if i%jumpEach == 0 {
					// 0.2 ms … 12 ms: every rule here is idle 5 ms after its
					// last admission (10 ms for the counter).
					clk.Advance(time.Duration(200_000 + rng.Int64N(int64(12*time.Millisecond))))
				}
				if i%8 == 0 {
					swept.Add(int64(k.SweepAt(clk.Now()))) // workers sweep too: removals between any two steps
					sweeps.Add(1)
				}
				key := rng.IntN(keys)
				n := 1 + rng.IntN(c.maxN)
				now := clk.Now()
				if i%16 == 5 {
					// A stale time, as from a caller preempted between reading
					// the clock and deciding: up to 6 ms back, across windows
					// and past the removal of the state it would have met.
					now = now.Add(-time.Duration(rng.Int64N(int64(6 * time.Millisecond))))
				}
				var ok bool
				var reset time.Duration
				if i%2 == 0 {
					ok = k.AllowN(names[key], now, n)
					if ok {
						reset = -1 // unknown: only the request-time checks use it
					}
				} else {
					d := decideN(k, names[key], now, n) // the other retry path
					ok, reset = d.Allowed, d.ResetAfter
				}
				if ok {
					admitted[w][key] = append(admitted[w][key], admission{k.Nanos(now), int64(n), int64(reset)})
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

	for key := range keys {
		var all []admission
		for w := range workers {
			all = append(all, admitted[w][key]...)
		}
		c.check(t, names[key], all)
	}
	st := k.Stats()
	// Evicted counts retirements; swept the removals the sweeps finished
	// themselves (a caller that meets a retired state may remove it first).
	require.GreaterOrEqual(t, st.Evicted, uint64(swept.Load()))
	require.Equal(t, st.Created-st.Evicted, uint64(st.Keys))
	t.Logf("%d decisions; %d sweeps; %d states retired (%d removed by their sweep, the rest by callers that met them retired); %d created",
		decisions, sweeps.Load(), st.Evicted, swept.Load(), st.Created)
	// How many of those removals met a key in use depends on the
	// interleaving (with every worker on a core of its own, keys are idle
	// less often): the count is logged, not hoped for. What is guaranteed
	// is checked: an idle phase removes every key, and each comes back.
	clk.Advance(time.Second)
	require.Equal(t, st.Keys, k.SweepAt(clk.Now()), "every key idle after a second")
	for _, name := range names {
		require.True(t, k.AllowN(name, clk.Now(), 1), "%s comes back", name)
	}
}

// checkGCRA asserts B + (t2 − t1)/T over every window of request times.
func checkGCRA(t *testing.T, key string, adm []admission, burst, T int64) {
	t.Helper()
	perTime := map[int64]int64{}
	for _, a := range adm {
		perTime[a.at] += a.n
	}
	times := make([]int64, 0, len(perTime))
	for at := range perTime {
		times = append(times, at)
	}
	slices.Sort(times)
	// With C(t) the tokens admitted at times ≤ t, the bound for all t1 ≤ t2
	// is C(t2)·T − t2 ≤ B·T + C(t1−)·T − t1, C(t1−) counting times < t1. One
	// pass keeps the smallest right-hand side so far.
	var cum int64
	best := int64(1<<62 - 1) // min over t1 of C(t1−)·T − t1
	for _, at := range times {
		best = min(best, cum*T-at)
		cum += perTime[at]
		if lhs := cum*T - at; lhs-best > burst*T {
			t.Fatalf("%s: over-admission: a window ending at %v holds %.3f tokens more than B + Δ/T allows",
				key, time.Duration(at), float64(lhs-best-burst*T)/float64(T))
		}
	}
	t.Logf("%s: %d tokens at %d distinct times, within B + Δ/T in every window", key, cum, len(times))
}

// checkWindows asserts at most n counted in any one fixed window. The
// window an admission was counted in ends at at + reset − extra (reset is
// ResetAfter; extra is how far past that window's end ResetAfter reaches).
// Admissions made through AllowN carry no ResetAfter and are left out: the
// bound over those that carry one is still exact for them, and every other
// admission can only add to a window, never take a counted one away.
func checkWindows(t *testing.T, key string, adm []admission, n, extra int64) {
	t.Helper()
	perWindow := map[int64]int64{}
	counted := 0
	for _, a := range adm {
		if a.reset < 0 {
			continue
		}
		perWindow[a.at+a.reset-extra] += a.n
		counted++
	}
	for end, c := range perWindow {
		if c > n {
			t.Fatalf("%s: %d counted in the window ending at %v, more than %d", key, c, time.Duration(end), n)
		}
	}
	require.NotZero(t, counted, "%s: no admission carried its window", key)
	t.Logf("%s: %d admissions in %d windows, each within %d", key, counted, len(perWindow), n)
}

// checkAnchored asserts that a key's anchored windows never overlap: a
// window opens only once the one before it has ended, so their ends (read
// back from ResetAfter) are at least a window apart. An overlap is a second
// full quota inside one window.
func checkAnchored(t *testing.T, key string, adm []admission, w int64) {
	t.Helper()
	var ends []int64
	for _, a := range adm {
		if a.reset >= 0 {
			ends = append(ends, a.at+a.reset)
		}
	}
	slices.Sort(ends)
	ends = slices.Compact(ends)
	for i := 1; i < len(ends); i++ {
		if ends[i]-ends[i-1] < w {
			t.Fatalf("%s: windows ending at %v and %v overlap", key, time.Duration(ends[i-1]), time.Duration(ends[i]))
		}
	}
}

// checkRolling asserts at most q counted in any run of k aligned slices of
// length p, and at most c in any one slice. An admission is counted in the
// head's slice, the latest counted one, and ResetAfter runs until that slice
// leaves the window, k slices after it starts: so the slice ends at
// at + ResetAfter − (k−1)·p. AllowN admissions carry no ResetAfter and are
// left out.
func checkRolling(t *testing.T, key string, adm []admission, q, c, k, p int64) {
	t.Helper()
	perSlice := map[int64]int64{} // slice index → count
	for _, a := range adm {
		if a.reset < 0 {
			continue
		}
		end := a.at + a.reset - (k-1)*p
		perSlice[end/p-1] += a.n
	}
	require.NotEmpty(t, perSlice, "%s: no admission carried its slice", key)
	var slices []int64
	for s, n := range perSlice {
		if n > c {
			t.Fatalf("%s: %d counted in slice %d, more than %d", key, n, s, c)
		}
		slices = append(slices, s)
	}
	for _, s := range slices {
		var sum int64
		for j := s; j < s+k; j++ {
			sum += perSlice[j]
		}
		if sum > q {
			t.Fatalf("%s: %d counted in slices %d…%d, more than %d", key, sum, s, s+k-1, q)
		}
	}
	t.Logf("%s: %d slices, each within %d, every run of %d within %d", key, len(perSlice), c, k, q)
}

// checkLog asserts at most n admissions with request times in any (t − w, t].
func checkLog(t *testing.T, key string, adm []admission, n int, w int64) {
	t.Helper()
	times := make([]int64, 0, len(adm))
	for _, a := range adm {
		for range a.n {
			times = append(times, a.at)
		}
	}
	slices.Sort(times)
	for i := n; i < len(times); i++ {
		// times[i−n] … times[i] are n+1 admissions: they must span at least w.
		if times[i]-times[i-n] < w {
			t.Fatalf("%s: %d admissions within %v, from %v to %v", key, n+1, time.Duration(w), time.Duration(times[i-n]), time.Duration(times[i]))
		}
	}
	t.Logf("%s: %d admissions, at most %d in every rolling %v", key, len(times), n, time.Duration(w))
}
