package window_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/window"
)

// deciderAt is what the keyed limiters and their single-key twins share.
type deciderAt interface {
	DecideAt(now time.Time, n int) gcra.Decision
	PeekAt(now time.Time, n int) gcra.Decision
}

// keyedAt is the keyed limiters' common surface.
type keyedAt[K comparable] interface {
	AllowN(key K, now time.Time, n int) bool
	DecideAt(key K, now time.Time, n int) gcra.Decision
	PeekAt(key K, now time.Time, n int) gcra.Decision
	SweepAt(now time.Time) int
	Len() int
	Stats() window.KeyedStats
	Close()
}

// algo builds one algorithm as a keyed limiter and as a single-key one.
type algo struct {
	name   string
	limit  int
	period time.Duration
	keyed  func(t testing.TB, opts ...window.Option) keyedAt[int]
	single func(t testing.TB, opts ...window.Option) deciderAt
}

// must returns v, and panics (failing the test) on a construction error.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func keyedAlgos() []algo {
	const n, w = 4, 100 * time.Millisecond
	return []algo{
		{"fixed", n, w,
			func(t testing.TB, o ...window.Option) keyedAt[int] {
				return must(window.NewKeyedFixed[int](n, w, o...))
			},
			func(t testing.TB, o ...window.Option) deciderAt { return must(window.NewFixed(n, w, o...)) }},
		{"fixed-utc", n, w,
			func(t testing.TB, o ...window.Option) keyedAt[int] {
				return must(window.NewKeyedFixed[int](n, w, append(o, window.WithAlign(window.AlignUTC(30*time.Millisecond)))...))
			},
			func(t testing.TB, o ...window.Option) deciderAt {
				return must(window.NewFixed(n, w, append(o, window.WithAlign(window.AlignUTC(30*time.Millisecond)))...))
			}},
		{"counter", n, w,
			func(t testing.TB, o ...window.Option) keyedAt[int] {
				return must(window.NewKeyedCounter[int](n, w, o...))
			},
			func(t testing.TB, o ...window.Option) deciderAt { return must(window.NewCounter(n, w, o...)) }},
		{"log", n, w,
			func(t testing.TB, o ...window.Option) keyedAt[int] {
				return must(window.NewKeyedLog[int](n, w, o...))
			},
			func(t testing.TB, o ...window.Option) deciderAt { return must(window.NewLog(n, w, o...)) }},
	}
}

// A keyed limiter decides every key exactly as a single-key limiter of the
// same parameters would, whether it keeps its keys or sweeps them after
// every step: a removed key is idle, so its fresh cell decides as the old
// one would have. Every field of every decision and peek is compared, on
// random sequences whose times never go back.
func TestKeyedMatchesSingleKey(t *testing.T) {
	for _, a := range keyedAlgos() {
		t.Run(a.name, func(t *testing.T) {
			evicted := uint64(0)
			for seed := range uint64(40) {
				rng := rand.New(rand.NewPCG(seed, 5))
				clk := newFakeClock()
				kept := a.keyed(t, window.WithClock(clk), window.WithSweepInterval(0))
				swept := a.keyed(t, window.WithClock(clk), window.WithSweepInterval(0))
				const keys = 5
				singles := make([]deciderAt, keys)
				for i := range singles {
					singles[i] = a.single(t, window.WithClock(clk))
				}
				for step := range 300 {
					clk.Advance(time.Duration(rng.Int64N(int64(a.period) * 3 / 4)))
					now := clk.Now()
					key, n := rng.IntN(keys), rng.IntN(a.limit+2)
					if a.name == "log" {
						n = rng.IntN(3)
					}
					what := fmt.Sprintf("seed %d step %d key %d n %d", seed, step, key, n)
					peek := singles[key].PeekAt(now, n)
					require.Equal(t, peek, kept.PeekAt(key, now, n), "peek kept: "+what)
					require.Equal(t, peek, swept.PeekAt(key, now, n), "peek swept: "+what)
					want := singles[key].DecideAt(now, n)
					require.Equal(t, want, kept.DecideAt(key, now, n), "kept: "+what)
					require.Equal(t, want, swept.DecideAt(key, now, n), "swept: "+what)
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
func TestKeyedStaleTimeAfterEviction(t *testing.T) {
	clk := newFakeClock()
	f := must(window.NewKeyedFixed[string](2, time.Second, window.WithClock(clk), window.WithSweepInterval(0)))
	at := func(d time.Duration) time.Time { return clk.At(d) }
	require.True(t, f.AllowN("a", at(500*time.Millisecond), 2)) // window 0 full
	clk.Set(1200 * time.Millisecond)                            // a sweep never looks past the clock
	require.Equal(t, 1, f.SweepAt(at(1200*time.Millisecond)))
	d := f.DecideAt("a", at(900*time.Millisecond), 1) // stale: window 0
	require.True(t, d.Allowed)
	assert.Equal(t, 1100*time.Millisecond, d.ResetAfter, "counted in window 1, which ends at 2s")
	assert.Equal(t, 1, d.Remaining)
	assert.True(t, f.AllowN("a", at(1500*time.Millisecond), 1))
	assert.False(t, f.AllowN("a", at(1600*time.Millisecond), 1), "window 1 holds 2")

	clk.Set(0) // the log's epoch: t0, as the fixed window's
	l := must(window.NewKeyedLog[string](1, time.Second, window.WithClock(clk), window.WithSweepInterval(0)))
	require.True(t, l.AllowN("a", at(500*time.Millisecond), 1)) // expires at 1.5s
	clk.Set(1400 * time.Millisecond)
	require.Equal(t, 0, l.SweepAt(at(1400*time.Millisecond)), "not idle before 1.5s")
	clk.Set(1500 * time.Millisecond)
	require.Equal(t, 1, l.SweepAt(at(1500*time.Millisecond)))
	d = l.DecideAt("a", at(1100*time.Millisecond), 1) // stale
	require.False(t, d.Allowed, "a stale request must not find an empty ring")
	assert.Equal(t, 400*time.Millisecond, d.RetryAfter)
	pk := l.PeekAt("b", at(1100*time.Millisecond), 1)
	assert.False(t, pk.Allowed, "a new key starts at the floor too")
	assert.True(t, l.AllowN("a", at(1500*time.Millisecond), 1))
}

// A cell the sweeper retired but has not yet removed is replaced by the
// caller that meets it.
func TestKeyedRetiredCellIsReplaced(t *testing.T) {
	for _, a := range keyedAlgos() {
		t.Run(a.name, func(t *testing.T) {
			clk := newFakeClock()
			k := a.keyed(t, window.WithClock(clk), window.WithSweepInterval(0))
			require.True(t, k.AllowN(1, clk.Now(), 1))
			clk.Advance(3 * a.period) // idle
			retireOnly(t, k, 1, clk.Now())
			require.Equal(t, 1, k.Len(), "retired, still held")
			assert.True(t, k.PeekAt(1, clk.Now(), 1).Allowed, "peek answers as for a new cell")
			assert.True(t, k.AllowN(1, clk.Now(), 1))
			assert.True(t, k.DecideAt(1, clk.Now(), 1).Allowed)
			st := k.Stats()
			assert.Equal(t, uint64(2), st.Created)
			assert.Equal(t, 1, k.Len())
		})
	}
}

// retireOnly retires key's cell without removing it from the map.
func retireOnly(t *testing.T, k keyedAt[int], key int, now time.Time) {
	t.Helper()
	switch k := k.(type) {
	case *window.Keyed[int]:
		require.True(t, k.RetireKey(key, now))
	case *window.KeyedLog[int]:
		require.True(t, k.RetireKey(key, now))
	default:
		t.Fatalf("%T", k)
	}
}

// A key bound holds exactly, and each policy does what it says.
func TestKeyedMaxKeys(t *testing.T) {
	for _, a := range keyedAlgos() {
		t.Run(a.name, func(t *testing.T) {
			clk := newFakeClock()
			k := a.keyed(t, window.WithClock(clk), window.WithSweepInterval(0), window.WithMaxKeys(3, window.RejectNew))
			for key := range 3 {
				require.True(t, k.AllowN(key, clk.Now(), 1))
			}
			d := k.DecideAt(9, clk.Now(), 1)
			assert.False(t, d.Allowed, "full, nothing idle")
			assert.Positive(t, d.RetryAfter)
			assert.Equal(t, uint64(1), k.Stats().Rejected)
			clk.Advance(3 * a.period) // every key idle: room is made
			assert.True(t, k.AllowN(9, clk.Now(), 1))
			assert.LessOrEqual(t, k.Len(), 3, "a sweep removes every idle key of a shard")

			e := a.keyed(t, window.WithClock(clk), window.WithSweepInterval(0), window.WithMaxKeys(3, window.EvictStalest))
			for key := range 3 {
				require.True(t, e.AllowN(key, clk.Now(), 1))
			}
			assert.True(t, e.AllowN(9, clk.Now(), 1), "the stalest active key makes room")
			assert.Equal(t, 3, e.Len())
			assert.Equal(t, uint64(1), e.Stats().EvictedActive)
		})
	}
}

func TestKeyedOptions(t *testing.T) {
	_, err := window.NewFixed(1, time.Second, window.WithMaxKeys(3, window.RejectNew))
	assert.ErrorIs(t, err, window.ErrOption)
	_, err = window.NewLog(1, time.Second, window.WithSweepInterval(time.Second))
	assert.ErrorIs(t, err, window.ErrOption)
	_, err = window.NewKeyedFixed[int](1, time.Second, window.WithMaxKeys(-1, window.RejectNew))
	assert.ErrorIs(t, err, window.ErrInvalidMaxKeys)
	_, err = window.NewKeyedCounter[int](1, time.Second, window.WithAlign(window.AlignUTC(0)))
	assert.ErrorIs(t, err, window.ErrOption)
	_, err = window.NewKeyedLog[int](0, time.Second)
	assert.ErrorIs(t, err, window.ErrInvalidLimit)

	// The background sweeper removes idle keys, and Close stops it.
	k := must(window.NewKeyedFixed[int](1, time.Millisecond, window.WithSweepInterval(time.Millisecond), window.WithShards(1)))
	require.True(t, k.Allow(1))
	require.Eventually(t, func() bool { return k.Len() == 0 }, 5*time.Second, time.Millisecond)
	k.Close()
	k.Close()
}

// Decisions on keys already present allocate nothing.
func TestKeyedAllocatesNothing(t *testing.T) {
	clk := newFakeClock()
	f := must(window.NewKeyedFixed[string](1<<20, time.Hour, window.WithSweepInterval(0)))
	c := must(window.NewKeyedCounter[string](1<<10, time.Hour, window.WithClock(clk), window.WithSweepInterval(0)))
	l := must(window.NewKeyedLog[uint64](8, time.Hour, window.WithSweepInterval(0)))
	now := clk.Now()
	f.Allow("k")
	c.Allow("k")
	l.Allow(7)
	for name, fn := range map[string]func(){
		"fixed/allow":    func() { f.Allow("k") },
		"fixed/decide":   func() { f.Decide("k", 1) },
		"fixed/peek":     func() { f.Peek("k", 1) },
		"counter/allowN": func() { c.AllowN("k", now, 1) }, // admits, then denies
		"counter/decide": func() { c.DecideAt("k", now, 1) },
		"log/allow":      func() { l.Allow(7) }, // 8 admissions, then denials
		"log/decide":     func() { l.Decide(7, 1) },
		"log/peek":       func() { l.Peek(7, 1) },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, fn), name)
	}
}

// Many goroutines on a few keys, with the clock jumping, stale times, and a
// sweep on every few steps (each evicting what is idle), never exceed any
// key's bound: the fixed window and the counter at most N in each window
// they count in, the log at most N in any rolling window of request times.
// Eviction loses nothing: a removed cell's counts stay covered by the floor.
func TestKeyedEvictionRace(t *testing.T) {
	for _, a := range keyedAlgos() {
		t.Run(a.name, func(t *testing.T) {
			clk := newFakeClock()
			k := a.keyed(t, window.WithClock(clk), window.WithSweepInterval(0))
			const keys = 3
			var mu sync.Mutex
			got := make([][]admission, keys)
			var sweeps atomic.Int64
			steps := perCall() / 2
			hammer(func(g int) int {
				rng := rand.New(rand.NewPCG(uint64(g), 9))
				for i := range steps {
					now := tick(clk, time.Duration(rng.Int64N(int64(a.period)/8)))
					if rng.IntN(3) == 0 {
						runtime.Gosched() // decide with a stale now
					}
					key, n := rng.IntN(keys), 1+rng.IntN(2)
					if a.name == "log" {
						n = 1
					}
					d := k.DecideAt(key, now, n)
					if d.Allowed {
						mu.Lock()
						got[key] = append(got[key], admission{now: now.Sub(t0), n: n, counted: int64(now.Sub(t0) + d.ResetAfter)})
						mu.Unlock()
					}
					if i%4 == 0 {
						sweeps.Add(1)
						k.SweepAt(clk.Now())
					}
				}
				return 0
			})
			st := k.Stats()
			t.Logf("%d sweeps, %d cells evicted, %d created", sweeps.Load(), st.Evicted, st.Created)
			require.Positive(t, st.Evicted)
			for key, adm := range got {
				checkKeyBound(t, a, key, adm)
			}
		})
	}
}

// checkKeyBound checks one key's admissions against its algorithm's bound.
func checkKeyBound(t *testing.T, a algo, key int, adm []admission) {
	t.Helper()
	if a.name == "log" {
		ts := make([]int64, len(adm))
		for i, x := range adm {
			ts[i] = int64(x.now)
		}
		slices.Sort(ts)
		require.LessOrEqual(t, maxInWindow(ts, int64(a.period)), a.limit, "key %d: a rolling window holds more than N", key)
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
