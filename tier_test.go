package atomiclimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// Every rule gets the keyed machinery GCRA has: tiers chosen per key,
// a key's own limit, the hook, and the key bound. On a t0… timeline, a
// key's own rule and a tier's rule are the ones its decisions follow, and
// its Quota says so.
func TestKeyedTiersForEveryRule(t *testing.T) {
	const w = time.Second
	for _, c := range []struct {
		name        string
		def, strict atomiclimit.Rule // the limiter's rule, and a stricter one of the same shape
		incompat    atomiclimit.Rule // another algorithm or window: rejected
	}{
		{"gcra", atomiclimit.GCRA(gcra.Every(w/4), 4), atomiclimit.GCRA(gcra.Every(w/2), 2), atomiclimit.FixedWindow(4, w)},
		{"fixed", atomiclimit.FixedWindow(4, w), atomiclimit.FixedWindow(2, w), atomiclimit.FixedWindow(4, 2*w)},
		{"anchored", atomiclimit.AnchoredWindow(7, w), atomiclimit.AnchoredWindow(4, w), atomiclimit.AnchoredWindow(200, w)},
		{"counter", atomiclimit.SlidingCounter(4, w), atomiclimit.SlidingCounter(2, w), atomiclimit.SlidingLog(4, w)},
		{"log", atomiclimit.SlidingLog(4, w), atomiclimit.SlidingLog(4, 2*w), atomiclimit.SlidingLog(2, w)},
		{"rolling", atomiclimit.Rolling(4, w, w/4, 0), atomiclimit.Rolling(4, w, w/4, 2), atomiclimit.Rolling(4, w, w/2, 0)},
		{"bands", atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(w/4), 4), atomiclimit.FixedWindow(4, w)),
			atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(w/4), 4), atomiclimit.FixedWindow(2, w)),
			atomiclimit.Bands(atomiclimit.FixedWindow(4, w), atomiclimit.GCRA(gcra.Every(w/4), 4))},
	} {
		t.Run("algo="+c.name, func(t *testing.T) {
			clk := newFakeClock()
			hook := &countingHook{}
			k, err := atomiclimit.NewKeyedRule[string](c.def, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
				atomiclimit.WithHook("api", hook.hook()), atomiclimit.WithMaxKeys(3, atomiclimit.RejectNew))
			require.NoError(t, err)
			strict, err := k.NewTier(c.strict)
			require.NoError(t, err)
			_, err = k.NewTier(c.incompat)
			require.ErrorIs(t, err, atomiclimit.ErrIncompatible)
			require.ErrorIs(t, k.SetKeyRule("own", c.incompat), atomiclimit.ErrIncompatible)
			k.SetTierFunc(func(key string) *atomiclimit.Tier {
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
			// with the time until the limiter can take it.
			d := decideN(k, "fourth", t0, 1)
			require.False(t, d.Allowed)
			require.Positive(t, d.RetryAfter)
			require.Equal(t, d.RetryAfter, d.TokenAfter, "(e): a refused new key's t is its RetryAfter")
			require.Equal(t, 3, k.Stats().Keys)

			// The hook saw every decision.
			require.EqualValues(t, plain+tiered+own, hook.allowed.Load())
			require.EqualValues(t, 24-plain-tiered-own, hook.denied.Load())
			require.EqualValues(t, 1, hook.overloaded.Load(), "the refused new key: the limiter's capacity, not a quota")

			// ClearKeyRule puts the key back on the default.
			k.ClearKeyRule("own")
			require.Equal(t, c.def.String(), k.Quota("own").String)
		})
	}
}

// A limiter's rule can be changed while keys hold state, at any time after
// it was built, for every algorithm: SetRule, NewTier and SetKeyRule build
// the new rule's windows from the limiter's own start, so a compatible rule
// built later is accepted (the fixed window, counter and rolling window
// were refused once the clock had moved). Lowering the limit below what a
// live state already counts leaves it with none: Remaining is never
// negative, a denial's TokenAfter never exceeds its RetryAfter (the headers'
// t and Retry-After), and n = 0 stays an admitted peek.
func TestKeyedSetRuleOnLiveStates(t *testing.T) {
	const w = time.Second
	for _, c := range []struct {
		name       string
		big, small atomiclimit.Rule
	}{
		{"gcra", atomiclimit.GCRA(gcra.Every(w/16), 15), atomiclimit.GCRA(gcra.Every(w/8), 8)},
		{"fixed", atomiclimit.FixedWindow(15, w), atomiclimit.FixedWindow(8, w)},
		{"fixed-utc", atomiclimit.FixedWindowUTC(15, w, 0), atomiclimit.FixedWindowUTC(8, w, 0)},
		{"anchored", atomiclimit.AnchoredWindow(15, w), atomiclimit.AnchoredWindow(8, w)},
		{"counter", atomiclimit.SlidingCounter(15, w), atomiclimit.SlidingCounter(8, w)},
		{"log", atomiclimit.SlidingLog(8, w), atomiclimit.SlidingLog(8, 2*w)},
		{"rolling", atomiclimit.Rolling(15, w, w/4, 0), atomiclimit.Rolling(8, w, w/4, 0)},
		{"bands", atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(w/16), 15), atomiclimit.FixedWindow(15, w)),
			atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(w/8), 8), atomiclimit.FixedWindow(8, w))},
	} {
		t.Run("algo="+c.name, func(t *testing.T) {
			clk := newFakeClock()
			k, err := atomiclimit.NewKeyedRule[string](c.big, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			l, err := atomiclimit.NewRule(c.big, atomiclimit.WithClock(clk))
			require.NoError(t, err)
			clk.Set(1500 * time.Millisecond) // well past the first window
			now := clk.Now()
			for k.AllowN("a", now, 1) {
			}
			for l.AllowN(now, 1) {
			}
			require.NoError(t, k.SetRule(c.big), "the same rule again, later")
			require.NoError(t, l.SetRule(c.big), "the same rule again, later")
			_, err = k.NewTier(c.small)
			require.NoError(t, err, "a tier built later")
			require.NoError(t, k.SetKeyRule("b", c.small), "a key's own rule, later")
			require.NoError(t, k.SetRule(c.small), "a lower limit on live states")
			require.NoError(t, l.SetRule(c.small), "a lower limit on a live state")
			for _, at := range []time.Duration{0, 10 * time.Millisecond, 300 * time.Millisecond} {
				t2 := now.Add(at)
				for name, peek := range map[string]gcra.Decision{
					"keyed peek 0": k.PeekN("a", t2, 0), "peek 0": l.PeekN(t2, 0),
				} {
					require.True(t, peek.Allowed, "%s at +%v: n = 0 is an admitted peek", name, at)
					require.GreaterOrEqual(t, peek.Remaining, 0, "%s at +%v", name, at)
				}
				for name, d := range map[string]gcra.Decision{
					"keyed": k.PeekN("a", t2, 1), "single": l.PeekN(t2, 1),
				} {
					require.GreaterOrEqual(t, d.Remaining, 0, "%s at +%v: %+v", name, at, d)
					if !d.Allowed {
						require.Positive(t, d.RetryAfter, "%s at +%v: %+v", name, at, d)
						require.LessOrEqual(t, d.TokenAfter, d.RetryAfter, "%s at +%v: %+v", name, at, d)
					}
				}
			}
		})
	}
}

// Peek of a key the limiter does not hold allocates nothing under a
// one-word rule (it decided on a fresh Bucket that escaped: one allocation
// per call for GCRA), and neither does a cost-0 request for a new key,
// which peeks.
func TestKeyedPeekAbsentKeyAllocatesNothing(t *testing.T) {
	for _, r := range []atomiclimit.Rule{atomiclimit.GCRA(gcra.Per(10, time.Second), 5), atomiclimit.FixedWindow(5, time.Second), atomiclimit.SlidingCounter(5, time.Second)} {
		k, err := atomiclimit.NewKeyedRule[int](r, atomiclimit.WithSweepInterval(0))
		require.NoError(t, err)
		now := time.Now()
		allocs := testing.AllocsPerRun(100, func() {
			k.PeekN(7, now, 1)
			k.AllowN(8, now, 0)
			decideN(k, 9, now, 0)
		})
		require.Zero(t, allocs, "%v", r)
		require.Zero(t, k.Stats().Keys, "%v: peeks create no key", r)
	}
}

// A refused new key is the limiter's capacity, not the key's quota: the
// hook is told Overloaded on every path (Allow, Decide, Take), Take fails
// with ErrTooManyKeys, and the wait is the time until the limiter can take
// the key: when the key it holds becomes idle.
func TestKeyedHookRefusedNewKey(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	hook := &countingHook{}
	k, err := atomiclimit.NewKeyedRule[string](atomiclimit.FixedWindow(2, 5*time.Second), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
		atomiclimit.WithHook("api", hook.hook()), atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	require.NoError(t, err)
	require.True(t, k.Allow("a"))
	clk.Advance(time.Second)
	require.False(t, k.Allow("b"), "full: the new key is refused")
	require.EqualValues(t, 1, hook.overloaded.Load(), "Allow's refusal")
	d := decide(k, "b", 1)
	require.False(t, d.Allowed)
	require.Equal(t, 4*time.Second, d.RetryAfter, "a is idle once its window ends, 4s from now")
	require.EqualValues(t, 2, hook.overloaded.Load(), "Decide's refusal")
	d, r, err := k.Take(ctx, "b", 1)
	require.ErrorIs(t, err, atomiclimit.ErrTooManyKeys)
	require.False(t, d.Allowed)
	require.Zero(t, r)
	require.EqualValues(t, 3, hook.overloaded.Load(), "Take's refusal")
	require.Zero(t, hook.denied.Load(), "no quota was denied")
	clk.Advance(4 * time.Second)
	require.True(t, decide(k, "b", 1).Allowed, "after the wait it was told, b fits")
}
