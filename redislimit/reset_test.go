package redislimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// TestReset: Reset deletes the key's state for every process, and this
// process's over-limit cache forgets the key at once.
func TestReset(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOverLimitCache(10))
	require.NoError(t, err)
	var clock fakeClock
	l.SetLocalClock(clock.now)
	require.True(t, allowN(l, ctx, "k", 2))
	require.True(t, allowN(l, ctx, "other", 2))
	require.False(t, l.Allow(ctx, "k"))
	require.Equal(t, redislimit.SourceCache, l.TakeResult(ctx, "k", 1).Source)

	require.NoError(t, l.Reset(ctx, "k"))
	assert.Equal(t, "", stored(t, c, l.Key("k")), "the state is gone")
	assert.NotEqual(t, "", stored(t, c, l.Key("other")), "only the key's")
	r := l.TakeResult(ctx, "k", 2)
	assert.Equal(t, redislimit.SourceRedis, r.Source, "the cache forgot the key")
	assert.True(t, r.Allowed, "a full bucket again")
	assert.False(t, l.Allow(ctx, "other"))

	// Resetting an absent key is no error.
	require.NoError(t, l.Reset(ctx, "never"))
	// The static limits keep no state: no call.
	srv := &noServer{}
	for _, lim := range []gcra.Limit{gcra.Unlimited, gcra.DenyAll} {
		st, err := redislimit.New(srv, lim, 1)
		require.NoError(t, err)
		require.NoError(t, st.Reset(ctx, "k"))
	}
	assert.Zero(t, srv.calls)
	// A caller who gave up: no call, ctx's error.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cs := &countingScripter{Client: c}
	lc, err := redislimit.New(cs, gcra.Every(time.Hour), 2)
	require.NoError(t, err)
	assert.ErrorIs(t, lc.Reset(cancelled, "k"), context.Canceled)
	assert.Zero(t, cs.count())
}

// TestCacheMaxAgeBoundsStaleness: a reset this process does not see (DEL
// from elsewhere, FLUSHALL, a restart) leaves its over-limit cache denying
// the key for less than the max age after the denial that last refreshed
// the entry, and not one nanosecond longer.
func TestCacheMaxAgeBoundsStaleness(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	for _, maxAge := range []time.Duration{0, 250 * time.Millisecond} {
		opts := []redislimit.Option{redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOverLimitCache(10)}
		want := time.Second
		if maxAge > 0 {
			opts, want = append(opts, redislimit.WithOverLimitCacheMaxAge(maxAge)), maxAge
		}
		l, err := redislimit.New(c, gcra.Every(time.Hour), 1, opts...)
		require.NoError(t, err)
		var clock fakeClock
		l.SetLocalClock(clock.now)
		require.True(t, l.Allow(ctx, "k"))
		require.False(t, l.Allow(ctx, "k")) // recorded, seen at local 0
		require.NoError(t, c.Del(ctx, l.Key("k")).Err())

		clock.advance(want - 1)
		r := l.TakeResult(ctx, "k", 1)
		assert.Equal(t, redislimit.SourceCache, r.Source, "stale, within the bound")
		assert.False(t, r.Allowed)
		assert.False(t, l.Allow(ctx, "k"))
		clock.advance(1)
		r = l.TakeResult(ctx, "k", 1)
		assert.Equal(t, redislimit.SourceRedis, r.Source, "max age %v: the entry no longer answers", want)
		assert.True(t, r.Allowed)

		// A Redis denial refreshes the entry's age.
		require.False(t, l.Allow(ctx, "k")) // seen at want
		clock.advance(want - 1)
		assert.Equal(t, redislimit.SourceCache, l.TakeResult(ctx, "k", 1).Source)
		clock.advance(1)
		assert.Equal(t, redislimit.SourceRedis, l.TakeResult(ctx, "k", 1).Source, "then asks Redis, which denies")
		assert.Equal(t, redislimit.SourceCache, l.TakeResult(ctx, "k", 1).Source, "refreshed")
	}
	_, err := redislimit.New(c, gcra.Every(time.Hour), 1, redislimit.WithOverLimitCacheMaxAge(0))
	assert.ErrorIs(t, err, redislimit.ErrInvalidCacheMaxAge)
}

// TestCacheAfterRestart: the case: a process with the cache denied
// a user for 30 minutes after his state was lost (here, a restart without
// persistence); now for at most the max age.
func TestCacheAfterRestart(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Every(30*time.Minute), 1, redislimit.WithOverLimitCache(10))
	require.NoError(t, err)
	var clock fakeClock
	l.SetLocalClock(clock.now)
	require.True(t, l.Allow(ctx, "k"))
	require.False(t, l.Allow(ctx, "k"))
	s.kill()
	s.restart(t)
	assert.False(t, l.Allow(ctx, "k"), "within the max age the entry answers")
	clock.advance(time.Second)
	assert.True(t, l.Allow(ctx, "k"), "then Redis, which lost the state, admits")
}

// TestRefundAfterReset: Reset (or a DEL, an eviction, a restart) gives the
// whole bucket back, and a receipt from before it cannot always tell the
// new state from the one it came from. A new state below the receipt's due
// time + n·T cannot hold its admission, and gets nothing; one at least that
// far ahead, while the receipt's tokens are not yet due, gets up to its
// n·T. Once they are due, nothing.
func TestRefundAfterReset(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	const h = int64(time.Hour / time.Microsecond)
	l, err := redislimit.New(c, gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)

	_, before := l.TakeAt(ctx, "k", 2, t0) // r = t0 + 2h, due at t0
	require.NoError(t, l.Reset(ctx, "k"))
	r, _ := l.TakeAt(ctx, "k", 1, t0) // the new state: t0 + 1h
	require.True(t, r.Allowed)
	ok, err := l.RefundAt(ctx, "k", 2, before, t0)
	require.NoError(t, err)
	assert.False(t, ok, "t0 + 1h cannot hold 2h of tokens due at t0")
	assert.Equal(t, fmt.Sprint(t0+h), stored(t, c, l.Key("k")))

	_, before = l.TakeAt(ctx, "k3", 2, t0)
	require.NoError(t, l.Reset(ctx, "k3"))
	r, _ = l.TakeAt(ctx, "k3", 3, t0) // the new state: t0 + 3h
	require.True(t, r.Allowed)
	ok, err = l.RefundAt(ctx, "k3", 2, before, t0)
	require.NoError(t, err)
	assert.True(t, ok, "the old receipt gives back to a new state that could hold it")
	// With the epoch of a give-back that moved another admission than its
	// own.
	assert.Equal(t, fmt.Sprintf("%d:%d", t0+h, t0), stored(t, c, l.Key("k3")))
	d := l.DecideAt(ctx, "k3", 2, false, t0)
	assert.True(t, d.Allowed, "2 more at t0, after 2 + 3 admitted at t0")

	// Once its tokens are due (now ≥ r), a receipt gives nothing back.
	_, before = l.TakeAt(ctx, "due", 2, t0)
	require.NoError(t, l.Reset(ctx, "due"))
	r, _ = l.TakeAt(ctx, "due", 3, t0+2*h)
	require.True(t, r.Allowed)
	ok, err = l.RefundAt(ctx, "due", 2, before, t0+2*h)
	require.NoError(t, err)
	assert.False(t, ok)
}
