package window_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/window"
)

// stepClock reads a time the test sets.
type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time { return c.t }

// The arithmetic decides as the in-process limiters of the same rule do,
// decision for decision, on a timeline that crosses windows and goes back:
// it is theirs. (The windows of both start at the limiter's epoch, t0.)
func TestDecidesAsTheLimiters(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	period := time.Second
	fixed, err := window.NewFixedParams(3, period, 0)
	require.NoError(t, err)
	counter, err := window.NewCounterParams(3, period, 0)
	require.NoError(t, err)
	anchored, err := window.NewAnchoredParams(3, period)
	require.NoError(t, err)
	for _, c := range []struct {
		name   string
		rule   atomiclimit.Rule
		decide func(state uint64, now int64, n int) (uint64, atomiclimit.Decision)
	}{
		{"fixed", atomiclimit.FixedWindow(3, period), fixed.Decide},
		{"counter", atomiclimit.SlidingCounter(3, period), counter.Decide},
		{"anchored", atomiclimit.AnchoredWindow(3, period), anchored.Decide},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := &stepClock{t: t0}
			lim, err := atomiclimit.NewRule(c.rule, atomiclimit.WithClock(clk))
			require.NoError(t, err)
			var state uint64
			for i, at := range []time.Duration{0, 0, 100e6, 200e6, 900e6, 1100e6, 1200e6, 1150e6, 2500e6, 2600e6, 2700e6, 2800e6, 4000e6} {
				n := 1 + i%2
				want := lim.TakeN(t0.Add(at), n)
				var got atomiclimit.Decision
				state, got = c.decide(state, int64(at), n)
				require.Equal(t, want, got, "step %d at %v", i, at)
			}
		})
	}
	log, err := window.NewLogParams(2, period)
	require.NoError(t, err)
	require.Equal(t, 2, log.Limit())
	u, d := log.Decide(0, 0, int64(time.Second))
	require.True(t, d.Allowed)
	require.Equal(t, int64(2*time.Second), u, "expires a window after now")
}

// The constructors reject what the rules reject, with errors.Is-matchable
// sentinels.
func TestConstructorErrors(t *testing.T) {
	_, err := window.NewFixedParams(0, time.Second, 0)
	require.ErrorIs(t, err, window.ErrInvalidLimit)
	_, err = window.NewCounterParams(1, 0, 0)
	require.ErrorIs(t, err, window.ErrInvalidPeriod)
	_, err = window.NewRollingParams(10, 90*time.Minute, time.Hour, 0, 0)
	require.ErrorIs(t, err, window.ErrInvalidPeriod, "a window that is not whole slices")
	_, err = window.NewLogParams(1<<25, time.Second)
	require.ErrorIs(t, err, window.ErrOverflow)
}
