package redislimit_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// A corrupt state is repaired, in the call that finds it, as the empty
// bucket TAT = now + B·T with the usual expiry, and the call is decided on
// it and reports ErrCorrupt: never unlimited (FailOpen does not apply),
// never locked out for ever (the repair refills and expires as every
// state does). The timeline is explicit (DecideAt) from the server's TIME;
// T is a minute, so nothing expires in real time during the test.

// corruptions are the values and types that are not a state, each set on
// rkey by its func. now is the timeline's now (µs), span B·T (µs).
var corruptions = []struct {
	name string
	set  func(ctx context.Context, c *redis.Client, rkey string, now, span int64) error
}{
	// The values: the first three overflowed tonumber's conversion
	// to −2^63 (denied, RetryAfter 0, no TTL: locked out for good), the
	// next three were read as a full bucket.
	{"inf", setValue("inf")},
	{"1e300", setValue("1e300")},
	{"1e19", setValue("1e19")},
	{"garbage", setValue("garbage")},
	{"nan", setValue("nan")},
	{"0x10", setValue("0x10")},
	// Other numbers that tonumber accepts and no state is.
	{"-5", setValue("-5")},
	{"1.5", setValue("1.5")},
	{"space", setValue(" 12")},
	{"empty", setValue("")},
	{"2^53", setValue("9007199254740992")},
	{"17-digits", setValue("10000000000000000")},
	// Beyond the integers Lua's doubles hold exactly: corrupt even with an
	// expiry, which would otherwise make a far TAT a state.
	{"2^53-with-ttl", func(ctx context.Context, c *redis.Client, rkey string, _, _ int64) error {
		return c.Set(ctx, rkey, "9007199254740993", time.Hour).Err()
	}},
	// A TAT far ahead (a century) with no expiry: it would deny for ever.
	{"far-future-no-ttl", func(ctx context.Context, c *redis.Client, rkey string, now, span int64) error {
		return c.Set(ctx, rkey, strconv.FormatInt(now+100*365*24*3600*1_000_000, 10), 0).Err()
	}},
	// Just past the longest debt this limiter writes, with no expiry.
	{"span+1µs-no-ttl", func(ctx context.Context, c *redis.Client, rkey string, now, span int64) error {
		return c.Set(ctx, rkey, strconv.FormatInt(now+span+1, 10), 0).Err()
	}},
	// A TAT far ahead with an expiry: before, a state (SET key <now+1y>
	// EX 1y locked the key out for a year); no decision stores a TAT more
	// than B·T ahead, and TIME stepping back B·T more is the most a state
	// is allowed.
	{"year-ahead-with-ttl", func(ctx context.Context, c *redis.Client, rkey string, now, _ int64) error {
		const year = 365 * 24 * time.Hour
		return c.Set(ctx, rkey, strconv.FormatInt(now+int64(year/time.Microsecond), 10), year).Err()
	}},
	{"2span+1µs-with-ttl", func(ctx context.Context, c *redis.Client, rkey string, now, span int64) error {
		return c.Set(ctx, rkey, strconv.FormatInt(now+2*span+1, 10), time.Hour).Err()
	}},
	// The give-back epoch: "TAT:E", E 1 to 16 digits below 2^53, at most
	// 2·B·T ahead.
	{"epoch-empty", setValue("5:")},
	{"epoch-only", setValue(":5")},
	{"four-fields", setValue("5:6:7:8")},
	{"epoch-not-digits", setValue("5:x")},
	{"epoch-2^53", setValue("5:9007199254740992")},
	{"epoch-far-ahead", func(ctx context.Context, c *redis.Client, rkey string, now, span int64) error {
		return c.Set(ctx, rkey, fmt.Sprintf("%d:%d", now, now+2*span+1), time.Hour).Err()
	}},
	{"epoch-with-year-ahead", func(ctx context.Context, c *redis.Client, rkey string, now, _ int64) error {
		return c.Set(ctx, rkey, fmt.Sprintf("%d:%d", now+365*24*3600*1_000_000, now), 0).Err()
	}},
	// The queue stamp: "TAT:E:Q", Q of the same form, at most 2·B·T
	// ahead; such a key may run B·T + gcra.MaxWait further ahead than
	// one without (reservations), but no further, and needs an expiry.
	{"queue-empty", setValue("5:6:")},
	{"queue-not-digits", setValue("5:6:x")},
	{"queue-2^53", setValue("5:6:9007199254740992")},
	{"queue-17-digits", setValue("5:6:10000000000000000")},
	{"queue-far-ahead", func(ctx context.Context, c *redis.Client, rkey string, now, span int64) error {
		return c.Set(ctx, rkey, fmt.Sprintf("%d:0:%d", now, now+2*span+1), time.Hour).Err()
	}},
	{"queued-past-the-longest-wait", func(ctx context.Context, c *redis.Client, rkey string, now, span int64) error {
		maxWait := int64(gcra.MaxWait / time.Microsecond)
		return c.Set(ctx, rkey, fmt.Sprintf("%d:0:%d", now+2*span+maxWait+1, now), 24*time.Hour).Err()
	}},
	{"queued-far-ahead-no-ttl", func(ctx context.Context, c *redis.Client, rkey string, now, span int64) error {
		return c.Set(ctx, rkey, fmt.Sprintf("%d:0:%d", now+span+1, now), 0).Err()
	}},
	// WRONGTYPE: another type at the key.
	{"list", func(ctx context.Context, c *redis.Client, rkey string, _, _ int64) error {
		return c.LPush(ctx, rkey, "x").Err()
	}},
	{"hash", func(ctx context.Context, c *redis.Client, rkey string, _, _ int64) error {
		return c.HSet(ctx, rkey, "f", "1").Err()
	}},
	{"set", func(ctx context.Context, c *redis.Client, rkey string, _, _ int64) error {
		return c.SAdd(ctx, rkey, "x").Err()
	}},
	{"zset", func(ctx context.Context, c *redis.Client, rkey string, _, _ int64) error {
		return c.ZAdd(ctx, rkey, redis.Z{Score: 1, Member: "x"}).Err()
	}},
}

func setValue(v string) func(ctx context.Context, c *redis.Client, rkey string, _, _ int64) error {
	return func(ctx context.Context, c *redis.Client, rkey string, _, _ int64) error {
		return c.Set(ctx, rkey, v, 0).Err()
	}
}

func TestCorruptStateRepaired(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	const burst = 3
	ops := []struct {
		name string
		n    int
		do   func(l *redislimit.Limiter[string], now int64) redislimit.Result
	}{
		{"Allow", 1, func(l *redislimit.Limiter[string], now int64) redislimit.Result {
			return l.DecideAt(ctx, "k", 1, true, now)
		}},
		{"Take-n=B", burst, func(l *redislimit.Limiter[string], now int64) redislimit.Result {
			r, receipt := l.TakeAt(ctx, "k", burst, now)
			require.Zero(t, receipt, "a repair is no admission")
			return r
		}},
		{"Peek", 1, func(l *redislimit.Limiter[string], now int64) redislimit.Result {
			return l.DecideAt(ctx, "k", 1, false, now)
		}},
		{"Take", 1, func(l *redislimit.Limiter[string], now int64) redislimit.Result {
			r, receipt := l.TakeAt(ctx, "k", 1, now)
			require.Zero(t, receipt, "a repair is no admission")
			return r
		}},
	}
	before := redislimit.ScriptMismatches()
	for _, cv := range corruptions {
		for _, op := range ops {
			for _, pname := range policyNames {
				t.Run("value="+cv.name+"/op="+op.name+"/policy="+pname, func(t *testing.T) {
					p := newPolicy(t, pname)
					h := newRecHook()
					l, err := redislimit.New(c, gcra.Every(time.Minute), burst, redislimit.WithKeyPrefix(uniq(t)),
						redislimit.WithOutage(p.outage), redislimit.WithHook("p", h.hook()))
					require.NoError(t, err)
					T := int64(l.Params().Interval() / time.Microsecond)
					span := burst * T
					now := serverNow(t, c)
					rkey := l.Key("k")
					require.NoError(t, cv.set(ctx, c, rkey, now, span))

					r := op.do(l, now)
					assert.Equal(t, redislimit.SourceRedis, r.Source, "Redis decided, on the repaired state")
					assert.ErrorIs(t, r.Err, redislimit.ErrCorrupt)
					assert.NotErrorIs(t, r.Err, redislimit.ErrUnavailable)
					assert.NotErrorIs(t, r.Err, redislimit.ErrRejected)
					assert.Contains(t, r.Err.Error(), strconv.Quote(rkey), "the error names the key")
					// The empty bucket: denied, the same as gcra on TAT = now + B·T.
					_, want := l.Params().Decide(span*us, 0, op.n)
					assert.Equal(t, want, r.Decision)
					assert.False(t, r.Allowed)
					assert.Equal(t, time.Duration(op.n)*l.Params().Interval(), r.RetryAfter)
					assert.Equal(t, strconv.FormatInt(now+span, 10), stored(t, c, rkey), "repaired as the empty bucket")
					pttl, err := c.PTTL(ctx, rkey).Result()
					require.NoError(t, err)
					assert.Greater(t, pttl, time.Duration(span)*time.Microsecond-time.Minute/2, "expires as every state")
					assert.LessOrEqual(t, pttl, time.Duration(span)*time.Microsecond+2*time.Millisecond)
					assert.Equal(t, 1, h.count(redislimit.SourceRedis, "error"), "reported")

					// Repaired once: the next call finds a valid state, decides
					// it as gcra does, and reports nothing.
					next := l.DecideAt(ctx, "k", 1, true, now+1)
					assert.NoError(t, next.Err)
					_, want = l.Params().Decide(span*us, 1*us, 1)
					assert.Equal(t, want, next.Decision)
					// Not locked out: one interval later one token is back, and
					// B·T later the whole burst.
					assert.True(t, l.DecideAt(ctx, "k", 1, true, now+T).Allowed)
					assert.True(t, l.DecideAt(ctx, "k", burst, true, now+2*span).Allowed)
					assert.Equal(t, 1, h.count(redislimit.SourceRedis, "error"))
					if p.local != nil {
						assert.Equal(t, 2, peekLocal(p.local, "k", 0).Remaining, "the fallback is not involved")
					}
				})
			}
		}
	}
	assert.Equal(t, before, redislimit.ScriptMismatches(), "script and gcra disagreed on Allowed")
}

// TestCorruptStateRepairedRealClock: the production path (Redis TIME, not
// an explicit now), with the Take contract: the error wraps ErrCorrupt, the
// decision is denied, and the key refills.
func TestCorruptStateRepairedRealClock(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Every(20*time.Millisecond), 2, redislimit.WithKeyPrefix(uniq(t)),
		redislimit.WithOutage(redislimit.FailOpen))
	require.NoError(t, err)
	for _, v := range []string{"inf", "garbage"} {
		require.NoError(t, c.Set(ctx, l.Key("k"), v, 0).Err())
		d, receipt, err := l.Take(ctx, "k", 1)
		assert.ErrorIs(t, err, redislimit.ErrCorrupt, v)
		assert.False(t, d.Allowed, "%s: FailOpen does not apply to a corrupt state", v)
		assert.Equal(t, 20*time.Millisecond, d.RetryAfter, v)
		assert.Zero(t, receipt)
		waitFor(t, "the repaired key to refill", func() bool {
			d, _, err := l.Take(ctx, "k", 1)
			return err == nil && d.Allowed
		})
	}
}

// TestValidStatesAreNotCorrupt: what the script does not repair. A decimal
// integer is a TAT (leading zeros and all), one in the past is a full
// bucket with or without an expiry, and one up to 2·B·T ahead with an
// expiry is a state that TIME stepping back, or a limit shrunk across a
// deploy, may leave: denied, not rewritten. "TAT:E" is a state of epoch E,
// and "TAT:E:Q" one of queue stamp Q too, which may be further ahead:
// reservations queued behind it, up to gcra.MaxWait each.
func TestValidStatesAreNotCorrupt(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Every(time.Minute), 2, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	now := serverNow(t, c)
	rkey := l.Key("k")
	for _, v := range []string{"0", "007", strconv.FormatInt(now-1, 10), "5:0", "5:1", fmt.Sprint(now-1, ":", now), "5:6:7", "5:0:7", fmt.Sprint(now-1, ":0:", now)} {
		require.NoError(t, c.Set(ctx, rkey, v, 0).Err())
		r := l.DecideAt(ctx, "k", 0, false, now)
		assert.NoError(t, r.Err, v)
		assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 2}, r.Decision, v)
		assert.Equal(t, v, stored(t, c, rkey), "%s: a peek writes nothing", v)
	}
	const span = int64(2 * time.Minute / time.Microsecond)
	for _, ahead := range []int64{span + 1, 2 * span} {
		v := strconv.FormatInt(now+ahead, 10)
		require.NoError(t, c.Set(ctx, rkey, v, time.Hour).Err())
		r := l.DecideAt(ctx, "k", 1, true, now)
		assert.NoError(t, r.Err, ahead)
		assert.False(t, r.Allowed)
		assert.Equal(t, time.Duration(ahead-span+int64(time.Minute/time.Microsecond))*time.Microsecond, r.RetryAfter, "the state as it is")
		assert.Equal(t, v, stored(t, c, rkey))
	}
	// Behind reservations: 2·B·T + gcra.MaxWait ahead, with an expiry, and
	// a queue stamp.
	ahead := 2*span + int64(gcra.MaxWait/time.Microsecond)
	v := fmt.Sprint(now+ahead, ":0:", now)
	require.NoError(t, c.Set(ctx, rkey, v, time.Hour).Err())
	r := l.DecideAt(ctx, "k", 1, true, now)
	assert.NoError(t, r.Err)
	assert.False(t, r.Allowed)
	assert.Equal(t, time.Duration(ahead-span+int64(time.Minute/time.Microsecond))*time.Microsecond, r.RetryAfter, "the state as it is")
	assert.Equal(t, v, stored(t, c, rkey))
}

// TestMaxWaitInScript: the script's maxwait is gcra.MaxWait in whole µs.
func TestMaxWaitInScript(t *testing.T) {
	assert.Contains(t, redislimit.DecideLua, fmt.Sprintf("local maxwait = %d\n", int64(gcra.MaxWait/time.Microsecond)))
}
