package redislimit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// TestConstructorErrorsSayPackageOnce: every error a constructor of this
// package returns starts with "redislimit: " and says it once, however many
// of this package's errors it wraps (before, a band's error read
// "redislimit: anchored 10/2s: redislimit: not decided in redis: …"); each
// matches ErrConfig, and the kind it is (errors.Is).
func TestConstructorErrorsSayPackageOnce(t *testing.T) {
	none := &noServer{}
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // ContextTimeoutEnabled off; never dialled
	t.Cleanup(func() { plain.Close() })
	min1 := atomiclimit.SlidingLog(60, time.Minute)
	newRule := func(c redis.Scripter, r atomiclimit.Rule, opts ...redislimit.Option) func() error {
		return func() error { _, err := redislimit.NewRule(c, r, opts...); return err }
	}
	newGCRA := func(c redis.Scripter, lim gcra.Limit, burst int, opts ...redislimit.Option) func() error {
		return func() error { _, err := redislimit.New(c, lim, burst, opts...); return err }
	}
	leased := func(l *redislimit.Limiter[string], maxLease int, minLife time.Duration) func() error {
		return func() error { _, err := redislimit.NewLeased(l, maxLease, minLife); return err }
	}
	ok, err := redislimit.New(none, gcra.Per(10, time.Second), 10)
	require.NoError(t, err)
	static, err := redislimit.New(none, gcra.Unlimited, 1)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		call func() error
		want error
	}{
		{"New: nil client", newGCRA(nil, gcra.Per(1, time.Second), 1), redislimit.ErrNilClient},
		{"New: burst 0", newGCRA(none, gcra.Per(1, time.Second), 0), gcra.ErrInvalidBurst},
		{"New: rate 0", newGCRA(none, gcra.Per(0, time.Second), 1), gcra.ErrInvalidLimit},
		{"New: faster than 1/µs", newGCRA(none, gcra.Per(2_000_000, time.Second), 1), redislimit.ErrRateTooHigh},
		{"New: overflow once rounded", newGCRA(none, gcra.Every(gcra.MaxSpan/2+1), 2), gcra.ErrOverflow},
		{"New: braces in prefix", newGCRA(none, gcra.Per(1, time.Second), 1, redislimit.WithKeyPrefix("{a}"), redislimit.WithHashTag()), redislimit.ErrInvalidPrefix},
		{"New: negative timeout", newGCRA(none, gcra.Per(1, time.Second), 1, redislimit.WithTimeout(-1)), redislimit.ErrInvalidTimeout},
		{"New: timeout without context timeouts", newGCRA(plain, gcra.Per(1, time.Second), 1, redislimit.WithTimeout(time.Second)), redislimit.ErrContextTimeoutDisabled},
		{"New: cache size 0", newGCRA(none, gcra.Per(1, time.Second), 1, redislimit.WithOverLimitCache(0)), redislimit.ErrInvalidCacheSize},
		{"New: zero outage", newGCRA(none, gcra.Per(1, time.Second), 1, redislimit.WithOutage(redislimit.Outage{})), redislimit.ErrInvalidOutage},
		{"New: fallback to nil", newGCRA(none, gcra.Per(1, time.Second), 1, redislimit.WithOutage(redislimit.FallbackTo[string](nil))), redislimit.ErrInvalidOutage},
		{"New: breaker of 0 failures", newGCRA(none, gcra.Per(1, time.Second), 1, redislimit.WithBreaker(0, time.Second)), redislimit.ErrInvalidBreaker},
		{"New: cache max age 0", newGCRA(none, gcra.Per(1, time.Second), 1, redislimit.WithOverLimitCache(10), redislimit.WithOverLimitCacheMaxAge(0)), redislimit.ErrInvalidCacheMaxAge},
		{"NewRule: nil client", newRule(nil, min1), redislimit.ErrNilClient},
		{"NewRule: zero rule", newRule(none, atomiclimit.Rule{}), atomiclimit.ErrInvalidRule},
		{"NewRule: count 0", newRule(none, atomiclimit.SlidingLog(0, time.Minute)), atomiclimit.ErrInvalidLimit},
		{"NewRule: log not last", newRule(none, atomiclimit.Bands(min1, atomiclimit.FixedWindowUTC(5, time.Second, 0))), atomiclimit.ErrInvalidRule},
		{"NewRule: FixedWindow", newRule(none, atomiclimit.FixedWindow(5, time.Second)), redislimit.ErrUnsupported},
		{"NewRule: FixedWindow band", newRule(none, atomiclimit.Bands(atomiclimit.FixedWindow(5, time.Second), min1)), redislimit.ErrUnsupported},
		{"NewRule: window of 1.5µs", newRule(none, atomiclimit.SlidingCounter(5, 1500*time.Nanosecond)), redislimit.ErrResolution},
		{"NewRule: window band of 1.5µs", newRule(none, atomiclimit.Bands(atomiclimit.SlidingCounter(5, 1500*time.Nanosecond), min1)), redislimit.ErrResolution},
		{"NewRule: offset of 1ns", newRule(none, atomiclimit.FixedWindowUTC(5, time.Second, 1)), redislimit.ErrResolution},
		{"NewRule: log of 1s+1ns", newRule(none, atomiclimit.SlidingLog(5, time.Second+1)), redislimit.ErrResolution},
		{"NewRule: slice of 1.5µs", newRule(none, atomiclimit.Rolling(100, 3*time.Microsecond, 1500*time.Nanosecond, 0)), redislimit.ErrResolution},
		{"NewRule: GCRA faster than 1/µs", newRule(none, atomiclimit.GCRA(atomiclimit.PerSecond(2_000_000), 10)), redislimit.ErrRateTooHigh},
		{"NewRule: GCRA band faster than 1/µs", newRule(none, atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerSecond(2_000_000), 10), min1)), redislimit.ErrRateTooHigh},
		{"NewRule: cache", newRule(none, min1, redislimit.WithOverLimitCache(10)), redislimit.ErrUnsupported},
		{"NewRule: negative timeout", newRule(none, min1, redislimit.WithTimeout(-1)), redislimit.ErrInvalidTimeout},
		{"NewKeyed: float keys", func() error {
			_, err := redislimit.NewKeyed[float64](none, gcra.Per(1, time.Second), 1)
			return err
		}, redislimit.ErrKeyType},
		{"New: negative longest wait", newGCRA(none, gcra.Per(1, time.Second), 1, redislimit.WithMaxWait(-1)), redislimit.ErrInvalidMaxWait},
		{"NewLeased: nil", leased(nil, 4, time.Second), redislimit.ErrInvalidLease},
		{"NewLeased: static", leased(static, 4, time.Second), redislimit.ErrInvalidLease},
		{"NewLeased: maxLease 0", leased(ok, 0, time.Second), redislimit.ErrInvalidLease},
		{"NewLeased: minLife 0", leased(ok, 4, 0), redislimit.ErrInvalidLease},
	} {
		err := tc.call()
		require.Error(t, err, tc.name)
		assert.ErrorIs(t, err, tc.want, tc.name)
		assert.ErrorIs(t, err, redislimit.ErrConfig, tc.name)
		if tc.want == redislimit.ErrUnsupported {
			assert.ErrorIs(t, err, errors.ErrUnsupported, tc.name)
		}
		msg := err.Error()
		assert.True(t, strings.HasPrefix(msg, "redislimit: "), "%s: %q", tc.name, msg)
		assert.Equal(t, 1, strings.Count(msg, "redislimit:"), "%s: %q", tc.name, msg)
	}
}

// TestFixedWindowNamesItsFleetForm: NewRule(FixedWindow) is refused, and
// its error names the rule a fleet uses instead.
func TestFixedWindowNamesItsFleetForm(t *testing.T) {
	for _, rule := range []atomiclimit.Rule{
		atomiclimit.FixedWindow(5, time.Second),
		atomiclimit.Bands(atomiclimit.FixedWindow(5, time.Second), atomiclimit.SlidingLog(60, time.Minute)),
	} {
		_, err := redislimit.NewRule(&noServer{}, rule)
		require.ErrorIs(t, err, redislimit.ErrUnsupported)
		assert.Contains(t, err.Error(), "FixedWindowUTC(5, 1s, 0) is its fleet form", "%v", rule)
	}
}
