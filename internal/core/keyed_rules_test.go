package core_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/core"
)

// Every rule gets the keyed machinery GCRA has: tiers chosen per key,
// a key's own limit, the hook, and the key bound. On a t0… timeline, a
// key's own rule and a tier's rule are the ones its decisions follow, and
// its Quota says so.
func TestKeyedTiersForEveryRule(t *testing.T) {
	const w = time.Second
	for _, c := range []struct {
		name        string
		def, strict core.Rule // the limiter's rule, and a stricter one of the same shape
		incompat    core.Rule // another algorithm or window: rejected
	}{
		{"gcra", core.GCRA(gcra.Every(w/4), 4), core.GCRA(gcra.Every(w/2), 2), core.FixedWindow(4, w)},
		{"fixed", core.FixedWindow(4, w), core.FixedWindow(2, w), core.FixedWindow(4, 2*w)},
		{"anchored", core.AnchoredWindow(7, w), core.AnchoredWindow(4, w), core.AnchoredWindow(200, w)},
		{"counter", core.SlidingCounter(4, w), core.SlidingCounter(2, w), core.SlidingLog(4, w)},
		{"log", core.SlidingLog(4, w), core.SlidingLog(4, 2*w), core.SlidingLog(2, w)},
		{"rolling", core.Rolling(4, w, w/4, 0), core.Rolling(4, w, w/4, 2), core.Rolling(4, w, w/2, 0)},
		{"bands", core.Bands(core.GCRA(gcra.Every(w/4), 4), core.FixedWindow(4, w)),
			core.Bands(core.GCRA(gcra.Every(w/4), 4), core.FixedWindow(2, w)),
			core.Bands(core.FixedWindow(4, w), core.GCRA(gcra.Every(w/4), 4))},
	} {
		t.Run("algo="+c.name, func(t *testing.T) {
			clk := newFakeClock()
			hook := &countingHook{}
			k, err := core.NewKeyed[string](c.def, core.WithClock(clk), core.WithSweepInterval(0),
				core.WithHook("api", hook), core.WithMaxKeys(3, core.RejectNew))
			require.NoError(t, err)
			strict, err := k.NewTier(c.strict)
			require.NoError(t, err)
			_, err = k.NewTier(c.incompat)
			require.ErrorIs(t, err, core.ErrIncompatible)
			require.ErrorIs(t, k.SetKeyRule("own", c.incompat), core.ErrIncompatible)
			k.SetTierFunc(func(key string) *core.Tier {
				if key == "tiered" {
					return strict
				}
				return nil
			})
			require.NoError(t, k.SetKeyRule("own", c.strict))

			t0 := clk.Now()
			admitted := func(key string) int {
				n := 0
				for range 8 {
					if k.AllowN(key, t0, 1) {
						n++
					}
				}
				return n
			}
			plain, tiered, own := admitted("plain"), admitted("tiered"), admitted("own")
			// The strict rule admits less at one instant (or, for the log with a
			// longer window, the same now and less later).
			require.Positive(t, plain)
			require.LessOrEqual(t, tiered, plain)
			require.Equal(t, tiered, own, "a key's own rule and the same rule as a tier decide alike")
			require.Equal(t, c.strict.String(), k.Quota("tiered").String)
			require.Equal(t, c.strict.String(), k.Quota("own").String)
			require.Equal(t, c.def.String(), k.Quota("plain").String)

			// The key bound holds for every rule: a fourth key is refused,
			// with the time its rule takes to become idle.
			d := k.DecideAt("fourth", t0, 1)
			require.False(t, d.Allowed)
			require.Positive(t, d.RetryAfter)
			require.Equal(t, d.RetryAfter, d.TokenAfter, "(e): a refused new key's t is its RetryAfter")
			require.Equal(t, 3, k.Len())

			// The hook saw every decision.
			require.EqualValues(t, plain+tiered+own, hook.allowed.Load())
			require.EqualValues(t, 24-plain-tiered-own+1, hook.denied.Load())

			// ClearKeyRule puts the key back on the default.
			k.ClearKeyRule("own")
			require.Equal(t, c.def.String(), k.Quota("own").String)
		})
	}
}
