package window_test

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
)

const goroutines = 16

// hammer runs f on goroutines goroutines at once and returns what each
// returned, in goroutine order.
func hammer[T any](f func(g int) T) []T {
	out := make([]T, goroutines)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[g] = f(g)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// perCall is how many calls each goroutine makes in the stale-now tests.
func perCall() int {
	if raceEnabled {
		return 1500
	}
	return 20000
}

// tick advances the shared clk by step and returns the new time: every call
// moves the clock, so the run crosses many windows however the goroutines
// are scheduled. A caller that yields between tick and its decision passes a
// stale now: the others have moved the clock and the state past it.
func tick(clk *fakeClock, step time.Duration) time.Time { return t0.Add(clk.Advance(step)) }

// admission is one admitted call: the now it passed, its size, and the time
// the clock showed once it returned.
type admission struct {
	now, after time.Duration
	n          int
	counted    int64 // fixed: end of the window it was counted in; counter: start of it
}

// At frozen instants (the clock moves only between rounds), 16 goroutines
// take what they can; each round admits exactly what one goroutine alone
// admits in the same round: nothing lost to a race, nothing minted by one.
func TestConcurrentRoundsAreExact(t *testing.T) {
	steps := []time.Duration{0, 300 * time.Millisecond, 700 * time.Millisecond, 50 * time.Millisecond, 0, 1900 * time.Millisecond, 10 * time.Second}
	type lim interface{ AllowN(time.Time, int) bool }
	for _, tc := range []struct {
		name string
		make func(clk *fakeClock) (lim, error)
	}{
		{"fixed", func(c *fakeClock) (lim, error) {
			return atomiclimit.NewRule(atomiclimit.FixedWindow(7, time.Second), atomiclimit.WithClock(c))
		}},
		{"counter", func(c *fakeClock) (lim, error) {
			return atomiclimit.NewRule(atomiclimit.SlidingCounter(7, time.Second), atomiclimit.WithClock(c))
		}},
		{"log", func(c *fakeClock) (lim, error) {
			return atomiclimit.NewRule(atomiclimit.SlidingLog(7, time.Second), atomiclimit.WithClock(c))
		}},
	} {
		t.Run("algo="+tc.name, func(t *testing.T) {
			clk, seqClk := newFakeClock(), newFakeClock()
			conc, err := tc.make(clk)
			require.NoError(t, err)
			seq, err := tc.make(seqClk)
			require.NoError(t, err)
			drain := func(l lim, c *fakeClock) int {
				k := 0
				for l.AllowN(c.Now(), 1) {
					k++
				}
				return k
			}
			total := 0
			for r, step := range steps {
				clk.Advance(step)
				seqClk.Advance(step)
				want := drain(seq, seqClk)
				got := 0
				for _, k := range hammer(func(int) int { return drain(conc, clk) }) {
					got += k
				}
				require.Equal(t, want, got, "round %d", r)
				total += got
			}
			assert.Greater(t, total, 7, "rounds after the first admit too")
		})
	}
}

// Fixed window under a clock that every call moves, and stale nows: every window counts at
// most N; an admission is counted in a window no earlier than its now's and
// no later than the clock's when the call returned.
func TestFixedConcurrentPerWindowBound(t *testing.T) {
	const limit = 5
	period := time.Millisecond
	clk := newFakeClock()
	lim, err := atomiclimit.NewRule(atomiclimit.FixedWindow(limit, period), atomiclimit.WithClock(clk))
	require.NoError(t, err)
	logs := hammer(func(g int) []admission {
		var got []admission
		for i := range perCall() {
			now := tick(clk, period/50)
			if i%5 == g%5 {
				runtime.Gosched() // let the clock and the others move past now
			}
			n := 1 + (i+g)%2
			if d := lim.TakeN(now, n); d.Allowed {
				got = append(got, admission{now: now.Sub(t0), after: clk.Now().Sub(t0), n: n, counted: int64(now.Sub(t0) + d.ResetAfter)})
			}
		}
		return got
	})
	perWindow := map[int64]int{}
	total, late := 0, 0
	for _, l := range logs {
		for _, a := range l {
			perWindow[a.counted] += a.n
			total += a.n
			end := func(d time.Duration) int64 { return (int64(d)/int64(period) + 1) * int64(period) }
			require.GreaterOrEqual(t, a.counted, end(a.now), "counted in a window before its now's")
			require.LessOrEqual(t, a.counted, end(a.after), "counted in a window after it returned")
			if a.counted > end(a.now) {
				late++ // a stale now, counted in the newer window
			}
		}
	}
	for w, k := range perWindow {
		require.LessOrEqual(t, k, limit, "window ending at %d", w)
	}
	t.Logf("%d admitted in %d windows by %d goroutines; %d with a stale now counted in a later window", total, len(perWindow), goroutines, late)
	assert.Greater(t, len(perWindow), 10, "the clock crossed many windows")
}

// The exact log under a moving clock and stale nows: at most N admitted
// nows in every rolling window, checked for every window that ends at an
// admitted time.
func TestLogConcurrentRollingBound(t *testing.T) {
	for _, limit := range []int{1, 4, 32} {
		period := time.Duration(limit) * 50 * time.Microsecond
		clk := newFakeClock()
		lim, err := atomiclimit.NewRule(atomiclimit.SlidingLog(limit, period), atomiclimit.WithClock(clk))
		require.NoError(t, err)
		logs := hammer(func(g int) []int64 {
			var got []int64
			for i := range perCall() {
				now := tick(clk, period/50)
				if i%3 == g%3 {
					runtime.Gosched()
				}
				if lim.AllowN(now, 1) {
					got = append(got, int64(now.Sub(t0)))
				}
			}
			return got
		})
		all := slices.Concat(logs...)
		slices.Sort(all)
		require.LessOrEqual(t, maxInWindow(all, int64(period)), limit, "N=%d", limit)
		t.Logf("N=%d: %d admitted over %v by %d goroutines", limit, len(all), time.Duration(all[len(all)-1]-all[0]), goroutines)
		assert.Greater(t, len(all), 10*limit, "N=%d: the run spans many windows", limit)
	}
}

// The same with the real monotonic clock and Allow (the hot path users call).
func TestLogConcurrentRealClock(t *testing.T) {
	const limit = 8
	period := 200 * time.Microsecond
	lim, err := atomiclimit.NewRule(atomiclimit.SlidingLog(limit, period))
	require.NoError(t, err)
	var admitted atomic.Int64
	base := time.Now() // monotonic differences, as the limiter reads them
	logs := hammer(func(g int) []int64 {
		var got []int64
		for i := range perCall() / 4 {
			now := time.Now()
			if i%4 == g%4 {
				runtime.Gosched()
			}
			if lim.AllowN(now, 1) {
				got = append(got, int64(now.Sub(base)))
				admitted.Add(1)
			}
		}
		return got
	})
	all := slices.Concat(logs...)
	slices.Sort(all)
	require.LessOrEqual(t, maxInWindow(all, int64(period)), limit)
	t.Logf("%d admitted", admitted.Load())
}

// The counter under a moving clock and stale nows: at most N counted per
// fixed window, and at most 2N−1 in any rolling window of the times the
// decisions were made at (a stale now is decided at the start of the
// window the cell already counts, not at the now the caller passed).
func TestCounterConcurrentBounds(t *testing.T) {
	const limit = 6
	period := time.Millisecond
	clk := newFakeClock()
	lim, err := atomiclimit.NewRule(atomiclimit.SlidingCounter(limit, period), atomiclimit.WithClock(clk))
	require.NoError(t, err)
	logs := hammer(func(g int) []admission {
		var got []admission
		for i := range perCall() {
			now := tick(clk, period/50)
			if i%5 == g%5 {
				runtime.Gosched()
			}
			n := 1 + (i+g)%2
			if d := lim.TakeN(now, n); d.Allowed {
				// allowed ⇒ cur > 0 ⇒ ResetAfter = window start + 2W − now
				got = append(got, admission{now: now.Sub(t0), n: n, counted: int64(now.Sub(t0)+d.ResetAfter) - 2*int64(period)})
			}
		}
		return got
	})
	perWindow := map[int64]int{}
	var nows []int64
	for _, l := range logs {
		for _, a := range l {
			perWindow[a.counted] += a.n
			for range a.n {
				nows = append(nows, max(int64(a.now), a.counted))
			}
		}
	}
	for w, k := range perWindow {
		require.LessOrEqual(t, k, limit, "window starting at %d", w)
	}
	slices.Sort(nows)
	require.LessOrEqual(t, maxInWindow(nows, int64(period)), 2*limit-1)
	assert.Greater(t, len(perWindow), 10)
}
