package redislimit_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// fakeClock is the over-limit cache's local clock, moved by hand (ns).
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() int64              { return c.ns.Load() }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func TestOverLimitCache(t *testing.T) {
	s := sharedServer(t)
	cs := &countingScripter{Client: s.client(t)}
	ctx := context.Background()
	l, err := redislimit.New(cs, gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOverLimitCache(100))
	require.NoError(t, err)
	var clock fakeClock
	clock.advance(time.Hour) // any start
	l.SetLocalClock(clock.now)

	require.True(t, allowN(l, ctx, "k", 2))
	assert.Zero(t, l.CacheLen(), "admissions are not cached")
	r := l.TakeResult(ctx, "k", 1)
	require.Equal(t, redislimit.SourceRedis, r.Source)
	require.False(t, r.Allowed)
	assert.Equal(t, 1, l.CacheLen())
	calls := cs.count()

	// Now the cache answers, without a round trip, whatever its bound denies.
	c := l.TakeResult(ctx, "k", 1)
	assert.Equal(t, redislimit.SourceCache, c.Source)
	assert.NoError(t, c.Err)
	assert.False(t, c.Allowed)
	assert.LessOrEqual(t, c.RetryAfter, r.RetryAfter, "a cached retry-after is never longer than Redis's")
	assert.Greater(t, c.RetryAfter, r.RetryAfter-time.Second)
	assert.Equal(t, redislimit.SourceCache, l.PeekResult(ctx, "k", 2).Source)
	assert.Equal(t, gcra.Never, decision(l, ctx, "k", 3).RetryAfter)
	assert.False(t, l.Allow(ctx, "k"))
	assert.Equal(t, calls, cs.count(), "cache hits make no call")

	// The hit path allocates nothing.
	allocs := testing.AllocsPerRun(1000, func() {
		if l.TakeResult(ctx, "k", 1).Source != redislimit.SourceCache {
			panic("not a cache hit")
		}
	})
	assert.Zero(t, allocs)
	allocs = testing.AllocsPerRun(1000, func() {
		if l.Allow(ctx, "k") {
			panic("admitted")
		}
	})
	assert.Zero(t, allocs)
	assert.Equal(t, calls, cs.count(), "Allow's cache hits make no call either")

	// Once the cached retry-after has passed on the local clock, Redis is
	// asked again (here it still denies: its clock has not moved an hour).
	clock.advance(c.RetryAfter)
	r = l.TakeResult(ctx, "k", 1)
	assert.Equal(t, redislimit.SourceRedis, r.Source)
	assert.False(t, r.Allowed)
	assert.Equal(t, calls+1, cs.count())
	// That denial refreshed the bound: cached again.
	assert.Equal(t, redislimit.SourceCache, l.TakeResult(ctx, "k", 1).Source)

	// Other keys are unaffected.
	assert.Equal(t, redislimit.SourceRedis, l.TakeResult(ctx, "other", 1).Source)
}

// TestOverLimitCacheChangesNoDecision runs random traffic through a limiter
// with the cache, with the local clock and Redis's clock set to the same
// time, against gcra on the true state: every Redis decision equals gcra's,
// and every cache answer is a denial gcra also gives.
func TestOverLimitCacheChangesNoDecision(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	base, err := c.Time(ctx).Result()
	require.NoError(t, err)
	t0 := base.UnixMicro()
	hits := 0
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 2))
		interval := time.Duration(50_000+rng.IntN(100_000)) * time.Microsecond
		burst := 1 + rng.IntN(5)
		l, err := redislimit.New(c, gcra.Every(interval), burst,
			redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOverLimitCache(10))
		require.NoError(t, err)
		p := l.Params()
		var at int64 // µs on both clocks
		l.SetLocalClock(func() int64 { return at * us })
		var tat int64
		for i := range 300 {
			at += rng.Int64N(int64(interval) / us / 2)
			n := 1 + rng.IntN(burst+1) // sometimes > B
			peek := rng.IntN(5) == 0
			next, want := p.Decide(tat, at*us, n)
			r := l.DecideAt(ctx, "k", n, !peek, t0+at)
			switch r.Source {
			case redislimit.SourceRedis:
				require.Equal(t, want, r.Decision, "seed %d step %d", seed, i)
			case redislimit.SourceCache:
				hits++
				require.False(t, want.Allowed, "seed %d step %d: the cache denied what Redis admits", seed, i)
				require.False(t, r.Allowed)
				require.LessOrEqual(t, r.RetryAfter, want.RetryAfter, "seed %d step %d", seed, i)
			default:
				t.Fatalf("seed %d step %d: source %v: %v", seed, i, r.Source, r.Err)
			}
			if !peek && want.Allowed {
				tat = next
			}
		}
	}
	assert.Positive(t, hits, "the cache answered nothing: the test tests nothing")
	t.Logf("cache hits: %d", hits)
}

// TestOverLimitCacheBound: a full cache of live entries caches no more;
// once they are stale, a sweep (at most every 100ms) makes room.
func TestOverLimitCacheBound(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOverLimitCache(2))
	require.NoError(t, err)
	var clock fakeClock
	l.SetLocalClock(clock.now)
	for _, k := range []string{"a", "b", "c"} {
		require.True(t, l.Allow(ctx, k))
		require.False(t, l.Allow(ctx, k))
	}
	assert.Equal(t, 2, l.CacheLen(), "the third denial found no room")
	assert.Equal(t, redislimit.SourceRedis, l.TakeResult(ctx, "c", 1).Source)
	// Two hours later (locally) the entries are stale; the next new denial
	// sweeps them out and is cached.
	clock.advance(2 * time.Hour)
	require.Equal(t, redislimit.SourceRedis, l.TakeResult(ctx, "c", 1).Source)
	assert.Equal(t, 1, l.CacheLen())
	assert.Equal(t, redislimit.SourceCache, l.TakeResult(ctx, "c", 1).Source)
}
