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

// keyedBands are the band combinations the keyed tests run: each kind of
// band last (the one a removal retires), and a window band first.
var keyedBands = map[string][]atomiclimit.Rule{
	"gcra+fixed": {atomiclimit.GCRA(gcra.Every(20*time.Millisecond), 3), atomiclimit.FixedWindow(5, 100*time.Millisecond)},
	"fixed+counter+gcra": {
		atomiclimit.FixedWindowUTC(6, 100*time.Millisecond, 0),
		atomiclimit.SlidingCounter(4, 50*time.Millisecond),
		atomiclimit.GCRA(gcra.Every(10*time.Millisecond), 2),
	},
	"gcra+counter+log": {
		atomiclimit.GCRA(gcra.Every(10*time.Millisecond), 4),
		atomiclimit.SlidingCounter(5, 80*time.Millisecond),
		atomiclimit.SlidingLog(3, 60*time.Millisecond),
	},
}

// A Keyed limiter decides every key as a single-key Limiter of the same
// bands does, whether it keeps its keys or sweeps them after every step.
func TestBandsKeyedMatchesLimiter(t *testing.T) {
	for name, rules := range keyedBands {
		t.Run(name, func(t *testing.T) {
			evicted := uint64(0)
			for seed := range uint64(30) {
				rng := rand.New(rand.NewPCG(seed, 3))
				clk := newFakeClock()
				kept, err := atomiclimit.NewKeyedRule[int](atomiclimit.Bands(rules...), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
				require.NoError(t, err)
				swept, err := atomiclimit.NewKeyedRule[int](atomiclimit.Bands(rules...), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
				require.NoError(t, err)
				const keys = 4
				singles := make([]*atomiclimit.Limiter, keys)
				for i := range singles {
					singles[i], err = atomiclimit.NewRule(atomiclimit.Bands(rules...), atomiclimit.WithClock(clk))
					require.NoError(t, err)
				}
				for step := range 300 {
					now := clk.At(clk.Advance(time.Duration(rng.Int64N(int64(40 * time.Millisecond)))))
					key, n := rng.IntN(keys), rng.IntN(3)
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
			}
			require.Positive(t, evicted, "the swept limiter must really remove keys")
		})
	}
}

// Many goroutines on a few keys, the clock jumping, stale times and, every
// few steps, a sweep (evict=sweep) or a retirement without removal of a
// random key (evict=retire: the state a caller meets between a sweeper's two
// steps, racing with admissions): the GCRA and log bands of every key keep
// their bounds on the request times (B + d/T; N per rolling window), across
// evictions.
func TestBandsKeyedEvictionRace(t *testing.T) {
	const (
		interval = 50 * time.Microsecond
		burst    = 3
		logN     = 4
		logW     = 400 * time.Microsecond
	)
	rule := atomiclimit.Bands(
		atomiclimit.GCRA(gcra.Every(interval), burst),
		atomiclimit.SlidingCounter(6, 300*time.Microsecond),
		atomiclimit.SlidingLog(logN, logW),
	)
	for _, evict := range []string{"sweep", "retire"} {
		t.Run("evict="+evict, func(t *testing.T) {
			clk := newFakeClock()
			k, err := atomiclimit.NewKeyedRule[int](rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			const keys = 3
			var mu sync.Mutex
			got := make([][]int64, keys)
			var evictions, retired atomic.Int64
			steps := 4000
			if raceEnabled {
				steps = 600
			}
			hammerEach(func(g int) int {
				rng := rand.New(rand.NewPCG(uint64(g), 11))
				for i := range steps {
					step := time.Duration(rng.Int64N(int64(30 * time.Microsecond)))
					if rng.IntN(16) == 0 {
						step = 500 * time.Microsecond // every key goes idle
					}
					at := clk.Advance(step)
					if rng.IntN(3) == 0 {
						runtime.Gosched() // a stale now
					}
					key := rng.IntN(keys)
					if k.AllowN(key, clk.At(at), 1) {
						mu.Lock()
						got[key] = append(got[key], int64(at))
						mu.Unlock()
					}
					if i%4 == 0 {
						evictions.Add(1)
						if evict == "sweep" {
							k.SweepAt(clk.Now())
						} else if k.RetireKey(rng.IntN(keys), k.Nanos(clk.Now())) {
							retired.Add(1)
						}
					}
				}
				return 0
			})
			st := k.Stats()
			t.Logf("%d evictions, %d retired by RetireKey, %d cells evicted, %d created", evictions.Load(), retired.Load(), st.Evicted, st.Created)
			// How many evictions met a key idle under the goroutines
			// depends on the interleaving (on 16 cores, seldom); so a
			// forced idle phase, then a request per key: every key is
			// removed and replaced, and its new cell starts from floors
			// that keep the bounds checked below.
			clk.Advance(time.Second)
			for key := range keys {
				if evict == "sweep" {
					continue
				}
				require.True(t, k.RetireKey(key, k.Nanos(clk.Now())), "key %d idle", key)
			}
			if evict == "sweep" {
				require.Equal(t, st.Keys, k.SweepAt(clk.Now()))
			}
			for key := range keys {
				at := clk.Advance(interval)
				require.True(t, k.AllowN(key, clk.At(at), 1), "key %d again", key)
				got[key] = append(got[key], int64(at))
			}
			require.GreaterOrEqual(t, k.Stats().Created, st.Created+keys, "every key replaced")
			for key, ts := range got {
				slices.Sort(ts)
				checkGCRABound(t, ts, int64(interval), burst)
				require.LessOrEqual(t, maxInWindow(ts, int64(logW)), logN, "key %d: log band", key)
			}
		})
	}
}

// A cell whose last band the sweeper retired is replaced by the caller that
// meets it; refunds of the earlier bands leave nothing behind.
func TestBandsKeyedRetiredCellIsReplaced(t *testing.T) {
	for name, rules := range keyedBands {
		t.Run(name, func(t *testing.T) {
			clk := newFakeClock()
			k, err := atomiclimit.NewKeyedRule[int](atomiclimit.Bands(rules...), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			require.NoError(t, err)
			require.True(t, k.AllowN(1, clk.Now(), 1))
			now := clk.At(clk.Advance(time.Second))
			require.True(t, k.RetireKey(1, k.Nanos(now)))
			require.Equal(t, 1, k.Stats().Keys)
			assert.True(t, k.PeekN(1, now, 1).Allowed)
			assert.True(t, k.AllowN(1, now, 1))
			assert.Equal(t, uint64(2), k.Stats().Created)
			d := decideN(k, 1, now, 1)
			assert.True(t, d.Allowed)
		})
	}
}

func TestBandsKeyedOptionsAndErrors(t *testing.T) {
	rule := atomiclimit.Bands(keyedBands["gcra+fixed"]...)
	_, err := atomiclimit.NewRule(rule, atomiclimit.WithMaxKeys(3, atomiclimit.RejectNew))
	assert.ErrorIs(t, err, atomiclimit.ErrOption)
	_, err = atomiclimit.NewKeyedRule[int](rule, atomiclimit.WithMaxKeys(-1, atomiclimit.RejectNew))
	assert.ErrorIs(t, err, atomiclimit.ErrOption)
	_, err = atomiclimit.NewKeyedRule[int](atomiclimit.Bands(atomiclimit.GCRA(gcra.Unlimited, 1), atomiclimit.FixedWindow(5, time.Second)))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	_, err = atomiclimit.NewKeyedRule[int](atomiclimit.Bands())
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	_, err = atomiclimit.NewKeyedRule[int](atomiclimit.Bands(atomiclimit.GCRA(gcra.Unlimited, 0)))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule, "one Unlimited band is an Unlimited band too")

	clk := newFakeClock()
	k, err := atomiclimit.NewKeyedRule[int](rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(2, atomiclimit.RejectNew))
	require.NoError(t, err)
	require.True(t, k.AllowN(1, clk.Now(), 1))
	require.True(t, k.AllowN(2, clk.Now(), 1))
	d := decideN(k, 3, clk.Now(), 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, 0, d.Remaining)
	assert.Equal(t, 100*time.Millisecond, d.RetryAfter, "the longest band takes a window to go idle")
	assert.Equal(t, d.RetryAfter, d.TokenAfter)
	assert.Equal(t, uint64(1), k.Stats().Rejected)
	assert.True(t, k.AllowN(3, clk.At(clk.Advance(time.Second)), 1), "idle keys make room")
}

// Decisions on keys already present allocate nothing.
func TestBandsKeyedAllocatesNothing(t *testing.T) {
	clk := newFakeClock()
	k, err := atomiclimit.NewKeyedRule[string](atomiclimit.Bands(keyedBands["gcra+counter+log"]...), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	now := clk.Now()
	require.True(t, k.AllowN("k", now, 1))
	for name, fn := range map[string]func(){
		"allow":  func() { k.Allow("k") },
		"allowN": func() { k.AllowN("k", now, 1) },
		"decide": func() { decideN(k, "k", now, 1) },
		"peek":   func() { k.PeekN("k", now, 1) },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, fn), name)
	}
}

// The bands' Quota describes the tightest band, but a key is idle only once
// every band is: IdleAfter is the longest band's.
func TestBandsQuotaIdleAfterIsTheLongest(t *testing.T) {
	k, err := atomiclimit.NewKeyedRule[int](atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(100*time.Millisecond), 100), atomiclimit.FixedWindow(5, time.Second)))
	require.NoError(t, err)
	defer k.Close()
	q := k.Quota(1)
	assert.Equal(t, "bands", q.Kind)
	assert.Equal(t, 5, q.Limit, "the tightest band: 5 per second")
	assert.Equal(t, time.Second, q.Window)
	assert.Equal(t, 10*time.Second, q.IdleAfter, "idle once the bucket of 100 has refilled, 10s on")
	assert.Equal(t, "1/100ms, burst 100 and 5/s fixed window", q.String)
}
