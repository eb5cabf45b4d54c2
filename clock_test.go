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

const year = 365 * 24 * time.Hour

// everyRule is one rule of each kind, each admitting at most 5 at one
// instant (the log and the rolling window 1 per request).
func everyRule() map[string]atomiclimit.Rule {
	return map[string]atomiclimit.Rule{
		"gcra":     atomiclimit.GCRA(atomiclimit.PerSecond(10), 5),
		"fixed":    atomiclimit.FixedWindow(5, time.Second),
		"fixedUTC": atomiclimit.FixedWindowUTC(5, time.Second, 0),
		"anchored": atomiclimit.AnchoredWindow(5, time.Second),
		"counter":  atomiclimit.SlidingCounter(5, time.Second),
		"log":      atomiclimit.SlidingLog(5, time.Second),
		"rolling":  atomiclimit.Rolling(5, time.Second, 100*time.Millisecond, 0),
		"bands": atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerSecond(10), 5),
			atomiclimit.FixedWindow(50, time.Minute), atomiclimit.SlidingLog(5, time.Second)),
		// A denial looks at the band that denied (algo.Set.Suspect): here
		// a window first, its IdleAfter a day, beside a GCRA band of 500ms.
		"bands/window-first": atomiclimit.Bands(atomiclimit.FixedWindow(5, 24*time.Hour),
			atomiclimit.GCRA(atomiclimit.PerSecond(10), 5)),
	}
}

// fill admits at at until the limiter denies, and returns how many.
func fill(allow func(at time.Time) bool, at time.Time) int {
	n := 0
	for allow(at) {
		n++
	}
	return n
}

// Issue 28: a time stamped 10 years ahead (or a clock that went back) left
// every rule's key denied for 10 years and never removed. A request near
// the clock that meets such a state starts the key again as new; so does a
// sweep that finds it; the floors of new keys stay where they were.
func TestFarStateStartsAgain(t *testing.T) {
	for name, rule := range everyRule() {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			k, err := atomiclimit.NewKeyedRule[string](rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			defer k.Close()
			require.Equal(t, 5, fill(func(at time.Time) bool { return k.AllowN("a", at, 1) }, clk.At(10*year)))
			require.False(t, k.AllowN("a", clk.At(10*year), 1), "the state holds at its own time")

			// At the clock: the key starts again as new, with a full quota.
			assert.Equal(t, 5, fill(func(at time.Time) bool { return k.AllowN("a", at, 1) }, clk.Now()), "key a")
			assert.Equal(t, uint64(1), k.Stats().EvictedActive)
			// The other keys' floors were not raised to it.
			assert.Equal(t, 5, fill(func(at time.Time) bool { return k.AllowN("b", at, 1) }, clk.Now()), "key b")

			// A key that is never asked for again is removed by a sweep.
			require.Equal(t, 5, fill(func(at time.Time) bool { return k.AllowN("c", at, 1) }, clk.At(10*year)))
			clk.Advance(48 * time.Hour) // a and b idle
			assert.Equal(t, 3, k.Sweep(), "a, b idle; c far")
			assert.Zero(t, k.Stats().Keys)

			// The single-key Limiter, Take and Peek alike.
			l, err := atomiclimit.NewRule(rule, atomiclimit.WithClock(clk))
			require.NoError(t, err)
			require.Equal(t, 5, fill(func(at time.Time) bool { return l.TakeN(at, 1).Allowed }, clk.At(10*year)))
			assert.True(t, l.Peek(1).Allowed, "a peek at the clock forgets it too")
			assert.Equal(t, 5, fill(func(time.Time) bool { return l.Take(1).Allowed }, clk.Now()))
			assert.False(t, l.Allow())
		})
	}
}

// Far is not only years: a state stamped four days ahead, twice the
// longest reach of these rules (a day's window) and more, is far too, and
// the band that denies it at the clock is the one that says so, whichever
// band it is.
func TestFarStateDaysAhead(t *testing.T) {
	for name, rule := range everyRule() {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			ahead := clk.At(96 * time.Hour)
			k, err := atomiclimit.NewKeyedRule[string](rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			defer k.Close()
			l, err := atomiclimit.NewRule(rule, atomiclimit.WithClock(clk))
			require.NoError(t, err)
			require.Equal(t, 5, fill(func(at time.Time) bool { return k.AllowN("a", at, 1) }, ahead))
			require.Equal(t, 5, fill(func(at time.Time) bool { return l.AllowN(at, 1) }, ahead))
			assert.Equal(t, 5, fill(func(time.Time) bool { return k.Allow("a") }, clk.Now()), "keyed")
			assert.Equal(t, 5, fill(func(time.Time) bool { return l.Allow() }, clk.Now()), "limiter")
		})
	}
}

// On the default clock, which never goes back, only a time a caller gives
// can make a far state, and the limiters look for one on a denial only once
// a caller has given a time (Limiter.mayBeFar): that time is noted before
// it is decided, so the first denial at the clock that meets the state
// still starts the key again.
func TestFarStateOnTheDefaultClock(t *testing.T) {
	for name, rule := range everyRule() {
		t.Run(name, func(t *testing.T) {
			k, err := atomiclimit.NewKeyedRule[string](rule, atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			defer k.Close()
			l, err := atomiclimit.NewRule(rule)
			require.NoError(t, err)
			ahead := time.Now().Add(10 * year)
			require.Equal(t, 5, fill(func(at time.Time) bool { return k.AllowN("a", at, 1) }, ahead))
			require.Equal(t, 5, fill(func(at time.Time) bool { return l.AllowN(at, 1) }, ahead))
			// At least 5: the real clock may pass a window's end meanwhile.
			assert.GreaterOrEqual(t, fill(func(time.Time) bool { return k.Allow("a") }, time.Time{}), 5, "keyed")
			assert.GreaterOrEqual(t, fill(func(time.Time) bool { return l.Allow() }, time.Time{}), 5, "limiter")
		})
	}
}

// A clock that goes back by years (WithClock) does not hold the keys its
// later reading finds in the future.
func TestClockJumpBack(t *testing.T) {
	for name, rule := range everyRule() {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			k, err := atomiclimit.NewKeyedRule[string](rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			defer k.Close()
			l, err := atomiclimit.NewRule(rule, atomiclimit.WithClock(clk))
			require.NoError(t, err)
			clk.Set(10 * year)
			require.Equal(t, 5, fill(func(time.Time) bool { return k.Allow("a") }, clk.Now()))
			require.Equal(t, 5, fill(func(time.Time) bool { return l.Allow() }, clk.Now()))
			clk.Set(9 * year) // back a year
			assert.Equal(t, 5, fill(func(time.Time) bool { return k.Allow("a") }, clk.Now()), "keyed")
			assert.Equal(t, 5, fill(func(time.Time) bool { return l.Allow() }, clk.Now()), "limiter")
		})
	}
}

// Within reach, a stale time is decided stricter, never forgotten: a time
// behind the state by less than twice its longest idle time (here GCRA's
// B·T = 500ms: 900ms back) meets the state as it is. So does a reservation
// queue far ahead, within the reach its waits raised. And a caller that
// stamps its own times over a clock it never moves (a simulation) is
// decided as it says.
func TestFarStateWithinReachStays(t *testing.T) {
	clk := newFakeClock()
	clk.Set(time.Hour)
	k := newKeyed[string](t, atomiclimit.PerSecond(10), 5, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.Equal(t, 5, fill(func(at time.Time) bool { return k.AllowN("a", at, 1) }, clk.Now()))
	assert.False(t, k.AllowN("a", clk.Now().Add(-900*time.Millisecond), 1), "stale by 900ms: stricter")

	for i := range 100 { // 10 s of reservations queued
		_, err := k.ReserveN("q", clk.Now(), 1)
		require.NoError(t, err, "reservation %d", i)
	}
	assert.False(t, k.Allow("q"), "the queue holds the key")
	assert.Equal(t, 0, k.Sweep())

	sim := newKeyed[string](t, atomiclimit.PerSecond(10), 5, atomiclimit.WithClock(newFakeClock()), atomiclimit.WithSweepInterval(0))
	at := clk.At(10 * year)
	require.Equal(t, 5, fill(func(at time.Time) bool { return sim.AllowN("s", at, 1) }, at))
	assert.False(t, sim.AllowN("s", at.Add(-900*time.Millisecond), 1), "a stamped time, stale: stricter")
	assert.Equal(t, 0, sim.SweepAt(at), "a sweep at a stamped time keeps it")
	assert.Zero(t, sim.Stats().EvictedActive)
	assert.Equal(t, fmt.Sprint(1), fmt.Sprint(sim.Stats().Keys))
}

// The clock's latest time is the arithmetic's (timebase does not import
// gcra: it only needs where gcra's times end).
func TestClockEndsWhereTheArithmeticDoes(t *testing.T) {
	assert.Equal(t, int64(gcra.MaxNow), timebase.MaxNow)
}

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
