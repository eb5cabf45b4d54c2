package atomiclimit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

func newKeyed[K comparable](t testing.TB, l gcra.Limit, burst int, opts ...atomiclimit.Option) *atomiclimit.Keyed[K] {
	t.Helper()
	k, err := atomiclimit.NewKeyedRule[K](atomiclimit.GCRA(l, burst), opts...)
	require.NoError(t, err)
	t.Cleanup(k.Close)
	return k
}

// Each key of a Keyed limiter behaves as its own Limiter: the same random
// sequence of requests (keys, times, n) goes to a Keyed limiter that keeps
// every key, to one that sweeps idle keys after every step, and to one
// single-key Limiter per key. Every decision must be identical, field for
// field, while the sweeping limiter really does remove keys.
func TestKeyedMatchesPerKeyLimiters(t *testing.T) {
	const burst = 4
	interval := 10 * time.Millisecond
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, 7))
		clk := newFakeClock()
		keep := newKeyed[string](t, gcra.Every(interval), burst, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
		sweep := newKeyed[string](t, gcra.Every(interval), burst, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
			atomiclimit.WithShards(int(seed%4)+1))
		single := map[string]*atomiclimit.Limiter{}
		for step := range 300 {
			clk.Advance(randDuration(rng, 3*interval))
			now := clk.Now()
			key := fmt.Sprintf("k%d", rng.IntN(5))
			n := rng.IntN(burst+1) + rng.IntN(2) // 0 … burst+1: invalid n included
			ref, ok := single[key]
			if !ok {
				ref = newLimiter(t, gcra.Every(interval), burst, atomiclimit.WithClock(clk))
				single[key] = ref
			}
			if got, want := sweep.PeekN(key, now, n), ref.PeekN(now, n); got != want {
				t.Fatalf("seed %d step %d: sweep: Peek(%s, %d) = %+v, want %+v", seed, step, key, n, got, want)
			}
			want := ref.TakeN(now, n)
			if got := decideN(keep, key, now, n); got != want {
				t.Fatalf("seed %d step %d: keep: Decide(%s, %d) = %+v, want %+v", seed, step, key, n, got, want)
			}
			if got := decideN(sweep, key, now, n); got != want {
				t.Fatalf("seed %d step %d: sweep: Decide(%s, %d) = %+v, want %+v", seed, step, key, n, got, want)
			}
			if got, want := sweep.PeekN(key, now, 0).Remaining, ref.PeekN(now, 0).Remaining; got != want {
				t.Fatalf("seed %d step %d: Tokens(%s) = %d, want %d", seed, step, key, got, want)
			}
			sweep.SweepAt(clk.Now())
		}
		st := sweep.Stats()
		require.Greater(t, st.Evicted, uint64(30), "seed %d: the sweeping limiter must really remove keys", seed)
		require.Equal(t, st.Created-st.Evicted, uint64(st.Keys), "seed %d: created − evicted = held", seed)
		require.Zero(t, keep.Stats().Evicted)
	}
}

// A request whose time is older than the sweep that removed its key (a stale
// now) is decided on the new cell from the floor: never more permissive than
// if the key had been kept.
func TestKeyedStaleNowAfterEviction(t *testing.T) {
	clk := newFakeClock()
	opts := []atomiclimit.Option{atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0)}
	keep := newKeyed[string](t, gcra.Every(10*time.Millisecond), 3, opts...)
	sweep := newKeyed[string](t, gcra.Every(10*time.Millisecond), 3, opts...)
	t0 := clk.Now()
	for _, k := range []*atomiclimit.Keyed[string]{keep, sweep} {
		require.True(t, k.AllowN("a", t0, 3)) // TAT = 30ms
	}
	// At 40 ms the key is idle; sweep removes it (a sweep never looks past
	// the limiter's clock).
	clk.Set(40 * time.Millisecond)
	require.Equal(t, 1, sweep.SweepAt(t0.Add(40*time.Millisecond)))
	require.Equal(t, 0, sweep.Stats().Keys)
	// A request stamped 5 ms arrives late. Kept: TAT 30 ms, so at 5 ms the
	// bucket is 25 ms from full: denied, 5 ms to wait.
	stale := t0.Add(5 * time.Millisecond)
	d := decideN(keep, "a", stale, 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, 5*time.Millisecond, d.RetryAfter)
	// Swept: the new cell starts at the floor, the removed cell's TAT
	// (30 ms): the same decision. A fresh cell at TAT 0 would have admitted
	// all 3.
	require.Equal(t, int64(30*time.Millisecond), sweep.Floor())
	d = decideN(sweep, "a", stale, 1)
	assert.False(t, d.Allowed, "a stale request must not find a fresh full bucket: %+v", d)
	assert.Equal(t, 5*time.Millisecond, d.RetryAfter)
}

// A caller that meets a retired cell (the sweeper between its two steps)
// decides on a fresh cell, and the retired one leaves the map.
func TestKeyedRetiredCellIsReplaced(t *testing.T) {
	clk := newFakeClock()
	k := newKeyed[string](t, gcra.Every(time.Second), 2, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.True(t, k.Allow("a"))
	clk.Advance(time.Second) // idle again
	require.True(t, k.RetireKey("a", k.Nanos(clk.Now())))
	require.Equal(t, 1, k.Stats().Keys, "retired but not yet removed")
	for _, step := range []struct {
		name string
		call func() bool
	}{
		{"Allow", func() bool { return k.Allow("a") }},
		{"Decide", func() bool { return decide(k, "a", 1).Allowed }},
	} {
		require.True(t, step.call(), step.name)
	}
	require.False(t, k.Allow("a"), "burst 2 spent")
	require.Equal(t, 1, k.Stats().Keys)
	st := k.Stats()
	require.Equal(t, uint64(2), st.Created)
	require.Equal(t, uint64(1), st.Evicted)

	// Reserve meets a retired cell too.
	clk.Advance(2 * time.Second)
	require.True(t, k.RetireKey("a", k.Nanos(clk.Now())))
	r, err := k.Reserve("a")
	require.NoError(t, err)
	require.Zero(t, r.Delay())
	require.Equal(t, 1, peek(k, "a", 0).Remaining)
}

func TestKeyedOptions(t *testing.T) {
	_, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1, time.Second), 1), atomiclimit.WithMaxKeys(-1, atomiclimit.RejectNew))
	require.ErrorIs(t, err, atomiclimit.ErrOption)
	_, err = atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1, time.Second), 1), atomiclimit.WithMaxKeys(1, atomiclimit.FullPolicy(9)))
	require.ErrorIs(t, err, atomiclimit.ErrOption)
	for _, n := range []int{-1, 1<<16 + 1, math.MaxInt} {
		_, err = atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1, time.Second), 1), atomiclimit.WithShards(n))
		require.ErrorIs(t, err, atomiclimit.ErrOption, "WithShards(%d)", n)
	}
	// A key bound far above what fits in memory is a bound, not a table:
	// the map is presized for 2^22 keys at most.
	huge, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1, time.Second), 1), atomiclimit.WithMaxKeys(math.MaxInt, atomiclimit.RejectNew), atomiclimit.WithShards(1<<16))
	require.NoError(t, err)
	require.True(t, huge.Allow("a"))
	huge.Close()
	_, err = atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1, time.Second), 0))
	require.ErrorIs(t, err, gcra.ErrInvalidBurst)
	_, err = atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1000000, time.Second), 2), atomiclimit.WithCoarseClock())
	require.ErrorIs(t, err, atomiclimit.ErrOption)
	for _, o := range []atomiclimit.Option{
		atomiclimit.WithMaxKeys(5, atomiclimit.RejectNew),
		atomiclimit.WithSweepInterval(time.Second),
		atomiclimit.WithShards(4),
	} {
		_, err = atomiclimit.NewRule(atomiclimit.GCRA(gcra.Per(1, time.Second), 1), o)
		require.ErrorIs(t, err, atomiclimit.ErrOption)
		require.Contains(t, err.Error(), "atomiclimit: ")
	}
	k := newKeyed[int](t, gcra.Per(10, time.Second), 5)
	require.Equal(t, "10/s, burst 5", k.Quota(0).String)
	require.ErrorIs(t, k.SetRule(atomiclimit.GCRA(gcra.Per(-1, time.Second), 1)), gcra.ErrInvalidLimit)
	require.Equal(t, "10/s, burst 5", k.Quota(0).String, "a failed SetLimit changes nothing")
}

// RejectNew: a full limiter removes an idle key to admit a new one; with no
// idle key it refuses the new key and leaves every present key alone.
func TestKeyedMaxKeysRejectNew(t *testing.T) {
	clk := newFakeClock()
	interval := 100 * time.Millisecond
	k := newKeyed[string](t, gcra.Every(interval), 2, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
		atomiclimit.WithMaxKeys(3, atomiclimit.RejectNew))
	for _, key := range []string{"a", "b", "c"} {
		require.True(t, k.AllowN(key, clk.Now(), 2), key)
	}
	require.False(t, k.Allow("d"), "full, nothing idle: refuse the new key")
	d := decide(k, "d", 1)
	require.False(t, d.Allowed)
	require.Equal(t, 200*time.Millisecond, d.RetryAfter, "RetryAfter of a refused key is its tier's B·T")
	_, err := k.Reserve("d")
	require.ErrorIs(t, err, atomiclimit.ErrTooManyKeys)
	require.ErrorIs(t, k.Wait(context.Background(), "d"), atomiclimit.ErrTooManyKeys)
	st := k.Stats()
	require.Equal(t, uint64(4), st.Rejected)
	require.Equal(t, 3, st.Keys)
	require.Zero(t, st.Evicted)

	// "a" and "b" refill first: a is touched again later, so b is the one idle.
	clk.Advance(150 * time.Millisecond)
	require.True(t, k.Allow("a"))
	clk.Advance(100 * time.Millisecond) // b, c idle at 250 ms (TAT 200 ms); a's TAT 350 ms
	require.True(t, k.AllowN("d", clk.Now(), 2), "an idle key makes room")
	st = k.Stats()
	require.GreaterOrEqual(t, st.Evicted, uint64(1), "b or c, or both if they share the shard the scan reaches first")
	require.Equal(t, 4-int(st.Evicted), st.Keys)
	require.Zero(t, st.EvictedActive)
	require.Equal(t, 1, k.PeekN("a", clk.Now(), 0).Remaining, "a kept its state (TAT 300 ms at 250 ms); a fresh a would have 2")
}

// EvictStalest: with no idle key, the key with the smallest TAT goes, and is
// counted as an active eviction; idle keys still go first.
func TestKeyedMaxKeysEvictStalest(t *testing.T) {
	clk := newFakeClock()
	k := newKeyed[string](t, gcra.Every(time.Second), 3, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0),
		atomiclimit.WithMaxKeys(3, atomiclimit.EvictStalest), atomiclimit.WithShards(1))
	require.True(t, k.AllowN("a", clk.Now(), 3)) // TAT 3 s
	require.True(t, k.AllowN("b", clk.Now(), 1)) // TAT 1 s: the stalest
	require.True(t, k.AllowN("c", clk.Now(), 2)) // TAT 2 s
	require.True(t, k.Allow("d"))
	st := k.Stats()
	require.Equal(t, 3, st.Keys)
	require.Equal(t, uint64(1), st.EvictedActive)
	require.Equal(t, 3, peek(k, "b", 0).Remaining, "b was forgotten: a full bucket again")
	require.Equal(t, 0, peek(k, "a", 0).Remaining)
	require.Equal(t, 1, peek(k, "c", 0).Remaining)

	// At 2.5 s, c (TAT 2 s) and d (TAT 1 s) are idle; a (TAT 3 s) is not.
	clk.Advance(2500 * time.Millisecond)
	require.True(t, k.Allow("e"))
	st = k.Stats()
	require.Equal(t, uint64(1), st.EvictedActive, "idle keys go before an active one")
	require.Equal(t, uint64(2), st.Evicted, "the scan removes every idle key of its shard")
	require.Equal(t, 2, st.Keys)
	require.Equal(t, 2, peek(k, "a", 0).Remaining, "a kept its state: TAT 3 s at 2.5 s")
}

// Under contention on far more keys than the bound, the bound holds and the
// books balance: created − evicted − evicted active = held.
func TestKeyedMaxKeysConcurrent(t *testing.T) {
	for _, policy := range []atomiclimit.FullPolicy{atomiclimit.RejectNew, atomiclimit.EvictStalest} {
		t.Run(fmt.Sprintf("policy=%d", policy), func(t *testing.T) {
			const bound = 64
			k := newKeyed[int](t, gcra.Every(time.Millisecond), 3, atomiclimit.WithMaxKeys(bound, policy), atomiclimit.WithSweepInterval(0))
			hammer(func(g int) int64 {
				rng := rand.New(rand.NewPCG(uint64(g), 1))
				for range 3000 {
					k.Allow(rng.IntN(1000))
					if n := k.Stats().Keys; n > bound {
						t.Errorf("Len %d > bound %d", n, bound)
					}
				}
				return 0
			})
			st := k.Stats()
			require.LessOrEqual(t, st.Keys, bound)
			require.Equal(t, st.Keys, k.HeldKeys(), "the key count matches the map's entries")
			require.Equal(t, st.Created-st.Evicted-st.EvictedActive, uint64(st.Keys))
			if policy == atomiclimit.EvictStalest {
				require.Zero(t, st.Rejected)
			}
		})
	}
}

func TestKeyedTiers(t *testing.T) {
	clk := newFakeClock()
	k := newKeyed[string](t, gcra.Every(time.Second), 1, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	premium, err := k.NewTier(atomiclimit.GCRA(gcra.Every(time.Second), 5))
	require.NoError(t, err)
	_, err = k.NewTier(atomiclimit.GCRA(gcra.Every(0), 5))
	require.ErrorIs(t, err, gcra.ErrInvalidLimit)

	require.Equal(t, 1, peek(k, "old", 0).Remaining)
	require.True(t, k.Allow("old")) // created on the default tier
	k.SetTierFunc(func(key string) *atomiclimit.Tier {
		if key[0] == 'p' {
			return premium
		}
		return nil
	})
	require.Equal(t, 5, peek(k, "p1", 0).Remaining, "Tokens of an absent key uses the tier it would get")
	require.Equal(t, "1/s, burst 5", k.Quota("p1").String, "the tier's rule")
	require.Equal(t, 5, drainKey(k, "p1", clk.Now()))
	require.Equal(t, 1, drainKey(k, "free", clk.Now()))
	require.Equal(t, 0, drainKey(k, "old", clk.Now()), "present keys keep their tier")

	// Changing a tier changes it for its keys at once.
	clk.Advance(10 * time.Second)
	require.NoError(t, premium.SetRule(atomiclimit.GCRA(gcra.Every(time.Second), 2)))
	require.Equal(t, 2, drainKey(k, "p1", clk.Now()))
	require.NoError(t, k.SetRule(atomiclimit.GCRA(gcra.Every(time.Second), 3)))
	require.Equal(t, 3, drainKey(k, "free", clk.Now()))
	require.ErrorIs(t, premium.SetRule(atomiclimit.GCRA(gcra.Per(1, time.Second), 0)), gcra.ErrInvalidBurst)

	// A key's own limit, set while present, while absent, and after removal.
	clk.Advance(10 * time.Second)
	require.NoError(t, k.SetKeyRule("free", atomiclimit.GCRA(gcra.Every(time.Second), 7)))
	require.NoError(t, k.SetKeyRule("new", atomiclimit.GCRA(gcra.Every(time.Second), 6)))
	require.ErrorIs(t, k.SetKeyRule("x", atomiclimit.GCRA(gcra.Every(time.Second), 0)), gcra.ErrInvalidBurst)
	require.Equal(t, 7, drainKey(k, "free", clk.Now()))
	require.Equal(t, 6, drainKey(k, "new", clk.Now()))
	clk.Advance(10 * time.Second)
	require.Positive(t, k.Sweep())
	require.Equal(t, 0, k.Stats().Keys)
	require.Equal(t, 7, drainKey(k, "free", clk.Now()), "the override outlives the key's removal")
	k.ClearKeyRule("free")
	clk.Advance(10 * time.Second)
	require.Equal(t, 3, drainKey(k, "free", clk.Now()), "back on the default tier")
}

func drainKey[K comparable](k *atomiclimit.Keyed[K], key K, now time.Time) int {
	n := 0
	for k.AllowN(key, now, 1) {
		n++
	}
	return n
}

// Decisions on keys that are present allocate nothing, for string and
// integer keys, admitting and denying.
func TestKeyedAllocatesNothing(t *testing.T) {
	ks := newKeyed[string](t, gcra.Per(1000000, time.Second), 1000)
	ki := newKeyed[uint64](t, gcra.Every(time.Hour), 1)
	keys := []string{"alpha", "beta", "gamma-123456789"}
	for _, key := range keys {
		ks.Allow(key)
	}
	ki.Allow(42)
	now := time.Now()
	allocs := testing.AllocsPerRun(1000, func() {
		for _, key := range keys {
			ks.Allow(key)
			ks.AllowN(key, now, 1)
			decide(ks, key, 1)
			peek(ks, key, 1)
			peek(ks, key, 0)
		}
		ki.Allow(42) // denied
		decide(ki, 42, 1)
	})
	require.Zero(t, allocs)
}

func TestKeyedReserveAndWait(t *testing.T) {
	clk := newFakeClock()
	k := newKeyed[string](t, gcra.Every(100*time.Millisecond), 1, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	r1, err := k.Reserve("a")
	require.NoError(t, err)
	require.Zero(t, r1.Delay())
	r2, err := k.ReserveN("a", clk.Now(), 1)
	require.NoError(t, err)
	require.Equal(t, 100*time.Millisecond, r2.Delay())
	r2.Cancel()
	require.Equal(t, 100*time.Millisecond, peek(k, "a", 1).RetryAfter, "the cancelled reservation's token is back")
	_, err = k.ReserveN("a", clk.Now(), 2)
	require.ErrorIs(t, err, gcra.ErrExceedsBurst)

	// WaitN with a hand-fired timer: the wait is the reservation's delay.
	var asked time.Duration
	fire := make(chan time.Time, 1)
	timer := func(d time.Duration) (<-chan time.Time, func() bool) {
		asked = d
		fire <- time.Time{}
		return fire, func() bool { return true }
	}
	require.NoError(t, k.WaitNWithTimer(context.Background(), "a", 1, timer))
	require.Equal(t, 100*time.Millisecond, asked)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, k.Wait(ctx, "b"), context.Canceled)
	require.Equal(t, 1, peek(k, "b", 0).Remaining, "a cancelled context consumes nothing")
}

// The background sweeper removes idle keys by itself, Close stops it, and
// an abandoned limiter's sweeper stops once the limiter is collected.
func TestKeyedBackgroundSweeper(t *testing.T) {
	clk := newFakeClock()
	k := newKeyed[int](t, gcra.Every(time.Millisecond), 1, atomiclimit.WithClock(clk),
		atomiclimit.WithSweepInterval(16*time.Millisecond), atomiclimit.WithShards(4))
	for i := range 100 {
		k.Allow(i)
	}
	require.Equal(t, 100, k.Stats().Keys)
	clk.Advance(time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for k.Stats().Keys > 0 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	require.Zero(t, k.Stats().Keys, "the sweeper removed every idle key")
	require.Equal(t, uint64(100), k.Stats().Evicted)
	require.True(t, k.SweeperRunning())
	k.Close()
	k.Close()
	require.False(t, k.SweeperRunning())
	require.True(t, k.Allow(1), "a closed limiter keeps deciding")

	// Abandoned without Close.
	done := abandonKeyed(t)
	deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		runtime.GC()
		select {
		case <-done:
			return
		default:
			runtime.Gosched()
		}
	}
	t.Fatal("the sweeper of an unreachable limiter did not stop")
}

func abandonKeyed(t *testing.T) <-chan struct{} {
	k, err := atomiclimit.NewKeyedRule[int](atomiclimit.GCRA(gcra.Per(1, time.Second), 1), atomiclimit.WithSweepInterval(time.Hour))
	require.NoError(t, err)
	k.Allow(1)
	return k.SweeperDone()
}

func TestKeyedUnlimitedAndDenyAll(t *testing.T) {
	k := newKeyed[string](t, gcra.Unlimited, 0, atomiclimit.WithSweepInterval(0))
	for range 1000 {
		require.True(t, k.Allow("a"))
	}
	require.NoError(t, k.SetRule(atomiclimit.GCRA(gcra.DenyAll, 0)))
	require.False(t, k.Allow("a"))
	require.Equal(t, gcra.Never, decide(k, "a", 1).RetryAfter)
	require.False(t, errors.Is(nil, atomiclimit.ErrTooManyKeys))
}
