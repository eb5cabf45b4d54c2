package redislimit_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

func TestNewRuleErrors(t *testing.T) {
	min1 := atomiclimit.SlidingLog(60, time.Minute)
	for _, tc := range []struct {
		name   string
		client redis.Scripter
		rule   atomiclimit.Rule
		opts   []redislimit.Option
		want   error
	}{
		{"nil client", nil, min1, nil, redislimit.ErrNilClient},
		// The in-process constructors' errors, for the same rules.
		{"zero rule", &noServer{}, atomiclimit.Rule{}, nil, atomiclimit.ErrInvalidRule},
		{"count 0", &noServer{}, atomiclimit.SlidingLog(0, time.Minute), nil, atomiclimit.ErrInvalidLimit},
		{"log not last", &noServer{}, atomiclimit.Bands(min1, atomiclimit.FixedWindowUTC(5, time.Second, 0)), nil, atomiclimit.ErrInvalidRule},
		{"nested bands", &noServer{}, atomiclimit.Bands(atomiclimit.Bands(min1)), nil, atomiclimit.ErrInvalidRule},
		{"unlimited band", &noServer{}, atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Unlimited, 1), min1), nil, atomiclimit.ErrInvalidRule},
		// Redis's own.
		{"limiter-aligned window", &noServer{}, atomiclimit.FixedWindow(5, time.Second), nil, redislimit.ErrUnsupported},
		{"limiter-aligned band", &noServer{}, atomiclimit.Bands(atomiclimit.FixedWindow(5, time.Second), min1), nil, redislimit.ErrUnsupported},
		{"anchored of 1.5µs", &noServer{}, atomiclimit.AnchoredWindow(1, 1500*time.Nanosecond), nil, redislimit.ErrResolution},
		// Anchors in units of 2^50 ns, whose rounding Lua's doubles cannot
		// compute exactly.
		{"anchored of 2^51", &noServer{}, atomiclimit.AnchoredWindow(1<<51, 30*24*time.Hour), nil, redislimit.ErrResolution},
		{"slice of 1.5µs", &noServer{}, atomiclimit.Rolling(100, 3*time.Microsecond, 1500*time.Nanosecond, 0), nil, redislimit.ErrResolution},
		{"rolling of 1025 slices", &noServer{}, atomiclimit.Rolling(100, 1025*time.Second, time.Second, 0), nil, atomiclimit.ErrInvalidLimit},
		{"window of 1.5µs", &noServer{}, atomiclimit.SlidingCounter(5, 1500*time.Nanosecond), nil, redislimit.ErrResolution},
		{"log of 1s+1ns", &noServer{}, atomiclimit.SlidingLog(5, time.Second+1), nil, redislimit.ErrResolution},
		{"offset of 1ns", &noServer{}, atomiclimit.FixedWindowUTC(5, time.Second, 1), nil, redislimit.ErrResolution},
		{"gcra band above 10^6/s", &noServer{}, atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerSecond(2_000_000), 10), min1), nil, gcra.ErrRateTooHigh},
		{"cache", &noServer{}, min1, []redislimit.Option{redislimit.WithOverLimitCache(10)}, redislimit.ErrUnsupported},
		// New's option errors, applied by New itself.
		{"negative timeout", &noServer{}, min1, []redislimit.Option{redislimit.WithTimeout(-1)}, redislimit.ErrInvalidTimeout},
		{"brace in prefix", &noServer{}, min1, []redislimit.Option{redislimit.WithKeyPrefix("a{"), redislimit.WithHashTag()}, redislimit.ErrInvalidPrefix},
	} {
		l, err := redislimit.NewRule(tc.client, tc.rule, tc.opts...)
		assert.Nil(t, l, tc.name)
		assert.ErrorIs(t, err, tc.want, tc.name)
		if err != nil {
			assert.True(t, strings.HasPrefix(err.Error(), "redislimit: "), "%s: %q", tc.name, err)
		}
	}
	assert.ErrorIs(t, redislimit.ErrRateTooHigh, gcra.ErrRateTooHigh)
}

// TestNewRuleDescribes: Quota is the in-process limiter's, for every rule
// (GCRA with T rounded up, as New's); String names the rule; a GCRA rule,
// or one GCRA band, is New's limiter. No call.
func TestNewRuleDescribes(t *testing.T) {
	none := &noServer{}
	for _, rule := range []atomiclimit.Rule{
		atomiclimit.FixedWindowUTC(100, time.Minute, 0),
		atomiclimit.FixedWindowUTC(7, 24*time.Hour, 4*24*time.Hour),
		atomiclimit.SlidingCounter(50, time.Hour),
		atomiclimit.SlidingLog(60, time.Minute),
		atomiclimit.Rolling(10_000, 24*time.Hour, time.Hour, 1000),
		atomiclimit.Bands(atomiclimit.SlidingLog(60, time.Minute)),
		atomiclimit.Bands(atomiclimit.FixedWindowUTC(60, time.Minute, 0), atomiclimit.Rolling(10_000, 24*time.Hour, time.Hour, 0)),
		atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerSecond(20), 20), atomiclimit.FixedWindowUTC(1000, time.Hour, 0), atomiclimit.SlidingLog(10_000, 24*time.Hour)),
		atomiclimit.Bands(atomiclimit.FixedWindowUTC(1000, time.Hour, 0), atomiclimit.SlidingCounter(5, time.Second)),
		atomiclimit.AnchoredWindow(10, 2*time.Second),
		atomiclimit.AnchoredWindow(1<<50, 30*24*time.Hour),
		atomiclimit.Bands(atomiclimit.AnchoredWindow(10, time.Minute), atomiclimit.SlidingLog(100, time.Hour)),
	} {
		l, err := redislimit.NewRule(none, rule)
		require.NoError(t, err, "%v", rule)
		k, err := atomiclimit.NewKeyedRule[string](rule)
		require.NoError(t, err)
		assert.Equal(t, k.Quota("k"), l.Quota("k"), "%v", rule)
		k.Close()
		assert.Nil(t, l.Params(), "%v", rule)
		assert.Zero(t, l.Limit(), "%v", rule)
		assert.Equal(t, rule.String()+" in redis", l.String())
		assert.Zero(t, testing.AllocsPerRun(10, func() { _ = l.Quota("k") }))
	}
	// Refunds as in process: a window band alone, not the log nor bands.
	refunds := func(r atomiclimit.Rule) bool {
		l, err := redislimit.NewRule(none, r)
		require.NoError(t, err)
		return l.Quota("k").Refunds()
	}
	assert.True(t, refunds(atomiclimit.FixedWindowUTC(3, time.Second, 0)))
	assert.True(t, refunds(atomiclimit.SlidingCounter(3, time.Second)))
	assert.True(t, refunds(atomiclimit.Rolling(3, time.Second, time.Second/4, 0)))
	assert.True(t, refunds(atomiclimit.AnchoredWindow(3, time.Second)))
	assert.False(t, refunds(atomiclimit.SlidingLog(3, time.Second)))
	assert.False(t, refunds(atomiclimit.Bands(atomiclimit.FixedWindowUTC(3, time.Second, 0), atomiclimit.SlidingCounter(3, time.Second))))

	// GCRA, alone or as the one band, is New's limiter.
	for _, rule := range []atomiclimit.Rule{
		atomiclimit.GCRA(atomiclimit.PerSecond(3), 5),
		atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerSecond(3), 5)),
	} {
		l, err := redislimit.NewRule(none, rule, redislimit.WithOverLimitCache(10))
		require.NoError(t, err)
		g := mustNew(t, none, gcra.Per(3, time.Second), 5)
		assert.Equal(t, g.Quota("k"), l.Quota("k"))
		assert.Equal(t, g.String(), l.String())
		assert.Equal(t, g.Params(), l.Params())
	}
	// A band's GCRA interval is rounded up as New rounds it.
	l, err := redislimit.NewRule(none, atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerSecond(3), 2), atomiclimit.SlidingLog(100, time.Second)))
	require.NoError(t, err)
	assert.Equal(t, 2*333334*time.Microsecond, l.Quota("k").Window)
	assert.Zero(t, none.calls)
}

// TestRuleState: a rule's state is one Redis key of 8-byte words, created
// whole by the first admission; denials, peeks and requests beyond the
// most a state admits write nothing and create no key. It logs what a key
// costs Redis (MEMORY USAGE) per layout.
func TestRuleState(t *testing.T) {
	c := sharedServer(t).client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		rule  atomiclimit.Rule
		words int
	}{
		{atomiclimit.FixedWindowUTC(2, time.Hour, 0), 2},
		{atomiclimit.SlidingCounter(2, time.Hour), 3},
		{atomiclimit.SlidingLog(2, time.Hour), 3},
		{atomiclimit.SlidingLog(100, time.Hour), 101},
		{atomiclimit.Rolling(2, 24*time.Hour, time.Hour, 0), 2 + 2*24},
		{atomiclimit.AnchoredWindow(2, time.Hour), 3},
		{atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(time.Hour), 2), atomiclimit.FixedWindowUTC(2, time.Hour, 0), atomiclimit.SlidingCounter(2, time.Hour), atomiclimit.SlidingLog(2, time.Hour)), 1 + 2 + 3 + 3},
	} {
		l, err := redislimit.NewRule(c, tc.rule, redislimit.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		for _, n := range []int{0, 3, -1} {
			assert.True(t, (n == 0) == allowN(l, ctx, "k", n))
		}
		assert.True(t, l.PeekResult(ctx, "k", 1).Allowed)
		n, err := c.Exists(ctx, l.Key("k")).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "%v: only an admission creates the key", tc.rule)

		require.True(t, l.Allow(ctx, "k"))
		for i := 0; l.Allow(ctx, "k"); i++ {
			require.Less(t, i, 100, "%v: admits without end", tc.rule)
		}
		val, err := c.Get(ctx, l.Key("k")).Result()
		require.NoError(t, err)
		assert.Len(t, val, 8*tc.words, "%v", tc.rule)
		mem, err := c.MemoryUsage(ctx, l.Key("k")).Result()
		require.NoError(t, err)
		t.Logf("%v: %d bytes of state, MEMORY USAGE %d", tc.rule, len(val), mem)

		writes := commandCalls(t, c, "setrange") + commandCalls(t, c, "pexpire")
		for range 5 {
			assert.False(t, l.Allow(ctx, "k"))
			assert.False(t, l.PeekResult(ctx, "k", 1).Allowed)
			assert.False(t, allowN(l, ctx, "k", 3))
		}
		assert.Equal(t, writes, commandCalls(t, c, "setrange")+commandCalls(t, c, "pexpire"), "%v: denials and peeks write nothing", tc.rule)
		val2, err := c.Get(ctx, l.Key("k")).Result()
		require.NoError(t, err)
		assert.Equal(t, val, val2)
	}
	g, err := redislimit.NewRule(c, atomiclimit.GCRA(atomiclimit.Every(time.Hour), 2), redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	require.True(t, g.Allow(ctx, "k"))
	mem, err := c.MemoryUsage(ctx, g.Key("k")).Result()
	require.NoError(t, err)
	t.Logf("%v: a decimal TAT, MEMORY USAGE %d", g, mem)
}

// TestRuleLayout reads the words a log and a fixed window store: the
// layout the package doc describes, in µs on Redis TIME.
func TestRuleLayout(t *testing.T) {
	c := sharedServer(t).client(t)
	ctx := context.Background()
	now := int64(1_800_000_000_123_456) // µs
	words := func(rkey string) []uint64 {
		val, err := c.Get(ctx, rkey).Result()
		require.NoError(t, err)
		w := make([]uint64, len(val)/8)
		for i := range w {
			w[i] = binary.BigEndian.Uint64([]byte(val[8*i:]))
		}
		return w
	}
	lg, err := redislimit.NewRule(c, atomiclimit.SlidingLog(3, time.Minute), redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	for i := range int64(4) {
		require.True(t, lg.DecideAt(ctx, "k", 1, true, now+i*60_000_000).Allowed)
	}
	// Head 1 (4 admissions mod 3), then each slot's expiry: the 4th
	// admission replaced the 1st.
	assert.Equal(t, []uint64{1, uint64(now + 4*60_000_000), uint64(now + 2*60_000_000), uint64(now + 3*60_000_000)}, words(lg.Key("k")))

	fx, err := redislimit.NewRule(c, atomiclimit.FixedWindowUTC(5, time.Second, 250*time.Millisecond), redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	require.True(t, fx.DecideAt(ctx, "k", 2, true, now).Allowed)
	// Windows since the boundary at or before the Unix epoch, −750ms.
	assert.Equal(t, []uint64{uint64((now + 750_000) / 1_000_000), 2}, words(fx.Key("k")))

	// The anchor in µs and the ns beyond them, a multiple of g = 32ns for
	// 100 per window (1,800,000,000,123,457,000 ns is 8 ns past one: ⌈⌉
	// adds 24 ns), then the count.
	an, err := redislimit.NewRule(c, atomiclimit.AnchoredWindow(100, time.Minute), redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	require.True(t, an.DecideAt(ctx, "k", 3, true, now+1).Allowed)
	assert.Equal(t, []uint64{uint64(now + 1), 24, 3}, words(an.Key("k")))
	assert.Zero(t, ((now+1)*1000+24)%32)
}

// TestRuleCorruptRepaired: a key that holds something else than the
// rule's words (another length, a word of 2^53 or more, another type, a
// state idle later than any the rule writes, with no expiry, or idle far
// later, a year, with an expiry) is repaired
// in the call that finds it, as main's GCRA repairs its TAT: every band's
// strictest state at now, expiring as every state does, and the call is
// decided on it (denied, Source redis, FailOpen or not) and reports
// ErrCorrupt. So the key is never unlimited, and never locked out for
// ever: the next call finds a state, and the key refills by the longest
// idle time of its bands. Refund on such a key gives nothing back and
// writes nothing.
func TestRuleCorruptRepaired(t *testing.T) {
	c := sharedServer(t).client(t)
	ctx := context.Background()
	now := int64(1_800_000_000_000_000) // µs
	corruptions := []struct {
		name string
		set  func(l *redislimit.Limiter[string], rk string) error
	}{
		{"a decimal TAT", func(_ *redislimit.Limiter[string], rk string) error {
			return c.Set(ctx, rk, "1795435500712339", 0).Err()
		}},
		{"one word more", func(l *redislimit.Limiter[string], rk string) error {
			return c.Set(ctx, rk, strings.Repeat("\x00", 8*(stateWords(c, l)+1)), 0).Err()
		}},
		{"a word of 2^53", func(l *redislimit.Limiter[string], rk string) error {
			return c.Set(ctx, rk, "\x00\x20"+strings.Repeat("\x00", 8*stateWords(c, l)-2), 0).Err()
		}},
		{"a list", func(_ *redislimit.Limiter[string], rk string) error { return c.LPush(ctx, rk, "x").Err() }},
		{"a hash", func(_ *redislimit.Limiter[string], rk string) error { return c.HSet(ctx, rk, "f", "1").Err() }},
		{"a century ahead, no expiry", func(l *redislimit.Limiter[string], rk string) error {
			if r := l.DecideAt(ctx, "k", 1, true, now+100*365*24*3600_000_000); !r.Allowed {
				return fmt.Errorf("not admitted: %v", r.Err)
			}
			return c.Persist(ctx, rk).Err()
		}},
		// Expiring, but a year from now: before, a state that locked the
		// key out for that year.
		{"a year ahead, expiring in a year", func(l *redislimit.Limiter[string], rk string) error {
			const year = 365 * 24 * time.Hour
			if r := l.DecideAt(ctx, "k", 1, true, now+year.Microseconds()); !r.Allowed {
				return fmt.Errorf("not admitted: %v", r.Err)
			}
			return c.Expire(ctx, rk, year).Err()
		}},
	}
	for _, tc := range []struct {
		rule    atomiclimit.Rule
		longest time.Duration // the longest idle time of its bands
	}{
		{atomiclimit.FixedWindowUTC(3, time.Minute, 0), time.Minute},
		{atomiclimit.SlidingCounter(3, time.Minute), 2 * time.Minute},
		{atomiclimit.SlidingLog(3, time.Minute), time.Minute},
		{atomiclimit.Rolling(3, time.Hour, time.Minute, 2), time.Hour},
		{atomiclimit.AnchoredWindow(3, time.Minute), time.Minute},
		{atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(time.Minute), 2), atomiclimit.SlidingCounter(5, time.Minute), atomiclimit.SlidingLog(4, time.Minute)), 2 * time.Minute},
		{atomiclimit.Bands(atomiclimit.AnchoredWindow(3, time.Minute), atomiclimit.SlidingLog(4, time.Minute)), time.Minute},
	} {
		for _, bad := range corruptions {
			for _, outage := range []redislimit.Outage{redislimit.FailClosed, redislimit.FailOpen} {
				where := fmt.Sprintf("%v, %s, %v", tc.rule, bad.name, outage)
				l, err := redislimit.NewRule(c, tc.rule, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOutage(outage))
				require.NoError(t, err)
				rk := l.Key("k")
				require.NoError(t, bad.set(l, rk), where)

				ok, err := l.RefundAt(ctx, "k", 1, atomiclimit.RemoteReceipt([3]uint64{1}), now)
				require.NoError(t, err, where)
				assert.False(t, ok, where)

				r := l.DecideAt(ctx, "k", 1, true, now)
				assert.Equal(t, redislimit.SourceRedis, r.Source, where)
				assert.ErrorIs(t, r.Err, redislimit.ErrCorrupt, where)
				assert.False(t, r.Allowed, where)
				assert.Positive(t, r.RetryAfter, where)
				assert.LessOrEqual(t, r.ResetAfter, tc.longest, where)
				val, err := c.Get(ctx, rk).Result()
				require.NoError(t, err, where)
				assert.Len(t, val, 8*stateWords(c, l), where)
				pttl, err := c.PTTL(ctx, rk).Result()
				require.NoError(t, err, where)
				assert.Positive(t, pttl, where)
				assert.LessOrEqual(t, pttl, tc.longest+2*time.Millisecond, where)

				// Repaired: a state like any other, which refills.
				r = l.DecideAt(ctx, "k", 0, false, now)
				assert.NoError(t, r.Err, where)
				assert.Zero(t, r.Remaining, where)
				later := now + tc.longest.Microseconds()
				r = l.DecideAt(ctx, "k", 0, false, later)
				assert.NoError(t, r.Err, where)
				assert.Equal(t, l.DecideAt(ctx, "absent", 0, false, later), r, "%s: as an absent key", where)
			}
		}
	}
}

// TestRuleCorruptThreshold: a state without an expiry is corrupt only if
// it is idle later than any the rule writes: one the rule wrote at now
// (its farthest) is not, whatever the kind; a log's state idle 1µs later
// than that is. With an expiry, twice that.
func TestRuleCorruptThreshold(t *testing.T) {
	c := sharedServer(t).client(t)
	ctx := context.Background()
	now := int64(1_800_000_000_000_000) // µs
	for _, rule := range []atomiclimit.Rule{
		atomiclimit.FixedWindowUTC(3, time.Minute, 0),
		atomiclimit.SlidingCounter(3, time.Minute),
		atomiclimit.SlidingLog(3, time.Minute),
		atomiclimit.Rolling(3, time.Hour, time.Minute, 2),
		atomiclimit.AnchoredWindow(100, time.Minute),
		atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(time.Minute), 2), atomiclimit.SlidingLog(4, time.Minute)),
	} {
		l, err := redislimit.NewRule(c, rule, redislimit.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		require.True(t, l.DecideAt(ctx, "k", 1, true, now).Allowed)
		require.NoError(t, c.Persist(ctx, l.Key("k")).Err())
		r := l.DecideAt(ctx, "k", 1, true, now)
		assert.NoError(t, r.Err, "%v", rule)
		assert.True(t, r.Allowed, "%v", rule)
	}
	l, err := redislimit.NewRule(c, atomiclimit.SlidingLog(3, time.Minute), redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	require.True(t, l.DecideAt(ctx, "k", 1, true, now+1).Allowed)
	require.NoError(t, c.Persist(ctx, l.Key("k")).Err())
	assert.ErrorIs(t, l.DecideAt(ctx, "k", 1, true, now).Err, redislimit.ErrCorrupt)

	// With an expiry, a state may be idle up to twice the longest a state of
	// the rule waits (TIME stepping back), and not 1µs more: for the log,
	// a minute; for a GCRA band, B·T (its fixed window, an hour, is far
	// from that bound).
	for _, tc := range []struct {
		rule atomiclimit.Rule
		at   int64 // the admission whose state is idle exactly at the bound
	}{
		{atomiclimit.SlidingLog(3, time.Minute), time.Minute.Microseconds()},
		{atomiclimit.AnchoredWindow(3, time.Minute), time.Minute.Microseconds()},
		{atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(time.Minute), 2), atomiclimit.FixedWindowUTC(100, time.Hour, 0)), 3 * time.Minute.Microseconds()},
	} {
		for _, past := range []int64{0, 1} {
			l, err := redislimit.NewRule(c, tc.rule, redislimit.WithKeyPrefix(uniq(t)))
			require.NoError(t, err)
			require.True(t, l.DecideAt(ctx, "k", 1, true, now+tc.at+past).Allowed)
			r := l.DecideAt(ctx, "k", 0, false, now)
			if past == 0 {
				assert.NoError(t, r.Err, "%v", tc.rule)
			} else {
				assert.ErrorIs(t, r.Err, redislimit.ErrCorrupt, "%v: 1µs past the bound", tc.rule)
			}
		}
	}
}

// stateWords is the number of words of l's state, as its first admission
// (on a key of its own) writes them.
func stateWords(c *redis.Client, l *redislimit.Limiter[string]) int {
	ctx := context.Background()
	key := fmt.Sprint("stateWords:", prefixSeq.Add(1))
	if !l.Allow(ctx, key) {
		panic("stateWords: not admitted")
	}
	n, err := c.StrLen(ctx, l.Key(key)).Result()
	if err != nil {
		panic(err)
	}
	return int(n) / 8
}

// TestRuleOutage: the Outage policies apply to every rule, with the rule's
// bounds: FailOpen admits 1 ≤ n ≤ the most a state admits (1 for the log)
// and nothing beyond; FailClosed's hint is one interval, Window/Limit, at
// most a second; FallbackTo decides locally. Receipts are 0; Refund makes
// no call without one.
func TestRuleOutage(t *testing.T) {
	ctx := context.Background()
	rule := atomiclimit.SlidingLog(600, time.Minute) // an interval of 100ms
	local, err := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingLog(1, time.Minute))
	require.NoError(t, err)
	defer local.Close()

	s := &noServer{}
	open, err := redislimit.NewRule(s, rule, redislimit.WithOutage(redislimit.FailOpen))
	require.NoError(t, err)
	d, rc, err := open.Take(ctx, "k", 1)
	assert.ErrorIs(t, err, redislimit.ErrUnavailable)
	assert.True(t, d.Allowed)
	assert.Zero(t, rc)
	d, _, _ = open.Take(ctx, "k", 2)
	assert.Equal(t, gcra.Decision{RetryAfter: gcra.Never}, d, "beyond the log's 1: never, even open")

	closed, err := redislimit.NewRule(s, rule)
	require.NoError(t, err)
	assert.Equal(t, gcra.Decision{RetryAfter: 100 * time.Millisecond}, decision(closed, ctx, "k", 1))
	slow, err := redislimit.NewRule(s, atomiclimit.FixedWindowUTC(10, time.Hour, 0))
	require.NoError(t, err)
	assert.Equal(t, time.Second, decision(slow, ctx, "k", 1).RetryAfter, "at most a second")

	fb, err := redislimit.NewRule(s, rule, redislimit.WithOutage(redislimit.FallbackTo(local)))
	require.NoError(t, err)
	assert.Equal(t, redislimit.SourceFallback, fb.TakeResult(ctx, "k", 1).Source)
	assert.False(t, fb.Allow(ctx, "k"), "the local log of 1")

	calls := s.calls
	ok, err := closed.Refund(ctx, "k", 1, atomiclimit.Receipt{})
	assert.False(t, ok)
	assert.NoError(t, err)
	assert.Equal(t, calls, s.calls)
}

// TestRuleNoScript: after SCRIPT FLUSH the rules' scripts are loaded again
// by EVAL, once, as New's are.
func TestRuleNoScript(t *testing.T) {
	c := sharedServer(t).client(t)
	ctx := context.Background()
	l, err := redislimit.NewRule(c, atomiclimit.FixedWindowUTC(5, time.Hour, 0), redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	_, rc, err := l.Take(ctx, "k", 2)
	require.NoError(t, err)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	evals := commandCalls(t, c, "eval")
	ok, err := l.Refund(ctx, "k", 2, rc)
	require.NoError(t, err)
	assert.True(t, ok)
	r := l.TakeResult(ctx, "k", 1)
	require.NoError(t, r.Err)
	assert.Equal(t, 4, r.Remaining)
	assert.Equal(t, 3, decision(l, ctx, "k", 1).Remaining)
	assert.Equal(t, evals+2, commandCalls(t, c, "eval"), "one EVAL per script, then EVALSHA")
}

// TestRuleTakeRefund on Redis TIME: a window's admission is given back
// while its window counts it, once; the log's and bands' Take return no
// receipt.
func TestRuleTakeRefund(t *testing.T) {
	c := sharedServer(t).client(t)
	ctx := context.Background()
	for _, rule := range []atomiclimit.Rule{atomiclimit.FixedWindowUTC(3, time.Hour, 0), atomiclimit.SlidingCounter(3, time.Hour), atomiclimit.Rolling(3, 24*time.Hour, time.Hour, 0), atomiclimit.AnchoredWindow(3, time.Hour)} {
		l, err := redislimit.NewRule(c, rule, redislimit.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		d, rc, err := l.Take(ctx, "k", 3)
		require.NoError(t, err)
		require.True(t, d.Allowed)
		require.NotZero(t, rc)
		ok, err := l.Refund(ctx, "k", 3, rc)
		require.NoError(t, err)
		assert.True(t, ok, "%v", rule)
		assert.Equal(t, 3, l.PeekResult(ctx, "k", 0).Remaining, "%v: all given back", rule)
		ok, err = l.Refund(ctx, "k", 3, rc)
		require.NoError(t, err)
		assert.False(t, ok, "%v: not twice: the count has nothing of it left", rule)
		ok, err = l.Refund(ctx, "k", 3, atomiclimit.RemoteReceipt([3]uint64{remoteWord(rc) + 1}))
		require.NoError(t, err)
		assert.False(t, ok, "%v: another window", rule)
	}
	for _, rule := range []atomiclimit.Rule{
		atomiclimit.SlidingLog(3, time.Hour),
		atomiclimit.Bands(atomiclimit.FixedWindowUTC(3, time.Hour, 0), atomiclimit.SlidingCounter(3, time.Hour)),
	} {
		l, err := redislimit.NewRule(c, rule, redislimit.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		d, rc, err := l.Take(ctx, "k", 1)
		require.NoError(t, err)
		assert.True(t, d.Allowed)
		assert.Zero(t, rc, "%v", rule)
	}
}

// TestRuleAnchoredRefund: the anchored window's first admission, given
// back with others after it, moves the window to the give-back's time; the
// key's expiry moves with the window's end, and a later admission of the
// same window still finds its window. A malformed anchor is a corrupt
// state.
func TestRuleAnchoredRefund(t *testing.T) {
	c := sharedServer(t).client(t)
	ctx := context.Background()
	now := serverNow(t, c)
	l, err := redislimit.NewRule(c, atomiclimit.AnchoredWindow(3, time.Hour), redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	const minute = int64(time.Minute / time.Microsecond)
	_, first := l.TakeAt(ctx, "k", 1, now)
	_, second := l.TakeAt(ctx, "k", 1, now+minute)
	ok, err := l.RefundAt(ctx, "k", 1, first, now+10*minute)
	require.NoError(t, err)
	require.True(t, ok)
	// The window is [now + 10 min, now + 70 min): its end, 60 min on.
	pttl, err := c.PTTL(ctx, l.Key("k")).Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, pttl, time.Hour+time.Millisecond)
	assert.Greater(t, pttl, time.Hour-time.Minute)
	d := l.DecideAt(ctx, "k", 0, false, now+10*minute)
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 2, ResetAfter: time.Hour}, d.Decision)
	ok, err = l.RefundAt(ctx, "k", 1, second, now+20*minute)
	require.NoError(t, err)
	assert.True(t, ok, "the second still finds its (moved) window")
	assert.Equal(t, 3, l.DecideAt(ctx, "k", 0, false, now+20*minute).Remaining)

	// An anchor with 1000 ns or more beyond its µs is no state.
	require.NoError(t, c.Set(ctx, l.Key("bad"), string(binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(
		binary.BigEndian.AppendUint64(nil, uint64(now)), 1000), 1)), time.Hour).Err())
	r := l.DecideAt(ctx, "bad", 1, true, now)
	assert.ErrorIs(t, r.Err, redislimit.ErrCorrupt)
	assert.Contains(t, r.Err.Error(), "1000 ns or more")
	assert.False(t, r.Allowed)
}

// TestRuleConcurrent: many goroutines on several clients take from one key
// under a log and under bands; each rule admits exactly its quota within a
// window longer than the run, never more: the check and the writes of every
// band are one atomic script.
func TestRuleConcurrent(t *testing.T) {
	s := sharedServer(t)
	for _, tc := range []struct {
		rule atomiclimit.Rule
		want int
	}{
		{atomiclimit.SlidingLog(50, time.Hour), 50},
		{atomiclimit.SlidingCounter(40, time.Hour), 40},
		{atomiclimit.Rolling(45, 24*time.Hour, time.Hour, 0), 45},
		{atomiclimit.AnchoredWindow(42, time.Hour), 42},
		{atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(time.Hour), 30), atomiclimit.SlidingCounter(40, time.Hour), atomiclimit.SlidingLog(35, time.Hour)), 30},
	} {
		prefix := uniq(t)
		var admitted, errs atomic.Int64
		var wg sync.WaitGroup
		for range 4 {
			c := s.client(t)
			l, err := redislimit.NewRule(c, tc.rule, redislimit.WithKeyPrefix(prefix))
			require.NoError(t, err)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 25 {
						r := l.TakeResult(context.Background(), "k", 1)
						if r.Err != nil {
							errs.Add(1)
						}
						if r.Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
		}
		wg.Wait()
		require.Zero(t, errs.Load(), "%v", tc.rule)
		assert.Equal(t, int64(tc.want), admitted.Load(), "%v", tc.rule)
	}
	assert.False(t, errors.Is(nil, redislimit.ErrUnsupported))
}

// TestRuleReset: Reset removes a rule's whole state, every band's, which is
// one Redis key: the key decides as a new one.
func TestRuleReset(t *testing.T) {
	c := sharedServer(t).client(t)
	ctx := context.Background()
	for _, rule := range []atomiclimit.Rule{
		atomiclimit.SlidingLog(2, time.Hour),
		atomiclimit.Rolling(2, 24*time.Hour, time.Hour, 0),
		atomiclimit.AnchoredWindow(2, time.Hour),
		atomiclimit.Bands(atomiclimit.FixedWindowUTC(2, time.Hour, 0), atomiclimit.SlidingCounter(3, time.Hour), atomiclimit.SlidingLog(5, time.Hour)),
		atomiclimit.Bands(atomiclimit.AnchoredWindow(2, time.Hour), atomiclimit.SlidingLog(5, time.Hour)),
	} {
		l, err := redislimit.NewRule(c, rule, redislimit.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		require.True(t, allowN(l, ctx, "k", 1))
		require.True(t, allowN(l, ctx, "k", 1))
		require.False(t, l.Allow(ctx, "k"), "%v", rule)
		require.NoError(t, l.Reset(ctx, "k"))
		n, err := c.Exists(ctx, l.Key("k")).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "%v", rule)
		assert.Equal(t, l.PeekResult(ctx, "absent", 0).Decision, l.PeekResult(ctx, "k", 0).Decision, "%v", rule)
		assert.True(t, l.Allow(ctx, "k"), "%v", rule)
	}
}

// maxBands is the most bands a rule has: one more is refused in process
// (and so by NewRule).
func TestMaxBands(t *testing.T) {
	bands := make([]atomiclimit.Rule, redislimit.MaxBandsForTest+1)
	for i := range bands {
		bands[i] = atomiclimit.FixedWindowUTC(i+1, time.Minute, 0)
	}
	_, err := atomiclimit.NewKeyedRule[string](atomiclimit.Bands(bands...))
	require.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	_, err = atomiclimit.NewKeyedRule[string](atomiclimit.Bands(bands[:redislimit.MaxBandsForTest]...), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
}
