package atomicbucket_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/gcra"
)

func TestNewRejectsBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		limit gcra.Limit
		burst int
		want  error
	}{
		{gcra.Limit{}, 1, gcra.ErrInvalidLimit},
		{gcra.PerSecond(-1), 1, gcra.ErrInvalidLimit},
		{gcra.Rate(math.NaN()), 1, gcra.ErrInvalidLimit},
		{gcra.Per(10, 5*time.Nanosecond), 1, gcra.ErrRateTooHigh},
		{gcra.PerSecond(1), 0, gcra.ErrInvalidBurst},
		{gcra.PerDay(1), 1 << 30, gcra.ErrOverflow},
	} {
		lim, err := atomicbucket.New(tc.limit, tc.burst)
		assert.ErrorIs(t, err, tc.want, "%v burst %d", tc.limit, tc.burst)
		assert.Nil(t, lim)
	}
}

// The limiter's methods, on a fake clock's timeline: each line is one call at
// time t (ms) and what it must return.
func TestLimiterTimeline(t *testing.T) {
	clk := newFakeClock()
	lim := newLimiter(t, gcra.PerSecond(100), 3, atomicbucket.WithClock(clk)) // T 10ms
	at := func(msec int64) time.Time { return clk.At(time.Duration(msec) * time.Millisecond) }
	ms := time.Millisecond

	assert.Equal(t, 3, lim.TokensAt(at(0)))
	assert.True(t, lim.AllowN(at(0), 2))
	assert.Equal(t, gcra.Decision{Allowed: false, Remaining: 1, RetryAfter: 10 * ms, ResetAfter: 20 * ms},
		lim.PeekAt(at(0), 2), "peek consumes nothing")
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 0, ResetAfter: 30 * ms, TokenAfter: 10 * ms},
		lim.DecideAt(at(0), 1))
	assert.False(t, lim.AllowN(at(9), 1))
	assert.Equal(t, 0, lim.TokensAt(at(9)))
	assert.True(t, lim.AllowN(at(10), 1))
	assert.False(t, lim.AllowN(at(5), 1), "a stale time is stricter")
	assert.False(t, lim.AllowN(at(100), 4), "n > burst")
	assert.False(t, lim.AllowN(at(100), 0), "n < 1")
	assert.Equal(t, 3, lim.TokensAt(at(100)))

	// The clock-reading forms read the fake clock.
	clk.Set(200 * ms)
	assert.Equal(t, 3, lim.Tokens())
	assert.True(t, lim.Allow())
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 0, ResetAfter: 30 * ms, TokenAfter: 10 * ms}, lim.Decide(2))
	assert.Equal(t, gcra.Decision{Remaining: 0, RetryAfter: 10 * ms, ResetAfter: 30 * ms, TokenAfter: 10 * ms}, lim.Peek(1))
	assert.False(t, lim.Allow())

	// Times before the limiter's epoch count as the epoch: never a refill.
	assert.Equal(t, lim.TokensAt(clk.At(0)), lim.TokensAt(clk.At(-time.Hour)))
}

func TestLimiterUnlimitedAndDenyAll(t *testing.T) {
	un := newLimiter(t, gcra.Unlimited, 1)
	for i := 0; i < 1000; i++ {
		require.True(t, un.Allow())
	}
	assert.Equal(t, math.MaxInt, un.Tokens())

	deny := newLimiter(t, gcra.DenyAll, 1)
	assert.False(t, deny.Allow())
	assert.Equal(t, gcra.Never, deny.Decide(1).RetryAfter)
	assert.Equal(t, 0, deny.Tokens())
}

func TestSetLimitKeepsTheTAT(t *testing.T) {
	clk := newFakeClock()
	lim := newLimiter(t, gcra.PerSecond(10), 10, atomicbucket.WithClock(clk)) // T 100ms, span 1s
	assert.Equal(t, "10/1s burst 10", lim.String())
	for i := 0; i < 10; i++ {
		require.True(t, lim.Allow())
	}
	// Drained: 1s until full. At 1/s with burst 5 (span 5s) the same 1s of
	// debt leaves floor((5s − 1s)/1s) = 4 tokens.
	require.NoError(t, lim.SetLimit(gcra.PerSecond(1), 5))
	assert.Equal(t, 4, lim.Tokens())
	assert.Equal(t, time.Second, lim.Params().Interval())
	assert.Equal(t, "1/1s burst 5", lim.String())

	// A bad limit changes nothing.
	assert.ErrorIs(t, lim.SetLimit(gcra.PerSecond(0), 5), gcra.ErrInvalidLimit)
	assert.ErrorIs(t, lim.SetLimit(gcra.PerSecond(1), 0), gcra.ErrInvalidBurst)
	assert.Equal(t, "1/1s burst 5", lim.String())

	// To deny everything from now on, and back.
	require.NoError(t, lim.SetLimit(gcra.DenyAll, 0))
	assert.False(t, lim.Allow())
	require.NoError(t, lim.SetLimit(gcra.Unlimited, 0))
	assert.True(t, lim.Allow())
}

func TestHotPathsAllocateNothing(t *testing.T) {
	for name, opts := range map[string][]atomicbucket.Option{
		"monotonic": nil,
		"coarse":    {atomicbucket.WithCoarseClock()},
		"fake":      {atomicbucket.WithClock(newFakeClock())},
	} {
		lim := newLimiter(t, gcra.PerSecond(1000), 10, opts...)
		now := time.Now()
		for op, f := range map[string]func(){
			"Allow":    func() { lim.Allow() },
			"AllowN":   func() { lim.AllowN(now, 1) },
			"Peek":     func() { lim.Peek(1) },
			"PeekAt":   func() { lim.PeekAt(now, 1) },
			"Decide":   func() { lim.Decide(1) },
			"DecideAt": func() { lim.DecideAt(now, 1) },
			"Tokens":   func() { lim.Tokens() },
		} {
			assert.Zero(t, testing.AllocsPerRun(1000, f), "%s/%s", name, op)
		}
	}
}
