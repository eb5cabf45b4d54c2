package atomiclimit_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

type countingHook struct {
	allowed, denied, evicted, overloaded atomic.Int64
	lastRetry                            atomic.Int64
}

func (h *countingHook) Overloaded(policy string, _ int) {
	if policy == "api" {
		h.overloaded.Add(1)
	}
}

func (h *countingHook) Allowed(policy string, cost int) {
	if policy == "api" {
		h.allowed.Add(int64(cost))
	}
}

func (h *countingHook) Denied(policy string, _ int, retry time.Duration) {
	if policy == "api" {
		h.denied.Add(1)
		h.lastRetry.Store(int64(retry))
	}
}

func (h *countingHook) Evicted(policy string, keys int) {
	if policy == "api" {
		h.evicted.Add(int64(keys))
	}
}

// A hook on a Keyed limiter sees every decision, with the denial's exact
// RetryAfter, and every eviction; with the hook set, decisions still
// allocate nothing.
func TestKeyedHook(t *testing.T) {
	clk := newFakeClock()
	h := &countingHook{}
	k := newKeyed[string](t, gcra.Every(time.Second), 2, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
		atomiclimit.WithHook("api", h.hook()))
	now := clk.Now()
	require.True(t, k.AllowN("a", now, 2))
	require.False(t, k.Allow("a"))
	require.False(t, decide(k, "a", 1).Allowed)
	require.True(t, decide(k, "b", 1).Allowed)
	require.Equal(t, int64(3), h.allowed.Load())
	require.Equal(t, int64(2), h.denied.Load())
	require.Equal(t, int64(time.Second), h.lastRetry.Load())
	clk.Advance(time.Hour)
	require.Equal(t, 2, k.Sweep())
	require.Equal(t, int64(2), h.evicted.Load())

	keys := []string{"x", "y"}
	for _, key := range keys {
		k.Allow(key)
	}
	require.Zero(t, testing.AllocsPerRun(1000, func() {
		for _, key := range keys {
			k.Allow(key)
			decide(k, key, 1)
		}
	}))
	_, err := atomiclimit.NewRule(atomiclimit.GCRA(gcra.Per(1, time.Second), 1), atomiclimit.WithHook("api", h.hook()))
	require.ErrorIs(t, err, atomiclimit.ErrOption)
}

// hook returns h as a Hook.
func (h *countingHook) hook() *atomiclimit.Hook {
	return &atomiclimit.Hook{Allowed: h.Allowed, Denied: h.Denied, Overloaded: h.Overloaded, Evicted: h.Evicted}
}
