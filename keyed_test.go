package atomiclimit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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

// An admission as the race test records it: the request's time (ns since
// the limiter's epoch), its n, and the decision's ResetAfter, from which the
// window an admission was counted in can be read back (a stale time is
// counted in the window the state already holds, so the request's own time
// does not say).
type admission struct {
	at, n, reset int64
}

// raceCase is one algorithm under TestKeyedEvictionRace: its rule, how many
// tokens a request takes (the log takes one), and the bound every key's
// admissions must keep.
type raceCase struct {
	name  string
	rule  atomiclimit.Rule
	maxN  int
	check func(t *testing.T, key string, adm []admission)
}

// TestKeyedEvictionRace hammers four keys from many goroutines while another
// goroutine sweeps idle keys without pause, and every worker sweeps too every
// eighth step, so that removals land between any load of a state and its
// CompareAndSwap. Time is a fake clock that the workers advance in random
// jumps, some shorter and some longer than the time a key takes to become
// idle, so keys keep going idle and being removed while in use. It runs for
// every algorithm, and for bands, each against its exact bound per key:
//
//   - GCRA, over every window of request times: tokens admitted with times
//     in [t1, t2] ≤ B + (t2 − t1)/T. It holds for any arrival order, stale
//     times included (each admission raises TAT by n·T from at least t1, and
//     none leaves it beyond t2 + B·T), and eviction must preserve it: a state
//     removed at TAT ≤ floor is replaced by one that starts at floor.
//   - The fixed window and the sliding counter: at most N counted in any one
//     fixed window, the window read back from ResetAfter.
//   - The sliding log, over request times: at most N in any (t − W, t].
//   - Bands of GCRA and a log: both bounds at once.
//
// A lost admission, or a second full quota granted on a fresh state while
// the old one still admits, breaks them. At full length (go test without
// -race or -short, as CI runs it) the cases make 2.6·10^7 decisions.
func TestKeyedEvictionRace(t *testing.T) {
	const interval = time.Millisecond
	T := int64(interval)
	cases := []raceCase{
		{"gcra", atomiclimit.GCRA(gcra.Every(interval), 5), 2, func(t *testing.T, key string, adm []admission) {
			checkGCRA(t, key, adm, 5, T)
		}},
		{"fixed", atomiclimit.FixedWindow(5, 5*interval), 2, func(t *testing.T, key string, adm []admission) {
			checkWindows(t, key, adm, 5, 0)
		}},
		{"counter", atomiclimit.SlidingCounter(5, 5*interval), 2, func(t *testing.T, key string, adm []admission) {
			checkWindows(t, key, adm, 5, 5*T) // ResetAfter runs to the end of the next window
		}},
		{"log", atomiclimit.SlidingLog(5, 5*interval), 1, func(t *testing.T, key string, adm []admission) {
			checkLog(t, key, adm, 5, 5*T)
		}},
		{"anchored", atomiclimit.AnchoredWindow(5, 5*interval), 2, func(t *testing.T, key string, adm []admission) {
			checkWindows(t, key, adm, 5, 0) // ResetAfter runs to the end of the key's window
			checkAnchored(t, key, adm, 5*T)
		}},
		{"rolling", atomiclimit.Rolling(8, 5*interval, interval, 3), 2, func(t *testing.T, key string, adm []admission) {
			checkRolling(t, key, adm, 8, 3, 5, T)
		}},
		{"bands", atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(interval), 5), atomiclimit.SlidingLog(4, 3*interval)), 1, func(t *testing.T, key string, adm []admission) {
			checkGCRA(t, key, adm, 5, T)
			checkLog(t, key, adm, 4, 3*T)
		}},
	}
	for _, c := range cases {
		t.Run("algo="+c.name, func(t *testing.T) {
			decisions := int64(10_000_000)
			if c.name != "gcra" {
				decisions = 4_000_000
			}
			if raceEnabled || testing.Short() {
				decisions /= 25
			}
			evictionRace(t, c, decisions)
		})
	}
}

func evictionRace(t *testing.T, c raceCase, decisions int64) {
	const (
		keys     = 4
		workers  = 8
		jumpEach = 48 // decisions per worker between clock jumps
	)
	clk := newFakeClock()
	k, err := atomiclimit.NewKeyedRule[string](c.rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0), atomiclimit.WithShards(2))
	require.NoError(t, err)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("key-%d", i)
	}
	admitted := make([][keys][]admission, workers)
	var done atomic.Bool
	var made, sweeps, swept atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for i := 0; made.Add(1) <= decisions; i++ {
				if i%jumpEach == 0 {
					// 0.2 ms … 12 ms: every rule here is idle 5 ms after its
					// last admission (10 ms for the counter).
					clk.Advance(time.Duration(200_000 + rng.Int64N(int64(12*time.Millisecond))))
				}
				if i%8 == 0 {
					swept.Add(int64(k.SweepAt(clk.Now()))) // workers sweep too: removals between any two steps
					sweeps.Add(1)
				}
				key := rng.IntN(keys)
				n := 1 + rng.IntN(c.maxN)
				now := clk.Now()
				if i%16 == 5 {
					// A stale time, as from a caller preempted between reading
					// the clock and deciding: up to 6 ms back, across windows
					// and past the removal of the state it would have met.
					now = now.Add(-time.Duration(rng.Int64N(int64(6 * time.Millisecond))))
				}
				var ok bool
				var reset time.Duration
				if i%2 == 0 {
					ok = k.AllowN(names[key], now, n)
					if ok {
						reset = -1 // unknown: only the request-time checks use it
					}
				} else {
					d := decideN(k, names[key], now, n) // the other retry path
					ok, reset = d.Allowed, d.ResetAfter
				}
				if ok {
					admitted[w][key] = append(admitted[w][key], admission{k.Nanos(now), int64(n), int64(reset)})
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			swept.Add(int64(k.SweepAt(clk.Now())))
			sweeps.Add(1)
		}
	}()
	// Wait for the workers (all but the sweeper), then stop the sweeper.
	for made.Load() <= decisions+workers-1 {
		time.Sleep(time.Millisecond) // polling for completion, not synchronising
	}
	done.Store(true)
	wg.Wait()

	for key := range keys {
		var all []admission
		for w := range workers {
			all = append(all, admitted[w][key]...)
		}
		c.check(t, names[key], all)
	}
	st := k.Stats()
	// Evicted counts retirements; swept the removals the sweeps finished
	// themselves (a caller that meets a retired state may remove it first).
	require.GreaterOrEqual(t, st.Evicted, uint64(swept.Load()))
	require.Equal(t, st.Created-st.Evicted, uint64(st.Keys))
	t.Logf("%d decisions; %d sweeps; %d states retired (%d removed by their sweep, the rest by callers that met them retired); %d created",
		decisions, sweeps.Load(), st.Evicted, swept.Load(), st.Created)
	// How many of those removals met a key in use depends on the
	// interleaving (with every worker on a core of its own, keys are idle
	// less often): the count is logged, not hoped for. What is guaranteed
	// is checked: an idle phase removes every key, and each comes back.
	clk.Advance(time.Second)
	require.Equal(t, st.Keys, k.SweepAt(clk.Now()), "every key idle after a second")
	for _, name := range names {
		require.True(t, k.AllowN(name, clk.Now(), 1), "%s comes back", name)
	}
}

// checkGCRA asserts B + (t2 − t1)/T over every window of request times.
func checkGCRA(t *testing.T, key string, adm []admission, burst, T int64) {
	t.Helper()
	perTime := map[int64]int64{}
	for _, a := range adm {
		perTime[a.at] += a.n
	}
	times := make([]int64, 0, len(perTime))
	for at := range perTime {
		times = append(times, at)
	}
	slices.Sort(times)
	// With C(t) the tokens admitted at times ≤ t, the bound for all t1 ≤ t2
	// is C(t2)·T − t2 ≤ B·T + C(t1−)·T − t1, C(t1−) counting times < t1. One
	// pass keeps the smallest right-hand side so far.
	var cum int64
	best := int64(1<<62 - 1) // min over t1 of C(t1−)·T − t1
	for _, at := range times {
		best = min(best, cum*T-at)
		cum += perTime[at]
		if lhs := cum*T - at; lhs-best > burst*T {
			t.Fatalf("%s: over-admission: a window ending at %v holds %.3f tokens more than B + Δ/T allows",
				key, time.Duration(at), float64(lhs-best-burst*T)/float64(T))
		}
	}
	t.Logf("%s: %d tokens at %d distinct times, within B + Δ/T in every window", key, cum, len(times))
}

// checkWindows asserts at most n counted in any one fixed window. The
// window an admission was counted in ends at at + reset − extra (reset is
// ResetAfter; extra is how far past that window's end ResetAfter reaches).
// Admissions made through AllowN carry no ResetAfter and are left out: the
// bound over those that carry one is still exact for them, and every other
// admission can only add to a window, never take a counted one away.
func checkWindows(t *testing.T, key string, adm []admission, n, extra int64) {
	t.Helper()
	perWindow := map[int64]int64{}
	counted := 0
	for _, a := range adm {
		if a.reset < 0 {
			continue
		}
		perWindow[a.at+a.reset-extra] += a.n
		counted++
	}
	for end, c := range perWindow {
		if c > n {
			t.Fatalf("%s: %d counted in the window ending at %v, more than %d", key, c, time.Duration(end), n)
		}
	}
	require.NotZero(t, counted, "%s: no admission carried its window", key)
	t.Logf("%s: %d admissions in %d windows, each within %d", key, counted, len(perWindow), n)
}

// checkAnchored asserts that a key's anchored windows never overlap: a
// window opens only once the one before it has ended, so their ends (read
// back from ResetAfter) are at least a window apart. An overlap is a second
// full quota inside one window.
func checkAnchored(t *testing.T, key string, adm []admission, w int64) {
	t.Helper()
	var ends []int64
	for _, a := range adm {
		if a.reset >= 0 {
			ends = append(ends, a.at+a.reset)
		}
	}
	slices.Sort(ends)
	ends = slices.Compact(ends)
	for i := 1; i < len(ends); i++ {
		if ends[i]-ends[i-1] < w {
			t.Fatalf("%s: windows ending at %v and %v overlap", key, time.Duration(ends[i-1]), time.Duration(ends[i]))
		}
	}
}

// checkRolling asserts at most q counted in any run of k aligned slices of
// length p, and at most c in any one slice. An admission is counted in the
// head's slice, the latest counted one, and ResetAfter runs until that slice
// leaves the window, k slices after it starts: so the slice ends at
// at + ResetAfter − (k−1)·p. AllowN admissions carry no ResetAfter and are
// left out.
func checkRolling(t *testing.T, key string, adm []admission, q, c, k, p int64) {
	t.Helper()
	perSlice := map[int64]int64{} // slice index → count
	for _, a := range adm {
		if a.reset < 0 {
			continue
		}
		end := a.at + a.reset - (k-1)*p
		perSlice[end/p-1] += a.n
	}
	require.NotEmpty(t, perSlice, "%s: no admission carried its slice", key)
	var slices []int64
	for s, n := range perSlice {
		if n > c {
			t.Fatalf("%s: %d counted in slice %d, more than %d", key, n, s, c)
		}
		slices = append(slices, s)
	}
	for _, s := range slices {
		var sum int64
		for j := s; j < s+k; j++ {
			sum += perSlice[j]
		}
		if sum > q {
			t.Fatalf("%s: %d counted in slices %d…%d, more than %d", key, sum, s, s+k-1, q)
		}
	}
	t.Logf("%s: %d slices, each within %d, every run of %d within %d", key, len(perSlice), c, k, q)
}

// checkLog asserts at most n admissions with request times in any (t − w, t].
func checkLog(t *testing.T, key string, adm []admission, n int, w int64) {
	t.Helper()
	times := make([]int64, 0, len(adm))
	for _, a := range adm {
		for range a.n {
			times = append(times, a.at)
		}
	}
	slices.Sort(times)
	for i := n; i < len(times); i++ {
		// times[i−n] … times[i] are n+1 admissions: they must span at least w.
		if times[i]-times[i-n] < w {
			t.Fatalf("%s: %d admissions within %v, from %v to %v", key, n+1, time.Duration(w), time.Duration(times[i-n]), time.Duration(times[i]))
		}
	}
	t.Logf("%s: %d admissions, at most %d in every rolling %v", key, len(times), n, time.Duration(w))
}

// The keyed forms of the window algorithms (fixed window, aligned to the
// limiter or to UTC; sliding counter; sliding log), as atomiclimit.Keyed of their
// rules, against atomiclimit.Limiter twins of the same rules.

// windowT0 is a UTC midnight, so that UTC-aligned boundaries fall on round
// offsets.
var windowT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newWindowClock is a fakeClock at windowT0.
func newWindowClock() *fakeClock { return &fakeClock{base: windowT0} }

// windowAlgo is one window rule, built as a keyed limiter and as a
// single-key one.
type windowAlgo struct {
	name   string
	limit  int
	period time.Duration
	rule   atomiclimit.Rule
}

func (a windowAlgo) keyed(t testing.TB, opts ...atomiclimit.Option) *atomiclimit.Keyed[int] {
	t.Helper()
	k, err := atomiclimit.NewKeyedRule[int](a.rule, opts...)
	require.NoError(t, err)
	t.Cleanup(k.Close)
	return k
}

func (a windowAlgo) single(t testing.TB, opts ...atomiclimit.Option) *atomiclimit.Limiter {
	t.Helper()
	l, err := atomiclimit.NewRule(a.rule, opts...)
	require.NoError(t, err)
	return l
}

func windowAlgos() []windowAlgo {
	const n, w = 4, 100 * time.Millisecond
	return []windowAlgo{
		{"fixed", n, w, atomiclimit.FixedWindow(n, w)},
		{"fixed-utc", n, w, atomiclimit.FixedWindowUTC(n, w, 30*time.Millisecond)},
		{"counter", n, w, atomiclimit.SlidingCounter(n, w)},
		{"log", n, w, atomiclimit.SlidingLog(n, w)},
	}
}

// A keyed limiter decides every key exactly as a single-key limiter of the
// same rule would, whether it keeps its keys or sweeps them after every
// step: a removed key is idle, so its fresh cell decides as the old one
// would have. Every field of every decision and peek is compared, on random
// sequences whose times never go back.
func TestKeyedWindowMatchesSingleKey(t *testing.T) {
	for _, a := range windowAlgos() {
		t.Run(a.name, func(t *testing.T) {
			evicted := uint64(0)
			for seed := range uint64(40) {
				rng := rand.New(rand.NewPCG(seed, 5))
				clk := newWindowClock()
				kept := a.keyed(t, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
				swept := a.keyed(t, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
				const keys = 5
				singles := make([]*atomiclimit.Limiter, keys)
				for i := range singles {
					singles[i] = a.single(t, atomiclimit.WithClock(clk))
				}
				for step := range 300 {
					clk.Advance(time.Duration(rng.Int64N(int64(a.period) * 3 / 4)))
					now := clk.Now()
					key, n := rng.IntN(keys), rng.IntN(a.limit+2)
					if a.name == "log" {
						n = rng.IntN(3)
					}
					what := fmt.Sprintf("seed %d step %d key %d n %d", seed, step, key, n)
					peek := singles[key].PeekN(now, n)
					require.Equal(t, peek, kept.PeekN(key, now, n), "peek kept: "+what)
					require.Equal(t, peek, swept.PeekN(key, now, n), "peek swept: "+what)
					want := singles[key].TakeN(now, n)
					require.Equal(t, want, decideN(kept, key, now, n), "kept: "+what)
					require.Equal(t, want, decideN(swept, key, now, n), "swept: "+what)
					swept.SweepAt(now)
				}
				evicted += swept.Stats().Evicted
				require.Zero(t, kept.Stats().Evicted)
			}
			require.Positive(t, evicted, "the swept limiter must really remove keys")
		})
	}
}

// After a key is removed, a request with a stale time (read before the
// sweep) is decided under the floor: for the fixed window, in the window
// after the one the removed cell counted, so that window never holds more
// than N; for the log, not before the removed ring's latest expiry.
func TestKeyedWindowStaleTimeAfterEviction(t *testing.T) {
	clk := newWindowClock()
	f, err := atomiclimit.NewKeyedRule[string](atomiclimit.FixedWindow(2, time.Second), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	at := func(d time.Duration) time.Time { return clk.At(d) }
	require.True(t, f.AllowN("a", at(500*time.Millisecond), 2)) // window 0 full
	clk.Set(1200 * time.Millisecond)                            // a sweep never looks past the clock
	require.Equal(t, 1, f.SweepAt(at(1200*time.Millisecond)))
	d := decideN(f, "a", at(900*time.Millisecond), 1) // stale: window 0
	require.True(t, d.Allowed)
	assert.Equal(t, 1100*time.Millisecond, d.ResetAfter, "counted in window 1, which ends at 2s")
	assert.Equal(t, 1, d.Remaining)
	assert.True(t, f.AllowN("a", at(1500*time.Millisecond), 1))
	assert.False(t, f.AllowN("a", at(1600*time.Millisecond), 1), "window 1 holds 2")

	clk.Set(0) // the log's epoch: windowT0, as the fixed window's
	l, err := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingLog(1, time.Second), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	require.True(t, l.AllowN("a", at(500*time.Millisecond), 1)) // expires at 1.5s
	clk.Set(1400 * time.Millisecond)
	require.Equal(t, 0, l.SweepAt(at(1400*time.Millisecond)), "not idle before 1.5s")
	clk.Set(1500 * time.Millisecond)
	require.Equal(t, 1, l.SweepAt(at(1500*time.Millisecond)))
	d = decideN(l, "a", at(1100*time.Millisecond), 1) // stale
	require.False(t, d.Allowed, "a stale request must not find an empty ring")
	assert.Equal(t, 400*time.Millisecond, d.RetryAfter)
	pk := l.PeekN("b", at(1100*time.Millisecond), 1)
	assert.False(t, pk.Allowed, "a new key starts at the floor too")
	assert.True(t, l.AllowN("a", at(1500*time.Millisecond), 1))
}

// A cell the sweeper retired but has not yet removed is replaced by the
// caller that meets it.
func TestKeyedWindowRetiredCellIsReplaced(t *testing.T) {
	for _, a := range windowAlgos() {
		t.Run(a.name, func(t *testing.T) {
			clk := newWindowClock()
			k := a.keyed(t, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.True(t, k.AllowN(1, clk.Now(), 1))
			clk.Advance(3 * a.period) // idle
			require.True(t, k.RetireKey(1, k.Nanos(clk.Now())), "retired without removing")
			require.Equal(t, 1, k.Stats().Keys, "retired, still held")
			assert.True(t, k.PeekN(1, clk.Now(), 1).Allowed, "peek answers as for a new cell")
			assert.True(t, k.AllowN(1, clk.Now(), 1))
			assert.True(t, decideN(k, 1, clk.Now(), 1).Allowed)
			st := k.Stats()
			assert.Equal(t, uint64(2), st.Created)
			assert.Equal(t, 1, k.Stats().Keys)
		})
	}
}

// A key bound holds exactly, and each policy does what it says.
func TestKeyedWindowMaxKeys(t *testing.T) {
	for _, a := range windowAlgos() {
		t.Run(a.name, func(t *testing.T) {
			clk := newWindowClock()
			k := a.keyed(t, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(3, atomiclimit.RejectNew))
			for key := range 3 {
				require.True(t, k.AllowN(key, clk.Now(), 1))
			}
			d := decideN(k, 9, clk.Now(), 1)
			assert.False(t, d.Allowed, "full, nothing idle")
			assert.Positive(t, d.RetryAfter)
			assert.Equal(t, uint64(1), k.Stats().Rejected)
			clk.Advance(3 * a.period) // every key idle: room is made
			assert.True(t, k.AllowN(9, clk.Now(), 1))
			assert.LessOrEqual(t, k.Stats().Keys, 3, "a sweep removes every idle key of a shard")

			e := a.keyed(t, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(3, atomiclimit.EvictStalest))
			for key := range 3 {
				require.True(t, e.AllowN(key, clk.Now(), 1))
			}
			assert.True(t, e.AllowN(9, clk.Now(), 1), "the stalest active key makes room")
			assert.Equal(t, 3, e.Stats().Keys)
			assert.Equal(t, uint64(1), e.Stats().EvictedActive)
		})
	}
}

func TestKeyedWindowOptions(t *testing.T) {
	_, err := atomiclimit.NewRule(atomiclimit.FixedWindow(1, time.Second), atomiclimit.WithMaxKeys(3, atomiclimit.RejectNew))
	assert.ErrorIs(t, err, atomiclimit.ErrOption)
	_, err = atomiclimit.NewRule(atomiclimit.SlidingLog(1, time.Second), atomiclimit.WithSweepInterval(time.Second))
	assert.ErrorIs(t, err, atomiclimit.ErrOption)
	_, err = atomiclimit.NewKeyedRule[int](atomiclimit.FixedWindow(1, time.Second), atomiclimit.WithMaxKeys(-1, atomiclimit.RejectNew))
	assert.ErrorIs(t, err, atomiclimit.ErrOption)
	_, err = atomiclimit.NewKeyedRule[int](atomiclimit.SlidingLog(0, time.Second))
	assert.ErrorIs(t, err, gcra.ErrInvalidLimit)

	// The background sweeper removes idle keys, and Close stops it.
	k, err := atomiclimit.NewKeyedRule[int](atomiclimit.FixedWindow(1, time.Millisecond), atomiclimit.WithSweepInterval(time.Millisecond), atomiclimit.WithShards(1))
	require.NoError(t, err)
	require.True(t, k.Allow(1))
	require.Eventually(t, func() bool { return k.Stats().Keys == 0 }, 5*time.Second, time.Millisecond)
	k.Close()
	k.Close()
}

// Only the constructors make a Rule (its parameters are unexported), so a
// sliding counter or a log can no longer be asked for a UTC alignment it
// would silently drop (the old window package refused WithAlign on them with
// ErrOption). What is left to refuse is the zero Rule.
func TestKeyedWindowZeroRuleRefused(t *testing.T) {
	var zero atomiclimit.Rule
	_, err := atomiclimit.NewRule(zero)
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule, "single-key")
	_, err = atomiclimit.NewKeyedRule[int](zero, atomiclimit.WithSweepInterval(0))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule, "keyed")
	_, err = atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.SlidingCounter(1, time.Second), zero))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule, "a zero band")
}

// Decisions on keys already present allocate nothing.
func TestKeyedWindowAllocatesNothing(t *testing.T) {
	clk := newWindowClock()
	f, err := atomiclimit.NewKeyedRule[string](atomiclimit.FixedWindow(1<<20, time.Hour), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	c, err := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingCounter(1<<10, time.Hour), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	l, err := atomiclimit.NewKeyedRule[uint64](atomiclimit.SlidingLog(8, time.Hour), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	now := clk.Now()
	f.Allow("k")
	c.Allow("k")
	l.Allow(7)
	for name, fn := range map[string]func(){
		"fixed/allow":    func() { f.Allow("k") },
		"fixed/decide":   func() { decide(f, "k", 1) },
		"fixed/peek":     func() { peek(f, "k", 1) },
		"counter/allowN": func() { c.AllowN("k", now, 1) }, // admits, then denies
		"counter/decide": func() { decideN(c, "k", now, 1) },
		"log/allow":      func() { l.Allow(7) }, // 8 admissions, then denials
		"log/decide":     func() { decide(l, 7, 1) },
		"log/peek":       func() { peek(l, 7, 1) },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, fn), name)
	}
}

// windowAdmission is one admitted call: the now it passed, its size, and
// the end of the window it was counted in (now + ResetAfter).
type windowAdmission struct {
	now     time.Duration
	n       int
	counted int64
}

// windowPerCall is how many calls each goroutine makes in the stale-now
// tests.
func windowPerCall() int {
	if raceEnabled {
		return 1500
	}
	return 20000
}

// Many goroutines on a few keys, with the clock jumping, stale times, and a
// sweep on every few steps (each evicting what is idle), never exceed any
// key's bound: the fixed window and the counter at most N in each window
// they count in, the log at most N in any rolling window of request times.
// Eviction loses nothing: a removed cell's counts stay covered by the floor.
//
// Whether a sweep in a round finds a key idle depends on the interleaving
// (with 16 cores truly in parallel the keys are seldom idle); so the
// rounds are separated by a forced idle phase (every goroutine stopped, the
// clock three windows on) whose sweep must remove every key, and the next
// round starts them again from the floors.
func TestKeyedWindowEvictionRace(t *testing.T) {
	for _, a := range windowAlgos() {
		t.Run(a.name, func(t *testing.T) {
			clk := newWindowClock()
			k := a.keyed(t, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			const keys, rounds = 3, 4
			var mu sync.Mutex
			got := make([][]windowAdmission, keys)
			var sweeps atomic.Int64
			steps := windowPerCall() / 2 / rounds
			for round := range rounds {
				hammerEach(func(g int) int {
					rng := rand.New(rand.NewPCG(uint64(g), uint64(9+round)))
					for i := range steps {
						// Every call moves the clock; a caller that yields before
						// deciding passes a stale now.
						now := windowT0.Add(clk.Advance(time.Duration(rng.Int64N(int64(a.period) / 8))))
						if rng.IntN(3) == 0 {
							runtime.Gosched() // decide with a stale now
						}
						key, n := rng.IntN(keys), 1+rng.IntN(2)
						if a.name == "log" {
							n = 1
						}
						d := decideN(k, key, now, n)
						if d.Allowed {
							mu.Lock()
							got[key] = append(got[key], windowAdmission{now: now.Sub(windowT0), n: n, counted: int64(now.Sub(windowT0) + d.ResetAfter)})
							mu.Unlock()
						}
						if i%4 == 0 {
							sweeps.Add(1)
							k.SweepAt(clk.Now())
						}
					}
					return 0
				})
				// The idle phase: nothing admitted for three windows.
				held := k.Stats().Keys
				require.Positive(t, held, "round %d admitted nothing", round)
				clk.Advance(3 * a.period)
				require.Equal(t, held, k.SweepAt(clk.Now()), "round %d: every key idle", round)
				require.Zero(t, k.Stats().Keys)
			}
			st := k.Stats()
			t.Logf("%d sweeps, %d cells evicted, %d created", sweeps.Load(), st.Evicted, st.Created)
			for key, adm := range got {
				checkWindowKeyBound(t, a, key, adm)
			}
		})
	}
}

// checkWindowKeyBound checks one key's admissions against its algorithm's
// bound.
func checkWindowKeyBound(t *testing.T, a windowAlgo, key int, adm []windowAdmission) {
	t.Helper()
	if a.name == "log" {
		ts := make([]int64, len(adm))
		for i, x := range adm {
			ts[i] = int64(x.now)
		}
		slices.Sort(ts)
		require.LessOrEqual(t, windowMaxIn(ts, int64(a.period)), a.limit, "key %d: a rolling window holds more than N", key)
		return
	}
	// The window a decision counted in, from its ResetAfter: the window's
	// end for the fixed window, the end of the window after it for the
	// counter (counted is now + ResetAfter).
	per := map[int64]int{}
	for _, x := range adm {
		per[x.counted] += x.n
	}
	for end, c := range per {
		require.LessOrEqual(t, c, a.limit, "key %d: the window ending %v counted %d", key, time.Duration(end), c)
	}
}

// windowMaxIn returns the largest number of the sorted times ts that lie in
// one rolling window (t − w, t], over every t.
func windowMaxIn(ts []int64, w int64) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[lo] <= ts[hi]-w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}
