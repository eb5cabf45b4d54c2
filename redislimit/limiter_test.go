package redislimit_test

import (
	"context"
	"errors"
	"math"
	"strconv"
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

// noServer is a redis.Scripter that fails every call: for tests that must
// make none.
type noServer struct{ calls int }

var errNoServer = errors.New("noServer: no call expected")

func (s *noServer) fail(ctx context.Context) *redis.Cmd {
	s.calls++
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(errNoServer)
	return cmd
}
func (s *noServer) Eval(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.fail(ctx)
}
func (s *noServer) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.fail(ctx)
}
func (s *noServer) EvalRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.fail(ctx)
}
func (s *noServer) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return s.fail(ctx)
}
func (s *noServer) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceResult(nil, errNoServer)
}
func (s *noServer) ScriptLoad(ctx context.Context, _ string) *redis.StringCmd {
	return redis.NewStringResult("", errNoServer)
}

func TestNewErrors(t *testing.T) {
	keyed, err := atomiclimit.NewKeyed[string](gcra.Per(1, time.Second), 1)
	require.NoError(t, err)
	defer keyed.Close()
	plain := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer plain.Close()
	for _, tc := range []struct {
		name   string
		client redis.Scripter
		limit  gcra.Limit
		burst  int
		opts   []redislimit.Option
		want   error
	}{
		{"nil client", nil, gcra.Per(1, time.Second), 1, nil, redislimit.ErrNilClient},
		{"zero limit", &noServer{}, gcra.Limit{}, 1, nil, gcra.ErrInvalidLimit},
		{"burst 0", &noServer{}, gcra.Per(1, time.Second), 0, nil, gcra.ErrInvalidBurst},
		{"rate too high", &noServer{}, gcra.Rate(2e9), 1, nil, gcra.ErrRateTooHigh},
		// Fine for gcra, but faster than Redis TIME's resolution.
		{"rate above 10^6/s", &noServer{}, gcra.Per(1_100_000, time.Second), 1, nil, redislimit.ErrRateTooHigh},
		{"1ns interval", &noServer{}, gcra.Every(time.Nanosecond), 1, nil, gcra.ErrRateTooHigh},
		// Fits gcra at T = 2^30+1 ns, but not once T is rounded up to
		// 1073742µs (the burst fits a 32-bit int too).
		{"overflow after rounding", &noServer{}, gcra.Every(overflowT), overflowBurst, nil, gcra.ErrOverflow},
		{"brace in prefix", &noServer{}, gcra.Per(1, time.Second), 1, []redislimit.Option{redislimit.WithKeyPrefix("a{b}:"), redislimit.WithHashTag()}, redislimit.ErrInvalidPrefix},
		{"negative timeout", &noServer{}, gcra.Per(1, time.Second), 1, []redislimit.Option{redislimit.WithTimeout(-1)}, redislimit.ErrInvalidTimeout},
		{"timeout without context timeouts", plain, gcra.Per(1, time.Second), 1, []redislimit.Option{redislimit.WithTimeout(time.Second)}, redislimit.ErrContextTimeoutDisabled},
		{"cache size 0", &noServer{}, gcra.Per(1, time.Second), 1, []redislimit.Option{redislimit.WithOverLimitCache(0)}, redislimit.ErrInvalidCacheSize},
		{"zero outage", &noServer{}, gcra.Per(1, time.Second), 1, []redislimit.Option{redislimit.WithOutage(redislimit.Outage{})}, redislimit.ErrInvalidOutage},
		{"nil fallback", &noServer{}, gcra.Per(1, time.Second), 1, []redislimit.Option{redislimit.WithOutage(redislimit.FallbackTo[string](nil))}, redislimit.ErrInvalidOutage},
	} {
		l, err := redislimit.New(tc.client, tc.limit, tc.burst, tc.opts...)
		assert.Nil(t, l, tc.name)
		assert.ErrorIs(t, err, tc.want, tc.name)
		if err != nil {
			assert.True(t, strings.HasPrefix(err.Error(), "redislimit: "), "%s: %q", tc.name, err)
		}
	}
	// Accepted: braces in a prefix without hash tags; a fallback; a timeout
	// on a client that honours contexts.
	for _, opts := range [][]redislimit.Option{
		{redislimit.WithKeyPrefix("{tenant}:")},
		{redislimit.WithOutage(redislimit.FallbackTo(keyed)), redislimit.WithOverLimitCache(1)},
		{redislimit.WithTimeout(time.Second)},
	} {
		ok := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
		_, err := redislimit.New(ok, gcra.Per(1, time.Second), 1, opts...)
		assert.NoError(t, err)
		ok.Close()
	}
}

const (
	overflowT     = time.Duration(1<<30 + 1)
	overflowBurst = int((1 << 61) / overflowT)
)

func TestOverflowCaseFitsGCRA(t *testing.T) {
	_, err := gcra.NewParams(gcra.Every(overflowT), overflowBurst)
	require.NoError(t, err, "the case must fit gcra before rounding")
}

// TestTimeoutNeedsContextTimeouts: every go-redis client kind is checked.
func TestTimeoutNeedsContextTimeouts(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		clients := []redis.Scripter{
			redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: enabled}),
			redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: enabled}),
			redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: enabled}),
		}
		for _, c := range clients {
			_, err := redislimit.New(c, gcra.Per(1, time.Second), 1, redislimit.WithTimeout(time.Second))
			if enabled {
				assert.NoError(t, err, "%T", c)
			} else {
				assert.ErrorIs(t, err, redislimit.ErrContextTimeoutDisabled, "%T", c)
			}
			_, err = redislimit.New(c, gcra.Per(1, time.Second), 1) // no timeout: any client
			assert.NoError(t, err, "%T", c)
			c.(interface{ Close() error }).Close()
		}
	}
}

func TestRounding(t *testing.T) {
	for _, tc := range []struct {
		limit gcra.Limit
		want  time.Duration
	}{
		{gcra.Per(100, time.Second), 10 * time.Millisecond},
		{gcra.Per(3, time.Second), 333334 * time.Microsecond},
		{gcra.Every(time.Millisecond + 1), 1001 * time.Microsecond},
		{gcra.Per(1_000_000, time.Second), time.Microsecond},
		{gcra.Every(1500 * time.Nanosecond), 2 * time.Microsecond},
		{gcra.Per(1_000_001, time.Second), time.Microsecond}, // gcra's T is already 1000ns
		{gcra.Rate(2.5), 400 * time.Millisecond},
	} {
		l, err := redislimit.New(&noServer{}, tc.limit, 7)
		require.NoError(t, err)
		p, err := gcra.NewParams(tc.limit, 7)
		require.NoError(t, err)
		got := l.Params().Interval()
		assert.Equal(t, tc.want, got, "%v", tc.limit)
		// Never more permissive: T_redis ≥ T, and less than 1µs more.
		assert.GreaterOrEqual(t, got, p.Interval(), "%v", tc.limit)
		assert.Less(t, got-p.Interval(), time.Microsecond, "%v", tc.limit)
		assert.Equal(t, 7, l.Params().Burst())
		assert.Equal(t, tc.limit, l.Limit())
	}
}

func TestStaticLimitsMakeNoCall(t *testing.T) {
	s := &noServer{}
	ctx := context.Background()
	un, err := redislimit.New(s, gcra.Unlimited, 1)
	require.NoError(t, err)
	r := un.TakeResult(ctx, "k", 1000)
	assert.Equal(t, redislimit.Result{Decision: gcra.Decision{Allowed: true, Remaining: math.MaxInt}, Source: redislimit.SourceStatic}, r)
	assert.True(t, allowN(un, ctx, "k", 0), "n = 0 is an admitted peek")
	assert.False(t, allowN(un, ctx, "k", -1))
	deny, err := redislimit.New(s, gcra.DenyAll, 1, redislimit.WithOverLimitCache(10))
	require.NoError(t, err)
	r = deny.PeekResult(ctx, "k", 1)
	assert.Equal(t, gcra.Decision{RetryAfter: gcra.Never, TokenAfter: gcra.Never}, r.Decision)
	assert.False(t, deny.Allow(ctx, "k"))
	assert.Zero(t, s.calls)
}

func TestKeys(t *testing.T) {
	l, err := redislimit.New(&noServer{}, gcra.Per(1, time.Second), 1)
	require.NoError(t, err)
	assert.Equal(t, "atomiclimit:"+"user:1", l.Key("user:1"))
	l, err = redislimit.New(&noServer{}, gcra.Per(1, time.Second), 1, redislimit.WithKeyPrefix("rl:sec:"), redislimit.WithHashTag())
	require.NoError(t, err)
	assert.Equal(t, "rl:sec:{user:1}", l.Key("user:1"))
	assert.Equal(t, "1/s, burst 1 in redis", l.String())
}

func TestSourceAndOutageStrings(t *testing.T) {
	for s, name := range map[redislimit.Source]string{
		redislimit.SourceRedis: "redis", redislimit.SourceCache: "cache", redislimit.SourceStatic: "static",
		redislimit.SourceFailOpen: "fail-open", redislimit.SourceFailClosed: "fail-closed",
		redislimit.SourceFallback: "fallback", redislimit.SourceCaller: "caller", redislimit.Source(99): "Source(99)",
	} {
		assert.Equal(t, name, s.String())
	}
	assert.Equal(t, "fail-closed", redislimit.FailClosed.String())
	assert.Equal(t, "fail-open", redislimit.FailOpen.String())
	assert.Equal(t, "fallback", redislimit.FallbackTo[string](nil).String())
	assert.Equal(t, "invalid", redislimit.Outage{}.String())
}

// TestRedisTime runs on the server's own clock: a fresh key is full, a
// drained one reports a retry-after measured on TIME.
func TestRedisTime(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	r := l.TakeResult(ctx, "a", 1)
	require.NoError(t, r.Err)
	assert.Equal(t, redislimit.SourceRedis, r.Source)
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 2, ResetAfter: time.Hour}, r.Decision)

	// Drain by hand: TAT = now + 3h means empty; a request waits one hour,
	// less the time since we read TIME.
	now, err := c.Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, l.Key("b"), strconv.FormatInt(now.UnixMicro()+3*3600e6, 10), time.Hour*4).Err())
	r = l.TakeResult(ctx, "b", 1)
	require.NoError(t, r.Err)
	assert.False(t, r.Allowed)
	assert.LessOrEqual(t, r.RetryAfter, time.Hour)
	assert.Greater(t, r.RetryAfter, time.Hour-time.Minute)
	assert.Zero(t, r.RetryAfter%time.Microsecond, "whole microseconds")
	assert.Zero(t, redislimit.ScriptMismatches())
}

// TestDenialsAndPeeksWriteNothing counts the SETs the server runs,
// scripts' included.
func TestDenialsAndPeeksWriteNothing(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	sets := commandCalls(t, c, "set")
	require.True(t, l.Allow(ctx, "k"))
	assert.Equal(t, sets+1, commandCalls(t, c, "set"), "an admission writes once")
	val, _ := c.Get(ctx, l.Key("k")).Result()
	for range 10 {
		assert.False(t, l.Allow(ctx, "k"))
		assert.False(t, l.PeekResult(ctx, "k", 1).Allowed)
		assert.False(t, allowN(l, ctx, "k", 2)) // n > B
	}
	assert.True(t, l.PeekResult(ctx, "other", 1).Allowed)
	assert.Equal(t, sets+1, commandCalls(t, c, "set"), "denials and peeks write nothing")
	val2, _ := c.Get(ctx, l.Key("k")).Result()
	assert.Equal(t, val, val2)
	n, err := c.Exists(ctx, l.Key("other")).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a peek creates no key")
}

// TestExpiry: a key expires only after its TAT has passed (so expiry changes
// no decision), rounded up to the millisecond with one more for margin.
func TestExpiry(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Every(1500*time.Microsecond), 2, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	called := time.Now()
	require.True(t, allowN(l, ctx, "k", 2)) // TAT = now + 3ms: PX ⌈3⌉ + 1 = 4
	pttl, err := c.PTTL(ctx, l.Key("k")).Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, pttl, 4*time.Millisecond)
	if passed := time.Since(called); passed < 3*time.Millisecond {
		assert.Greater(t, pttl, time.Duration(0))
	} else { // a loaded machine: the key may be gone, never without an expiry
		assert.NotEqual(t, -time.Nanosecond, pttl, "no expiry, %v after the call", passed)
	}
	// The smallest debt, 1µs, still gets a TTL (at least 1 ms; here 2).
	l1, err := redislimit.New(c, gcra.Every(time.Microsecond), 1, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	require.True(t, l1.Allow(ctx, "tiny"))
	pttl, err = c.PTTL(ctx, l1.Key("tiny")).Result()
	require.NoError(t, err)
	// PTTL is -1 for a key without an expiry, and may be 0 for one in its
	// last millisecond (or -2 once it has expired) on a slow machine.
	assert.NotEqual(t, -time.Nanosecond, pttl, "no key without an expiry")
}

// TestNoScript: after SCRIPT FLUSH (as after a restart or failover) the
// EVALSHA fails with NOSCRIPT and the limiter falls back to EVAL once.
func TestNoScript(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Per(10, time.Second), 5, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	evals := commandCalls(t, c, "eval")
	shas := commandCalls(t, c, "evalsha")
	r := l.TakeResult(ctx, "k", 1)
	require.NoError(t, r.Err)
	assert.Equal(t, redislimit.SourceRedis, r.Source)
	assert.Equal(t, 4, r.Remaining)
	assert.Equal(t, evals+1, commandCalls(t, c, "eval"))
	r = l.TakeResult(ctx, "k", 1)
	assert.Equal(t, 3, r.Remaining)
	assert.Equal(t, evals+1, commandCalls(t, c, "eval"), "the script is cached now")
	assert.Equal(t, shas+2, commandCalls(t, c, "evalsha"), "one EVALSHA per decision")
	ok, err := c.ScriptExists(ctx, redislimit.DecideSHA).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, ok)
}

// TestSeveralLimitersShareAKey: two limiters (two processes, say) on the
// same prefix see one bucket.
func TestSeveralLimitersShareAKey(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	prefix := uniq(t)
	a, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(prefix))
	require.NoError(t, err)
	b, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(prefix))
	require.NoError(t, err)
	assert.True(t, a.Allow(ctx, "k"))
	assert.True(t, b.Allow(ctx, "k"))
	assert.Equal(t, 0, a.PeekResult(ctx, "k", 1).Remaining, "as Take would leave it")
	assert.True(t, b.Allow(ctx, "k"))
	assert.False(t, a.Allow(ctx, "k"))
	assert.True(t, a.Allow(ctx, "other key"))
}

// TestExampleFlow is the package example, run against a real server, with
// a hook that says who decided.
func TestExampleFlow(t *testing.T) {
	s := sharedServer(t)
	rdb := s.client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	h := newRecHook()
	lim, err := redislimit.New(rdb, gcra.Per(60, time.Minute), 2,
		redislimit.WithKeyPrefix(uniq(t)),
		redislimit.WithTimeout(100*time.Millisecond),
		redislimit.WithOverLimitCache(10_000),
		redislimit.WithHook("per-user", h.hook()))
	require.NoError(t, err)
	ctx := context.Background()
	var got []string
	for range 4 {
		d, _, err := lim.Take(ctx, "user:42", 1)
		require.NoError(t, err)
		got = append(got, strconv.FormatBool(d.Allowed))
		if !d.Allowed {
			assert.Positive(t, d.RetryAfter)
		}
	}
	assert.Equal(t, []string{"true", "true", "false", "false"}, got)
	assert.Equal(t, 2, h.count(redislimit.SourceRedis, "allowed"))
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "denied"))
	assert.Equal(t, 1, h.count(redislimit.SourceCache, "denied"), "the last denial is the cache's")
	assert.Equal(t, 4, h.total())
}

// allowN reports whether Take admits n events for key: the boolean that
// tests of admission alone look at.
func allowN(l *redislimit.Limiter[string], ctx context.Context, key string, n int) bool {
	d, _, _ := l.Take(ctx, key, n)
	return d.Allowed
}

// decision is the decision Take makes for n events for key, for the tests
// that look at it alone.
func decision(l *redislimit.Limiter[string], ctx context.Context, key string, n int) gcra.Decision {
	d, _, _ := l.Take(ctx, key, n)
	return d
}
