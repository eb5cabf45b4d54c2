package atomiclimit_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// takeRules are the rules Take and Refund are tested on: the ones whose
// admissions can be given back, and the two that cannot (the log, bands).
var takeRules = []struct {
	name    string
	rule    atomiclimit.Rule
	refunds bool
}{
	{"gcra", atomiclimit.GCRA(gcra.Every(250*time.Millisecond), 4), true},
	{"fixed", atomiclimit.FixedWindow(4, time.Second), true},
	{"anchored", atomiclimit.AnchoredWindow(4, time.Second), true},
	{"counter", atomiclimit.SlidingCounter(4, time.Second), true},
	{"rolling", atomiclimit.Rolling(4, time.Second, 250*time.Millisecond, 0), true},
	{"log", atomiclimit.SlidingLog(4, time.Second), false},
	{"bands", atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(250*time.Millisecond), 4), atomiclimit.FixedWindow(4, time.Second)), false},
}

// Take is Decide with a receipt, and a Refund of that receipt puts the key
// back where it was: the next decisions are those of a key that never had
// the admission. For the log and bands the receipt is 0 and nothing is
// given back. A denial, a peek and a refused request have no receipt.
func TestKeyedTakeRefund(t *testing.T) {
	ctx := context.Background()
	for _, c := range takeRules {
		t.Run("algo="+c.name, func(t *testing.T) {
			clk := newFakeClock()
			k, err := atomiclimit.NewKeyedRule[string](c.rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			ref, err := atomiclimit.NewKeyedRule[string](c.rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			clk.Advance(100 * time.Millisecond)

			// One admission on both, then a second one on k only, refunded.
			d, _, err := k.Take(ctx, "a", 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			require.Equal(t, decide(ref, "a", 1), d, "Take decides as the reference does")
			d, r, err := k.Take(ctx, "a", 1)
			require.NoError(t, err)
			require.True(t, d.Allowed)
			ok, err := k.Refund(ctx, "a", 1, r)
			require.NoError(t, err)
			require.Equal(t, c.refunds, ok)
			require.Equal(t, c.refunds, r != (atomiclimit.Receipt{}), "a receipt exactly when it can be refunded")
			require.Equal(t, c.refunds, k.Quota("a").Refunds(), "Quota says which rules give admissions back")
			if c.refunds {
				require.Equal(t, peek(ref, "a", 0), peek(k, "a", 0), "after the refund, the key is as if the admission never happened")
				for range 6 {
					require.Equal(t, decide(ref, "a", 1), decide(k, "a", 1))
				}
			} else {
				require.Equal(t, peek(ref, "a", 0).Remaining-1, peek(k, "a", 0).Remaining, "nothing given back")
			}

			// Receipts only for admissions that stored something.
			_, r, _ = k.Take(ctx, "b", 0)
			require.Zero(t, r, "a peek")
			_, r, _ = k.Take(ctx, "b", 5)
			require.Zero(t, r, "more than the rule ever admits")
			_, r, _ = k.Take(ctx, "b", -1)
			require.Zero(t, r, "n < 0")
			for {
				d, r, _ = k.Take(ctx, "c", 1)
				if !d.Allowed {
					break
				}
			}
			require.Zero(t, r, "a denial")
			ok, _ = k.Refund(ctx, "c", 1, atomiclimit.Receipt{})
			require.False(t, ok, "the zero Receipt")
			if c.refunds {
				_, other, _ := k.Take(ctx, "d", 1)
				require.NotZero(t, other)
				ok, _ = k.Refund(ctx, "absent", 1, other)
				require.False(t, ok, "a key not held")
				ok, _ = k.Refund(ctx, "a", 1, other)
				require.False(t, ok, "another key's receipt")
				ok, _ = k.Refund(ctx, "d", 1, other)
				require.True(t, ok, "its own key's")
			}
		})
	}
}

// Refunds give back in any order, and never create quota. GCRA: two
// admissions at one instant given back first to last, both come back; a
// refund after time has passed never fills more than the bucket. The fixed
// window: counts add, so any admission of the window comes back; once its
// window has passed, nothing does (its count decides nothing any more).
func TestKeyedRefundNeverCreatesQuota(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	g, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Every(time.Second), 3), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	_, r1, _ := g.Take(ctx, "k", 1)
	_, r2, _ := g.Take(ctx, "k", 1)
	ok, _ := g.Refund(ctx, "k", 1, r1)
	require.True(t, ok, "GCRA: the first, with a later admission after it")
	require.Equal(t, 2, peek(g, "k", 0).Remaining)
	ok, _ = g.Refund(ctx, "k", 1, r2)
	require.True(t, ok, "then the later one")
	require.Equal(t, 3, peek(g, "k", 0).Remaining)
	ok, _ = g.Refund(ctx, "k", 1, r2)
	require.False(t, ok, "a full bucket has nothing to give back")

	// Time passing: a refund never moves the TAT below now.
	_, r, _ := g.Take(ctx, "t", 3)
	clk.Advance(2 * time.Second)
	ok, _ = g.Refund(ctx, "t", 3, r)
	require.True(t, ok)
	require.Equal(t, 3, peek(g, "t", 0).Remaining)
	require.Equal(t, 0, peek(g, "t", 3).Remaining, "full, and no more than full")

	f, err := atomiclimit.NewKeyedRule[string](atomiclimit.FixedWindow(3, time.Second), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	_, r1, _ = f.Take(ctx, "k", 1)
	_, _, _ = f.Take(ctx, "k", 1)
	ok, _ = f.Refund(ctx, "k", 1, r1)
	require.True(t, ok, "fixed window: counts add, any admission of the window can be given back")
	_, r, _ = f.Take(ctx, "k", 1)
	clk.Advance(time.Second)
	_, _, _ = f.Take(ctx, "k", 1)
	ok, _ = f.Refund(ctx, "k", 1, r)
	require.False(t, ok, "its window has passed: nothing to give back in the new one")
	require.Equal(t, 2, peek(f, "k", 0).Remaining)
}

// Many goroutines take and refund on one key at one instant. Whatever the
// interleaving, the key's state at the end is exactly that of the
// admissions not refunded, and no more than the quota is ever held: net
// admissions (taken minus refunded) ≤ quota, and the key's Remaining equals
// quota − net.
func TestKeyedTakeRefundConcurrent(t *testing.T) {
	ctx := context.Background()
	const quota = 64
	for _, c := range takeRules[:5] {
		t.Run("algo="+c.name, func(t *testing.T) {
			rule := map[string]atomiclimit.Rule{
				"gcra":     atomiclimit.GCRA(gcra.Every(time.Second), quota),
				"fixed":    atomiclimit.FixedWindow(quota, time.Hour),
				"anchored": atomiclimit.AnchoredWindow(quota, time.Hour),
				"counter":  atomiclimit.SlidingCounter(quota, time.Hour),
				"rolling":  atomiclimit.Rolling(quota, time.Hour, time.Minute, 0),
			}[c.name]
			clk := newFakeClock()
			k, err := atomiclimit.NewKeyedRule[string](rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			var taken, refunded atomic.Int64
			hammerEach(func(g int) struct{} {
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				for range 2000 {
					n := 1 + rng.IntN(3)
					d, r, _ := k.Take(ctx, "hot", n)
					if !d.Allowed {
						continue
					}
					taken.Add(int64(n))
					if rng.IntN(2) == 0 {
						if ok, _ := k.Refund(ctx, "hot", n, r); ok {
							refunded.Add(int64(n))
						}
					}
				}
				return struct{}{}
			})
			net := taken.Load() - refunded.Load()
			require.LessOrEqual(t, net, int64(quota))
			require.Equal(t, quota-int(net), peek(k, "hot", 0).Remaining, "the state counts exactly the admissions not given back")
			require.Positive(t, refunded.Load())
		})
	}
}

// Take and Refund allocate nothing on a key already held.
func TestKeyedTakeRefundAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	for _, c := range takeRules {
		k, err := atomiclimit.NewKeyedRule[string](c.rule, atomiclimit.WithSweepInterval(0))
		require.NoError(t, err)
		k.Allow("k")
		allocs := testing.AllocsPerRun(200, func() {
			_, r, _ := k.Take(ctx, "k", 1)
			k.Refund(ctx, "k", 1, r)
		})
		require.Zero(t, allocs, c.name)
	}
}

// An anchored window's refund of the admission that opened its window,
// after a later admission, moves the window to the refund's time: left in
// place, AnchoredWindow(2, 1m) with admissions at 0s and 59s, the first
// refunded, would admit two more at 60s. The same refund with nothing after
// it closes the window; of an admission that did not open the window, it
// gives back its count.
func TestAnchoredRefundOfTheOpener(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	k, err := atomiclimit.NewKeyedRule[string](atomiclimit.AnchoredWindow(2, time.Minute), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	_, first, _ := k.Take(ctx, "k", 1)
	clk.Advance(59 * time.Second)
	_, _, _ = k.Take(ctx, "k", 1)
	ok, _ := k.Refund(ctx, "k", 1, first)
	require.True(t, ok, "the opener, with an admission after it")
	clk.Advance(time.Second)
	admitted := 0
	for range 4 {
		if d, _, _ := k.Take(ctx, "k", 1); d.Allowed {
			admitted++
		}
	}
	require.Equal(t, 1, admitted, "the window opened at 59s holds one more, and no new window at 60s")
	clk.Advance(59 * time.Second)
	require.True(t, peek(k, "k", 2).Allowed, "a new window at 119s")

	_, opener, _ := k.Take(ctx, "fresh", 1)
	ok, _ = k.Refund(ctx, "fresh", 1, opener)
	require.True(t, ok, "the opener with nothing after it: the window closes")
	_, _, _ = k.Take(ctx, "mid", 1)
	_, second, _ := k.Take(ctx, "mid", 1)
	ok, _ = k.Refund(ctx, "mid", 1, second)
	require.True(t, ok, "not the opener: the anchor stays right")
}

// takeInto (TakeQuota in export_test.go), which a Stack decides a *Keyed
// policy with, decides as Take does and reports the quota Quota reports,
// for every rule, on a new key, a held one, a key with its own rule and a
// denial (issue 25: a door reads the quota from the decision's lookup).
func TestKeyedTakeQuota(t *testing.T) {
	ctx := context.Background()
	for _, c := range takeRules {
		t.Run("algo="+c.name, func(t *testing.T) {
			a, err := atomiclimit.NewKeyedRule[string](c.rule, atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			b, err := atomiclimit.NewKeyedRule[string](c.rule, atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			if c.name == "gcra" { // a key on a rule of its own: the tiered path
				for _, k := range []*atomiclimit.Keyed[string]{a, b} {
					require.NoError(t, k.SetKeyRule("own", atomiclimit.GCRA(gcra.Every(time.Hour), 2)))
				}
			}
			for i := range 6 {
				for _, key := range []string{"k", "own"} {
					n := 1
					if i == 2 {
						n = 0 // a peek: admitted, no receipt
					}
					d, r, q, err := a.TakeQuota(ctx, key, n)
					wd, wr, werr := b.Take(ctx, key, n)
					if d.Allowed != wd.Allowed || d.Remaining != wd.Remaining || (err == nil) != (werr == nil) {
						t.Fatalf("call %d, %s: TakeQuota %+v %v, Take %+v %v", i, key, d, err, wd, werr)
					}
					if (r == atomiclimit.Receipt{}) != (wr == atomiclimit.Receipt{}) {
						t.Fatalf("call %d, %s: TakeQuota's receipt %+v, Take's %+v: one is zero", i, key, r, wr)
					}
					if want := a.Quota(key); q != want {
						t.Fatalf("call %d, %s: TakeQuota's quota %+v, Quota %+v", i, key, q, want)
					}
				}
			}
		})
	}
}
