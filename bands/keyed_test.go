package bands_test

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

	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/bands"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/window"
)

// keyedSets are the band combinations the keyed tests run: each kind of
// band last (the one a removal retires), and a window band first.
var keyedSets = map[string][]bands.Band{
	"gcra+fixed": {bands.GCRA(gcra.Every(20*time.Millisecond), 3), bands.Fixed(5, 100*time.Millisecond, window.AlignStart)},
	"fixed+counter+gcra": {
		bands.Fixed(6, 100*time.Millisecond, window.AlignUTC(0)),
		bands.Counter(4, 50*time.Millisecond),
		bands.GCRA(gcra.Every(10*time.Millisecond), 2),
	},
	"gcra+counter+log": {
		bands.GCRA(gcra.Every(10*time.Millisecond), 4),
		bands.Counter(5, 80*time.Millisecond),
		bands.Log(3, 60*time.Millisecond),
	},
}

// A Keyed limiter decides every key as a single-key Limiter of the same
// bands does, whether it keeps its keys or sweeps them after every step.
func TestKeyedMatchesLimiter(t *testing.T) {
	for name, specs := range keyedSets {
		t.Run(name, func(t *testing.T) {
			evicted := uint64(0)
			for seed := range uint64(30) {
				rng := rand.New(rand.NewPCG(seed, 3))
				clk := &fakeClock{}
				kept, err := bands.NewKeyed[int](specs, bands.WithClock(clk), bands.WithSweepInterval(0))
				require.NoError(t, err)
				swept, err := bands.NewKeyed[int](specs, bands.WithClock(clk), bands.WithSweepInterval(0))
				require.NoError(t, err)
				const keys = 4
				singles := make([]*bands.Limiter, keys)
				for i := range singles {
					singles[i], err = bands.New(specs, bands.WithClock(clk))
					require.NoError(t, err)
				}
				for step := range 300 {
					now := clk.Advance(time.Duration(rng.Int64N(int64(40 * time.Millisecond))))
					key, n := rng.IntN(keys), rng.IntN(3)
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
			}
			require.Positive(t, evicted, "the swept limiter must really remove keys")
		})
	}
}

// Many goroutines on a few keys, the clock jumping, stale times and a sweep
// every few steps: the GCRA and log bands of every key keep their bounds on
// the request times (B + d/T; N per rolling window), across evictions.
func TestKeyedEvictionRace(t *testing.T) {
	const (
		interval = 50 * time.Microsecond
		burst    = 3
		logN     = 4
		logW     = 400 * time.Microsecond
	)
	specs := []bands.Band{
		bands.GCRA(gcra.Every(interval), burst),
		bands.Counter(6, 300*time.Microsecond),
		bands.Log(logN, logW),
	}
	clk := &fakeClock{}
	k, err := bands.NewKeyed[int](specs, bands.WithClock(clk), bands.WithSweepInterval(0))
	require.NoError(t, err)
	const keys = 3
	var mu sync.Mutex
	got := make([][]int64, keys)
	var sweeps atomic.Int64
	steps := 4000
	if raceEnabled {
		steps = 600
	}
	hammer(func(g int) int {
		rng := rand.New(rand.NewPCG(uint64(g), 11))
		for i := range steps {
			step := time.Duration(rng.Int64N(int64(30 * time.Microsecond)))
			if rng.IntN(16) == 0 {
				step = 500 * time.Microsecond // every key goes idle
			}
			now := clk.Advance(step)
			if rng.IntN(3) == 0 {
				runtime.Gosched() // a stale now
			}
			key := rng.IntN(keys)
			if k.AllowN(key, now, 1) {
				mu.Lock()
				got[key] = append(got[key], int64(now.Sub(t0)))
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
	for key, ts := range got {
		slices.Sort(ts)
		checkGCRABound(t, ts, int64(interval), burst)
		require.LessOrEqual(t, maxInWindow(ts, int64(logW)), logN, "key %d: log band", key)
	}
}

// A cell whose last band the sweeper retired is replaced by the caller that
// meets it; refunds of the earlier bands leave nothing behind.
func TestKeyedRetiredCellIsReplaced(t *testing.T) {
	for name, specs := range keyedSets {
		t.Run(name, func(t *testing.T) {
			clk := &fakeClock{}
			k, err := bands.NewKeyed[int](specs, bands.WithClock(clk), bands.WithSweepInterval(0))
			require.NoError(t, err)
			require.True(t, k.AllowN(1, clk.Now(), 1))
			now := clk.Advance(time.Second)
			require.True(t, k.RetireKey(1, now))
			require.Equal(t, 1, k.Len())
			assert.True(t, k.PeekAt(1, now, 1).Allowed)
			assert.True(t, k.AllowN(1, now, 1))
			assert.Equal(t, uint64(2), k.Stats().Created)
			d := k.DecideAt(1, now, 1)
			assert.True(t, d.Allowed)
		})
	}
}

func TestKeyedOptionsAndErrors(t *testing.T) {
	specs := keyedSets["gcra+fixed"]
	_, err := bands.New(specs, bands.WithMaxKeys(3, atomicbucket.RejectNew))
	assert.ErrorIs(t, err, bands.ErrOption)
	_, err = bands.NewKeyed[int](specs, bands.WithMaxKeys(-1, atomicbucket.RejectNew))
	assert.ErrorIs(t, err, bands.ErrInvalidMaxKeys)
	_, err = bands.NewKeyed[int]([]bands.Band{bands.GCRA(gcra.Unlimited, 1)})
	assert.ErrorIs(t, err, bands.ErrInvalidBand)
	_, err = bands.NewKeyed[int](nil)
	assert.ErrorIs(t, err, bands.ErrNoBands)

	clk := &fakeClock{}
	k, err := bands.NewKeyed[int](specs, bands.WithClock(clk), bands.WithSweepInterval(0), bands.WithMaxKeys(2, atomicbucket.RejectNew))
	require.NoError(t, err)
	require.True(t, k.AllowN(1, clk.Now(), 1))
	require.True(t, k.AllowN(2, clk.Now(), 1))
	d := k.DecideAt(3, clk.Now(), 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, -1, d.Band)
	assert.Equal(t, 100*time.Millisecond, d.RetryAfter, "the longest band takes a window to go idle")
	assert.Equal(t, uint64(1), k.Stats().Rejected)
	assert.True(t, k.AllowN(3, clk.Advance(time.Second), 1), "idle keys make room")
}

// Decisions on keys already present allocate nothing.
func TestKeyedAllocatesNothing(t *testing.T) {
	clk := &fakeClock{}
	k, err := bands.NewKeyed[string](keyedSets["gcra+counter+log"], bands.WithClock(clk), bands.WithSweepInterval(0))
	require.NoError(t, err)
	now := clk.Now()
	require.True(t, k.AllowN("k", now, 1))
	for name, fn := range map[string]func(){
		"allow":  func() { k.Allow("k") },
		"allowN": func() { k.AllowN("k", now, 1) },
		"decide": func() { k.DecideAt("k", now, 1) },
		"peek":   func() { k.PeekAt("k", now, 1) },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, fn), name)
	}
}
