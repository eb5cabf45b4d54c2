package redislimit_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// TestTakeAgreesWithGCRA runs the decision vectors through Take: every
// decision is gcra's (as Allow's script op's are, TestVectorsRedis), and the
// receipt is the TAT the script stored, exactly, or 0 when it stored
// nothing.
func TestTakeAgreesWithGCRA(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	base, err := c.Time(ctx).Result()
	require.NoError(t, err)
	t0 := base.UnixMicro()
	stored := 0
	for vi, v := range allVectors() {
		l, err := redislimit.New(c, v.limit, v.burst, redislimit.WithKeyPrefix(fmt.Sprintf("vec%d:", vi)+uniq(t)))
		require.NoError(t, err)
		ref := gcraRun(l.Params(), v.steps)
		for i, st := range v.steps {
			if st.peek {
				r := l.DecideAt(ctx, "k", st.n, false, t0+st.at)
				require.Equal(t, ref[i], r.Decision, "%s step %d: peek", v.name, i)
				continue
			}
			r, receipt := l.TakeAt(ctx, "k", st.n, t0+st.at)
			require.Equal(t, redislimit.SourceRedis, r.Source, "%s step %d: %v", v.name, i, r.Err)
			require.Equal(t, ref[i], r.Decision, "%s step %d (at %dµs n %d): take vs gcra", v.name, i, st.at, st.n)
			if !r.Allowed || st.n == 0 {
				require.Zero(t, receipt, "%s step %d: nothing stored, no receipt", v.name, i)
				continue
			}
			stored++
			val, err := c.Get(ctx, l.Key("k")).Result()
			require.NoError(t, err)
			require.Equal(t, val, strconv.FormatUint(remoteWord(receipt), 10), "%s step %d: the receipt is the stored TAT", v.name, i)
		}
	}
	assert.Positive(t, stored)
}

// TestReceiptsZero: whatever stored nothing in Redis has receipt 0, and
// the contract's error is nil exactly when Redis, the cache or the static
// limit decided.
func TestReceiptsZero(t *testing.T) {
	ctx := context.Background()
	s := sharedServer(t)
	l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOverLimitCache(10))
	require.NoError(t, err)
	var clock fakeClock // stands still: the cache's answers repeat exactly
	l.SetLocalClock(clock.now)
	for _, n := range []int{0, -1, 3, math.MaxInt} { // a peek; never admitted
		d, r, err := l.Take(ctx, "k", n)
		require.NoError(t, err)
		assert.Equal(t, n == 0, d.Allowed, "n %d", n)
		assert.Zero(t, r, "n %d", n)
	}
	d, r, err := l.Take(ctx, "k", 2)
	require.NoError(t, err)
	require.True(t, d.Allowed)
	assert.NotZero(t, r, "an admission has a receipt")
	d, r, err = l.Take(ctx, "k", 1) // denied by Redis
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Zero(t, r, "a denial")
	require.Equal(t, redislimit.SourceCache, l.TakeResult(ctx, "k", 1).Source, "the next denial is the cache's")
	d, r, err = l.Take(ctx, "k", 1)
	require.NoError(t, err)
	assert.False(t, d.Allowed)
	assert.Zero(t, r, "a cache denial")
	cd, err := l.Peek(ctx, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, d, cd, "Peek: the cache's decision too")
	cd, err = l.Peek(ctx, "other", 1)
	require.NoError(t, err)
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 1, ResetAfter: time.Hour}, cd, "Peek takes nothing")

	// Static limits: no call, no receipt.
	none := &noServer{}
	for _, lim := range []gcra.Limit{gcra.Unlimited, gcra.DenyAll} {
		sl, err := redislimit.New(none, lim, 2)
		require.NoError(t, err)
		d, r, err := sl.Take(ctx, "k", 1)
		require.NoError(t, err)
		assert.Equal(t, lim == gcra.Unlimited, d.Allowed)
		assert.Zero(t, r, "%v", lim)
		_, err = sl.Peek(ctx, "k", 1)
		require.NoError(t, err)
	}
	assert.Zero(t, none.calls)

	// The Outage policies' admissions: FailOpen's took nothing anywhere;
	// FallbackTo's took from the local limiter, and its receipt gives it
	// back there (a door refunds it when another policy denies).
	for _, name := range []string{"fail-open", "fallback"} {
		p := newPolicy(t, name)
		ol, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage))
		require.NoError(t, err)
		d, r, err := ol.Take(ctx, "k", 1)
		assert.ErrorIs(t, err, redislimit.ErrUnavailable, name)
		assert.ErrorIs(t, err, errNoServer, name)
		assert.True(t, d.Allowed, name)
		cd, err := ol.Peek(ctx, "k", 1)
		assert.ErrorIs(t, err, redislimit.ErrUnavailable, name)
		assert.True(t, cd.Allowed, name)
		if name == "fail-open" {
			assert.Zero(t, r, name)
			continue
		}
		require.NotZero(t, r, name)
		assert.Equal(t, 1, peekLocal(p.local, "k", 0).Remaining, "the fallback took one")
		ok, err := ol.Refund(ctx, "k", 1, r)
		require.NoError(t, err)
		assert.True(t, ok, "given back to the local limiter")
		assert.Equal(t, 2, peekLocal(p.local, "k", 0).Remaining)
		ok, _ = ol.Refund(ctx, "k", 1, r)
		assert.False(t, ok, "once")
		fo, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 2, redislimit.WithOutage(redislimit.FailOpen))
		require.NoError(t, err)
		ok, err = fo.Refund(ctx, "k", 1, r)
		assert.False(t, ok, "a fallback receipt given to a limiter without that fallback")
		assert.NoError(t, err)
	}
}

// TestQuota: the parameters Redis decides with (T rounded up to whole µs),
// as the in-process limiter with those parameters describes them; Unlimited
// and DenyAll as in process. No call.
func TestQuota(t *testing.T) {
	none := &noServer{}
	for _, lim := range []gcra.Limit{gcra.Per(3, time.Second), gcra.Every(time.Hour), gcra.Unlimited, gcra.DenyAll} {
		l, err := redislimit.New(none, lim, 5)
		require.NoError(t, err)
		inProc := lim
		if lim != gcra.Unlimited && lim != gcra.DenyAll {
			inProc = gcra.Every(l.Params().Interval()) // the rounded T
		}
		k, err := atomiclimit.NewKeyed[string](inProc, 5)
		require.NoError(t, err)
		want := k.Quota("any")
		k.Close()
		want.String = l.String()
		assert.Equal(t, want, l.Quota("any"), "%v", lim)
		if lim != gcra.Unlimited && lim != gcra.DenyAll {
			assert.Equal(t, l.Params().Span(), l.Quota("any").Window, "%v", lim)
		}
	}
	assert.Equal(t, atomiclimit.Quota{Kind: "gcra", Limit: 5, Window: 5 * 333334 * time.Microsecond, IdleAfter: 5 * 333334 * time.Microsecond,
		String: "3/s, burst 5 in redis"}, mustNew(t, none, gcra.Per(3, time.Second), 5).Quota("k"))
	assert.Equal(t, math.MaxInt, mustNew(t, none, gcra.Unlimited, 5).Quota("k").Limit)
	assert.Zero(t, mustNew(t, none, gcra.DenyAll, 5).Quota("k").Limit)
	assert.Zero(t, none.calls)
	l := mustNew(t, none, gcra.Per(3, time.Second), 5)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = l.Quota("k") }))
}

func mustNew(t *testing.T, c *noServer, lim gcra.Limit, burst int) *redislimit.Limiter[string] {
	t.Helper()
	l, err := redislimit.New(c, lim, burst)
	require.NoError(t, err)
	return l
}

// remoteWord is the first value of a remote receipt (the stored state).
func remoteWord(r atomiclimit.Receipt) uint64 {
	v, _ := r.Remote()
	return v[0]
}

// TestTakeDenialCostsAllows: Take's denial reads the one integer Allow's
// does, so it allocates no more than Allow (the reply and the call are
// go-redis's; Take builds the Decision on the stack).
func TestTakeDenialCostsAllows(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	require.True(t, l.Allow(ctx, "k"))
	take := testing.AllocsPerRun(200, func() {
		if d, _, err := l.Take(ctx, "k", 1); d.Allowed || err != nil {
			panic("not a denial")
		}
	})
	allow := testing.AllocsPerRun(200, func() {
		if l.Allow(ctx, "k") {
			panic("not a denial")
		}
	})
	assert.Equal(t, allow, take)
}
