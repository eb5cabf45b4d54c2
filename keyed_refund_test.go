package atomiclimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// A give-back can make a key idle sooner than its last admission said. A
// full limiter that has just scanned and found no idle key must see it:
// RejectNew then admits a new key in the room the given-back key leaves.
func TestRefundMakesRoomRejectNew(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Every(time.Second), 1), atomiclimit.WithClock(clk),
		atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(2, atomiclimit.RejectNew))
	require.NoError(t, err)
	_, ra, _ := k.Take(ctx, "a", 1)
	_, _, _ = k.Take(ctx, "b", 1)
	require.False(t, decide(k, "c", 1).Allowed, "full: a and b are active for a second")
	ok, _ := k.Refund(ctx, "a", 1, ra)
	require.True(t, ok)
	require.True(t, decide(k, "c", 1).Allowed, "a is idle since its give-back: c takes its room")
	require.Equal(t, uint64(1), k.Stats().Evicted)
}

// EvictStalest removes an active key only if no key is idle, wherever the
// keys fall among the shards: after a give-back made a key idle, a new key
// takes that key's room and the active key keeps its state.
func TestRefundMakesRoomEvictStalest(t *testing.T) {
	ctx := context.Background()
	for trial := range 60 {
		clk := newFakeClock()
		k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Every(time.Second), 2), atomiclimit.WithClock(clk),
			atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(2, atomiclimit.EvictStalest))
		require.NoError(t, err)
		key := func(s string) string { return fmt.Sprintf("%s%d", s, trial) }
		_, ra, _ := k.Take(ctx, key("a"), 2)
		_, rb, _ := k.Take(ctx, key("b"), 2)
		// c finds the limiter full and nothing idle: an active key goes (the
		// stalest of the first shard that holds one), after a scan that
		// found nothing idle.
		require.True(t, decide(k, key("c"), 2).Allowed)
		require.Equal(t, uint64(1), k.Stats().EvictedActive)
		// The survivor gives its admission back: it is idle now.
		okA, _ := k.Refund(ctx, key("a"), 2, ra)
		okB, _ := k.Refund(ctx, key("b"), 2, rb)
		require.True(t, okA != okB, "exactly one of a and b is still held, and gives back")
		require.True(t, decide(k, key("d"), 1).Allowed)
		require.Equal(t, uint64(1), k.Stats().EvictedActive, "trial %d: d took an active key's room while the survivor was idle", trial)
		require.Equal(t, 0, peek(k, key("c"), 0).Remaining, "trial %d: c keeps its state", trial)
	}
}

// A receipt gives back only to the state that issued it: once EvictStalest
// has removed an active key and the key came back with a fresh state, the
// old receipt gives back nothing (for every rule that gives back).
func TestRefundOnlyToItsOwnState(t *testing.T) {
	ctx := context.Background()
	for _, c := range takeRules {
		if !c.refunds {
			continue
		}
		t.Run("algo="+c.name, func(t *testing.T) {
			clk := newFakeClock()
			k, err := atomiclimit.NewKeyedRule[string](c.rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
				atomiclimit.WithMaxKeys(1, atomiclimit.EvictStalest))
			require.NoError(t, err)
			d, old, _ := k.Take(ctx, "a", 1)
			require.True(t, d.Allowed)
			require.True(t, decide(k, "b", 1).Allowed, "b takes a's room: a is evicted while active")
			d, _, _ = k.Take(ctx, "a", 1)
			require.True(t, d.Allowed, "a comes back with a fresh state")
			before := peek(k, "a", 0)
			ok, _ := k.Refund(ctx, "a", 1, old)
			require.False(t, ok, "a receipt of the removed state")
			require.Equal(t, before, peek(k, "a", 0), "the new state keeps its admission")
			require.Equal(t, uint64(2), k.Stats().EvictedActive)
		})
	}
}
