package atomiclimit_test

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

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

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
