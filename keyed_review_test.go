package atomiclimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// Regression tests for what a review of the keyed limiter found.

// A tier function that panics must not leave a map bucket locked or a key
// slot counted: the next request, on any key, proceeds.
func TestKeyedTierFuncPanicLeavesNoLock(t *testing.T) {
	k := newKeyed[string](t, gcra.Every(time.Second), 1, atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	k.SetTierFunc(func(s string) *atomiclimit.Tier {
		if s == "boom" {
			panic("bad key")
		}
		return nil
	})
	func() {
		defer func() { require.NotNil(t, recover()) }()
		k.Allow("boom")
	}()
	done := make(chan bool)
	go func() { done <- k.Allow("ok") }()
	select {
	case ok := <-done:
		require.True(t, ok, "the only slot must still be free")
	case <-time.After(10 * time.Second):
		t.Fatal("Allow blocked after a panicking tier function")
	}
	require.Equal(t, 1, k.Stats().Keys)
}

// A request stamped far ahead must not make room by removing keys that will
// be idle then but are not yet (the floor would rise ahead of real time, and
// keys created later would start in debt): eviction never looks past the
// limiter's clock.
func TestKeyedFutureRequestLeavesNewKeysFull(t *testing.T) {
	clk := newFakeClock()
	k := newKeyed[string](t, gcra.Every(time.Second), 2, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
		atomiclimit.WithMaxKeys(2, atomiclimit.RejectNew))
	t0 := clk.Now()
	require.True(t, k.AllowN("a", t0, 1))
	require.True(t, k.AllowN("b", t0, 1))
	require.False(t, k.AllowN("c", t0.Add(time.Hour), 1), "a and b are idle an hour later, not now")
	require.Equal(t, 2, k.Stats().Keys)
	require.LessOrEqual(t, k.Floor(), int64(time.Second))
	require.Equal(t, 2, k.PeekN("x", t0.Add(3*time.Second), 0).Remaining, "a new key is full")
	clk.Advance(3 * time.Second)
	k.Sweep()
	require.True(t, k.AllowN("x", t0.Add(3*time.Second), 2), "a new key at real time gets its whole burst")
}

// A full limiter refuses a new key, unless the key's tier is Unlimited (it
// needs no state); a refused DenyAll key is told Never.
func TestKeyedRefusedTiers(t *testing.T) {
	clk := newFakeClock()
	k := newKeyed[string](t, gcra.Every(time.Hour), 1, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
		atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	unlimited, err := k.NewTier(atomiclimit.GCRA(gcra.Unlimited, 0))
	require.NoError(t, err)
	denyAll, err := k.NewTier(atomiclimit.GCRA(gcra.DenyAll, 0))
	require.NoError(t, err)
	k.SetTierFunc(func(s string) *atomiclimit.Tier {
		switch s[0] {
		case 'u':
			return unlimited
		case 'd':
			return denyAll
		}
		return nil
	})
	require.True(t, k.Allow("a"))
	require.True(t, k.Allow("u1"), "Unlimited needs no room")
	require.True(t, decide(k, "u1", 5).Allowed)
	r, err := k.Reserve("u2")
	require.NoError(t, err)
	require.Zero(t, r.Delay())
	d := decide(k, "d1", 1)
	require.False(t, d.Allowed)
	require.Equal(t, gcra.Never, d.RetryAfter)
	d = decide(k, "b", 1)
	require.False(t, d.Allowed)
	require.Equal(t, time.Hour, d.RetryAfter)
	st := k.Stats()
	require.Equal(t, 1, st.Keys)
	require.Equal(t, uint64(1), st.Rejected, "b: d1 is DenyAll, which no state can change, so it needs none and is never refused for room; the Unlimited keys were not refused")
}

// SetKeyLimit and ClearKeyLimit on absent keys insert nothing.
func TestKeyedKeyLimitInsertsNothing(t *testing.T) {
	k := newKeyed[string](t, gcra.Per(1, time.Second), 1, atomiclimit.WithSweepInterval(0))
	require.NoError(t, k.SetKeyRule("x", atomiclimit.GCRA(gcra.Per(1, time.Second), 5)))
	k.ClearKeyRule("y")
	require.Equal(t, 0, k.Stats().Keys)
	require.Zero(t, k.Stats().Created)
	require.Equal(t, 5, peek(k, "x", 0).Remaining)
}

// A full EvictStalest limiter evicts an active key, then retires an idle
// cell created after its scan: the floor must cover that cell's TAT too.
func TestKeyedEvictStalestRaisesFloor(t *testing.T) {
	clk := newFakeClock()
	k := newKeyed[string](t, gcra.Every(time.Millisecond), 3, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
		atomiclimit.WithMaxKeys(1, atomiclimit.EvictStalest), atomiclimit.WithShards(1))
	t0 := clk.Now()
	ms := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Millisecond))) }
	require.True(t, k.AllowN("a", t0, 3)) // TAT 3 ms
	clk.Set(time.Millisecond)
	require.True(t, k.AllowN("b", ms(1), 1)) // no idle key: a evicted active; b's TAT 2 ms
	clk.Set(5 * time.Millisecond)
	require.True(t, k.AllowN("c", ms(5), 1)) // b is idle at 5 ms
	// A late request for b stamped 1.5 ms: the kept b (TAT 2 ms) would hold
	// 2 tokens then, never 3.
	require.False(t, k.AllowN("b", ms(1.5), 3), "over-admission after EvictStalest retired an idle cell")
}
