package atomiclimit_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// The documented worst case of the coarse clock: a client that asks
// continuously is at most ⌈tick/T⌉ tokens behind the exact clock, never
// ahead, and the lag does not accumulate, provided (B−1)·T ≥ tick. Real time
// advances in fine steps; the coarse reading is real time rounded down to a
// multiple of the tick, and a denial refreshes it to real time.
func TestCoarseClockUnderAdmission(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		interval, tick time.Duration
		burst          int
	}{
		{ms, ms, 2},                  // tick = T = (B−1)·T
		{ms, 10 * ms, 11},            // tick ≫ T: up to 10 tokens behind
		{10 * ms, ms, 3},             // tick ≪ T
		{3 * ms, 7 * ms, 4},          // no common multiple
		{time.Microsecond, ms, 1001}, // 1M/s on a 1ms tick
	} {
		t.Run(fmt.Sprintf("T=%v/tick=%v/B=%d", tc.interval, tc.tick, tc.burst), func(t *testing.T) {
			require.GreaterOrEqual(t, time.Duration(tc.burst-1)*tc.interval, tc.tick, "test case outside the guarantee")
			coarse, exact, clk, reading, tick := coarsePair(t, tc.interval, tc.burst)
			maxLag := int64((tc.tick + tc.interval - 1) / tc.interval) // ⌈δ/T⌉
			var nCoarse, nExact, worst int64
			for real := time.Duration(0); real < 40*tc.tick+50*tc.interval; real += tc.interval / 7 {
				clk.Set(real)
				reading.Store(int64(real - real%tc.tick)) // the ticker, on time
				tick.Store(reading.Load())
				nCoarse += drain(coarse)
				nExact += drain(exact)
				require.LessOrEqual(t, nCoarse, nExact, "at %v: the coarse clock admitted more", real)
				require.LessOrEqual(t, nExact-nCoarse, maxLag, "at %v: under-admission beyond ⌈δ/T⌉", real)
				worst = max(worst, nExact-nCoarse)
			}
			t.Logf("at most %d behind the exact clock (a denial refreshes the reading)", worst)
		})
	}
}

// When every P runs work that does not yield, the ticker goroutine waits
// for one and the coarse reading stalls (about 20 ms measured). A limiter
// that drained its bucket then denied until the next tick: burst 20 at
// T = 100µs admitted about 9% of its rate. A denial now refreshes the
// reading from the precise clock: a client that asks continuously gets at
// least 99% of what the exact clock gives it, with the reading frozen.
func TestCoarseClockStalledTicker(t *testing.T) {
	for _, burst := range []int{20, 100} {
		t.Run(fmt.Sprintf("B=%d", burst), func(t *testing.T) {
			coarse, exact, clk, _, _ := coarsePair(t, 100*time.Microsecond, burst)
			var nCoarse, nExact int64
			for real := time.Duration(0); real < 200*time.Millisecond; real += 10 * time.Microsecond {
				clk.Set(real) // the reading is never advanced: the ticker cannot run
				nCoarse += drain(coarse)
				nExact += drain(exact)
				require.LessOrEqual(t, nCoarse, nExact, "at %v: the coarse clock admitted more", real)
			}
			require.GreaterOrEqual(t, float64(nCoarse), 0.99*float64(nExact), "admitted %d of the exact clock's %d", nCoarse, nExact)
		})
	}
}

// Why New rejects (B−1)·T < the coarse tick: such a bucket holds less than one
// tick's worth of tokens, so a client that asks continuously is denied
// within every tick and pays a precise clock read for most admissions: the
// coarse clock would cost more than the default one.
func TestCoarseClockSmallBucketIsRejected(t *testing.T) {
	_, err := atomiclimit.NewRule(atomiclimit.GCRA(gcra.Every(time.Millisecond), 1), atomiclimit.WithCoarseClock())
	assert.ErrorIs(t, err, atomiclimit.ErrOption)
	_, err = atomiclimit.NewRule(atomiclimit.GCRA(gcra.Per(1_000_000, time.Second), 1000), atomiclimit.WithCoarseClock())
	assert.ErrorIs(t, err, atomiclimit.ErrOption, "(1000−1)·1µs < 1ms")
	assert.Contains(t, err.Error(), "at least 1001")
	lim, err := atomiclimit.NewRule(atomiclimit.GCRA(gcra.Per(1_000_000, time.Second), 1001), atomiclimit.WithCoarseClock())
	require.NoError(t, err)
	assert.ErrorIs(t, lim.SetRule(atomiclimit.GCRA(gcra.Per(100, time.Second), 1)), atomiclimit.ErrOption)
	assert.NoError(t, lim.SetRule(atomiclimit.GCRA(gcra.Per(100, time.Second), 2)), "(2−1)·10ms ≥ 1ms")
	assert.NoError(t, lim.SetRule(atomiclimit.GCRA(gcra.Unlimited, 0)))
	assert.NoError(t, lim.SetRule(atomiclimit.GCRA(gcra.DenyAll, 0)))
	_, err = atomiclimit.NewRule(atomiclimit.GCRA(gcra.Every(time.Millisecond), 1)) // the default clock has no such limit
	assert.NoError(t, err)
}

// coarsePair returns a limiter on a hand-driven coarse reading and an exact
// one on a fake clock, both with limit Every(interval) and the burst; the
// coarse one's precise clock (its refresh) is the fake clock.
func coarsePair(t *testing.T, interval time.Duration, burst int) (coarse, exact *atomiclimit.Limiter, clk *fakeClock, reading, tick *atomic.Int64) {
	reading, tick = new(atomic.Int64), new(atomic.Int64) // the ticker ran at 0
	clk = newFakeClock()
	fresh := func() int64 { return int64(clk.Now().Sub(clk.At(0))) }
	coarse = newLimiter(t, gcra.Every(interval), burst, atomiclimit.WithSource(timebase.ManualCoarse(reading, tick, fresh)))
	exact = newLimiter(t, gcra.Every(interval), burst, atomiclimit.WithClock(clk))
	return coarse, exact, clk, reading, tick
}

// drain takes tokens one at a time until the limiter denies.
func drain(l *atomiclimit.Limiter) int64 {
	var n int64
	for l.Allow() {
		n++
	}
	return n
}

// The process-wide ticker runs while a coarse limiter is reachable and stops
// once the last one has been collected.
func TestCoarseClockStopsWhenUnused(t *testing.T) {
	lim := newLimiter(t, gcra.Per(1000, time.Second), 2, atomiclimit.WithCoarseClock())
	require.True(t, lim.Allow())
	require.True(t, atomiclimit.CoarseRunning())
	runtime.KeepAlive(lim)
	lim = nil

	// Cleanups run after a collection finds the limiter unreachable; bound
	// the number of collections rather than guessing a sleep.
	for i := 0; i < 100 && atomiclimit.CoarseRunning(); i++ {
		runtime.GC()
		time.Sleep(time.Millisecond) // let the cleanup goroutine run
	}
	assert.False(t, atomiclimit.CoarseRunning(), "ticker still running with no coarse limiter alive")
}
