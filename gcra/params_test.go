package gcra_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
)

func TestNewParamsRejectsBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit gcra.Limit
		burst int
		want  error
	}{
		{"zero Limit", gcra.Limit{}, 1, gcra.ErrInvalidLimit},
		{"zero count", gcra.Per(0, time.Second), 1, gcra.ErrInvalidLimit},
		{"negative count", gcra.Per(-5, time.Minute), 1, gcra.ErrInvalidLimit},
		{"zero period", gcra.Per(1, 0), 1, gcra.ErrInvalidLimit},
		{"negative period", gcra.Per(1, -time.Second), 1, gcra.ErrInvalidLimit},
		{"Every(0)", gcra.Every(0), 1, gcra.ErrInvalidLimit},
		{"Every(-1s)", gcra.Every(-time.Second), 1, gcra.ErrInvalidLimit},
		{"zero float rate", gcra.Rate(0), 1, gcra.ErrInvalidLimit},
		{"negative float rate", gcra.Rate(-3), 1, gcra.ErrInvalidLimit},
		{"NaN rate", gcra.Rate(math.NaN()), 1, gcra.ErrInvalidLimit},
		{"+Inf rate", gcra.Rate(math.Inf(1)), 1, gcra.ErrInvalidLimit},
		{"-Inf rate", gcra.Rate(math.Inf(-1)), 1, gcra.ErrInvalidLimit},
		{"faster than 1/ns", gcra.Per(2, time.Nanosecond), 1, gcra.ErrRateTooHigh},
		{"1e9+1 per second", gcra.Per(1e9+1, time.Second), 1, gcra.ErrRateTooHigh},
		{"float faster than 1/ns", gcra.Rate(2e9), 1, gcra.ErrRateTooHigh},
		{"tiny float rate: interval overflows", gcra.Rate(1e-12), 1, gcra.ErrOverflow},
		{"zero burst", gcra.Per(10, time.Second), 0, gcra.ErrInvalidBurst},
		{"negative burst", gcra.Per(10, time.Second), -1, gcra.ErrInvalidBurst},
		{"burst × interval overflows", gcra.Per(1, 24*time.Hour), math.MaxInt32, gcra.ErrOverflow},
		{"burst × interval just over MaxSpan", gcra.Every(gcra.MaxSpan/2 + 1), 2, gcra.ErrOverflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gcra.NewParams(tc.limit, tc.burst)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			assert.Regexp(t, `^gcra: `, err.Error(), "messages carry the package prefix")
			// ErrInvalidLimit matches every configuration error; the precise
			// kinds match only their own.
			assert.ErrorIs(t, err, gcra.ErrInvalidLimit)
			for _, other := range []error{gcra.ErrRateTooHigh, gcra.ErrInvalidBurst, gcra.ErrOverflow} {
				if other != tc.want {
					assert.False(t, errors.Is(err, other), "also matches %v", other)
				}
			}
		})
	}
}

func TestNewParamsInterval(t *testing.T) {
	for _, tc := range []struct {
		limit gcra.Limit
		burst int
		want  time.Duration // T, rounded up
	}{
		{gcra.Per(10, time.Second), 1, 100 * time.Millisecond},
		{gcra.Per(3, time.Second), 1, 333333334},  // 333333333.3 rounded up
		{gcra.Per(7, time.Minute), 1, 8571428572}, // 8571428571.4 rounded up
		{gcra.Per(1000, time.Hour), 1, 3600 * time.Millisecond},
		{gcra.Per(10000, 24*time.Hour), 1, 8640 * time.Millisecond},
		{gcra.Per(3, 2*time.Second), 1, 666666667}, // 666666666.7 rounded up
		{gcra.Every(250 * time.Millisecond), 1, 250 * time.Millisecond},
		{gcra.Per(1e9, time.Second), 1, 1}, // exactly one per ns: allowed
		{gcra.Rate(2.5), 1, 400 * time.Millisecond},
		{gcra.Rate(3), 1, 333333334},
		{gcra.Rate(1e9), 1, 1},
		{gcra.Every(gcra.MaxSpan / 2), 2, gcra.MaxSpan / 2}, // B·T == MaxSpan: allowed
	} {
		p, err := gcra.NewParams(tc.limit, tc.burst)
		require.NoError(t, err, tc.limit)
		assert.Equal(t, tc.want, p.Interval(), tc.limit)
		assert.Equal(t, tc.burst, p.Burst())
		assert.Equal(t, time.Duration(tc.burst)*tc.want, p.Span())
		assert.Equal(t, tc.limit, p.Limit())
	}
}

func TestNamedLimits(t *testing.T) {
	un, err := gcra.NewParams(gcra.Unlimited, 0) // burst ignored
	require.NoError(t, err)
	assert.True(t, un.IsUnlimited())
	assert.Equal(t, math.MaxInt, un.Burst())

	deny, err := gcra.NewParams(gcra.DenyAll, -7) // burst ignored
	require.NoError(t, err)
	assert.False(t, deny.IsUnlimited())
	assert.Equal(t, 0, deny.Burst())

	assert.Equal(t, "unlimited", gcra.Unlimited.String())
	assert.Equal(t, "deny-all", gcra.DenyAll.String())
	assert.Equal(t, "invalid", gcra.Limit{}.String())
	for want, l := range map[string]gcra.Limit{
		"5/min": gcra.Per(5, time.Minute), "20/s": gcra.Per(20, time.Second), "3/h": gcra.Per(3, time.Hour), "10000/d": gcra.Per(10000, 24*time.Hour),
		"1/50ms": gcra.Every(50 * time.Millisecond), "1/ms": gcra.Every(time.Millisecond), "7/2s": gcra.Per(7, 2*time.Second), "1/15m": gcra.Every(15 * time.Minute),
		"1/1h30m": gcra.Every(90 * time.Minute), "2/48h": gcra.Per(2, 48*time.Hour),
	} {
		assert.Equal(t, want, l.String())
	}
	assert.Equal(t, "2.5/s", gcra.Rate(2.5).String())
}

func TestNanosClamps(t *testing.T) {
	assert.Equal(t, int64(0), gcra.Nanos(-time.Hour))
	assert.Equal(t, int64(42), gcra.Nanos(42))
	assert.Equal(t, int64(gcra.MaxNow), gcra.Nanos(time.Duration(math.MaxInt64)))
}
