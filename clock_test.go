package atomiclimit_test

import (
	"fmt"
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
			clk.Advance(time.Hour) // a and b idle
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
