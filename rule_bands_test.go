package atomiclimit_test

import (
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
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// newBands returns a single-key limiter of Bands(rules...) on clk (a fresh
// fake clock if nil): its epoch, where every FixedWindow starts, is clk's
// time now.
func newBands(t testing.TB, clk *fakeClock, rules ...atomiclimit.Rule) *atomiclimit.Limiter {
	t.Helper()
	if clk == nil {
		clk = newFakeClock()
	}
	l, err := atomiclimit.NewRule(atomiclimit.Bands(rules...), atomiclimit.WithClock(clk))
	require.NoError(t, err)
	return l
}

type bandsStep struct {
	at        time.Duration
	n         int
	ok        bool
	remaining int
	retry     time.Duration
}

// 2 per second (burst 2) and 5 per 10 s (fixed, from creation): the short
// band limits first, then the long one. (Which band binds is asserted on
// algo.Set.Decide, TestSetDecideTimeline: the limiters' decisions drop it.)
func TestBandsTimeline(t *testing.T) {
	const ms = time.Millisecond
	clk := newFakeClock()
	l := newBands(t, clk, atomiclimit.GCRA(gcra.Per(2, time.Second), 2), atomiclimit.FixedWindow(5, 10*time.Second))
	for i, s := range []bandsStep{
		{at: 0, n: 1, ok: true, remaining: 1},
		{at: 0, n: 1, ok: true, remaining: 0},
		{at: 0, n: 1, ok: false, remaining: 0, retry: 500 * ms},
		{at: 1000 * ms, n: 2, ok: true, remaining: 0}, // fixed: 4 of 5
		{at: 2000 * ms, n: 2, ok: false, remaining: 1, retry: 8 * time.Second},
		{at: 2000 * ms, n: 1, ok: true, remaining: 0},
		{at: 5000 * ms, n: 1, ok: false, remaining: 0, retry: 5 * time.Second},
		{at: 5000 * ms, n: 3, ok: false, remaining: 0, retry: gcra.Never},
		{at: 10 * time.Second, n: 2, ok: true, remaining: 0},
	} {
		d := l.TakeN(clk.At(s.at), s.n)
		assert.Equal(t, s, bandsStep{s.at, s.n, d.Allowed, d.Remaining, d.RetryAfter}, "step %d", i)
	}
}

// A request the last band denies takes nothing from the bands before it
// (the check phase writes nothing; the take phase and its refunds are
// tested on algo.Set: TestSetRefundOnLateDenial). Had the five denials
// below taken GCRA tokens, the bucket (burst 3, 1/s) would be empty and the
// requests in the next windows denied.
func TestBandsDenialTakesNothing(t *testing.T) {
	clk := newFakeClock()
	l := newBands(t, clk,
		atomiclimit.GCRA(gcra.Per(1, time.Second), 3),
		atomiclimit.FixedWindow(10, time.Minute),
		atomiclimit.SlidingCounter(10, time.Minute),
		atomiclimit.FixedWindow(1, 100*time.Millisecond))
	now := clk.Now()
	require.True(t, l.AllowN(now, 1))
	before := l.PeekN(now, 0)
	for i := range 5 {
		assert.False(t, l.AllowN(now, 1), "denial %d: the last band is spent", i)
	}
	assert.Equal(t, before, l.PeekN(now, 0), "denials wrote nothing")
	assert.True(t, l.AllowN(clk.At(100*time.Millisecond), 1), "the GCRA band kept its 2 tokens")
	assert.True(t, l.AllowN(clk.At(200*time.Millisecond), 1), "the GCRA band kept its 2 tokens")
	assert.False(t, l.AllowN(clk.At(300*time.Millisecond), 1), "3 taken in 300ms: the GCRA band is empty")
}

// A log band must be last and alone; a band's own validation error wraps
// ErrInvalidRule and the band's sentinel.
func TestBandsErrors(t *testing.T) {
	_, err := atomiclimit.NewRule(atomiclimit.Bands())
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	many := make([]atomiclimit.Rule, algo.MaxBands+1)
	for i := range many {
		many[i] = atomiclimit.GCRA(gcra.Per(1, time.Second), 1)
	}
	_, err = atomiclimit.NewRule(atomiclimit.Bands(many...))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	_, err = atomiclimit.NewRule(atomiclimit.Bands(many[:algo.MaxBands]...))
	assert.NoError(t, err, "MaxBands bands are allowed")
	_, err = atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.SlidingLog(3, time.Second), atomiclimit.GCRA(gcra.Per(1, time.Second), 1)))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	assert.ErrorIs(t, err, algo.ErrLogNotLast)
	_, err = atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.SlidingLog(3, time.Second), atomiclimit.SlidingLog(3, time.Minute)))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	assert.ErrorIs(t, err, algo.ErrLogNotLast)
	_, err = atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.GCRA(gcra.Per(1, time.Second), 1), atomiclimit.GCRA(gcra.Per(1, time.Second), 0)))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	assert.ErrorIs(t, err, gcra.ErrInvalidBurst)
	assert.Contains(t, err.Error(), "atomiclimit: ")
	assert.Contains(t, err.Error(), "band 1")
	_, err = atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.GCRA(gcra.Per(1, time.Second), 1), atomiclimit.SlidingCounter(1<<20, time.Second)))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	assert.ErrorIs(t, err, gcra.ErrOverflow)
	_, err = atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.GCRA(gcra.Per(1, time.Second), 1), atomiclimit.Rule{}))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	_, err = atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.Rule{}))
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule)
	_, err = atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(time.Microsecond), 2), atomiclimit.FixedWindow(10, time.Hour)), atomiclimit.WithCoarseClock())
	assert.ErrorIs(t, err, atomiclimit.ErrOption)
	l, err := atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.GCRA(gcra.Per(10, time.Second), 100), atomiclimit.FixedWindowUTC(10, time.Hour, 0)), atomiclimit.WithCoarseClock())
	require.NoError(t, err)
	assert.True(t, l.Allow())
	_, err = atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.GCRA(gcra.Every(time.Microsecond), 2)), atomiclimit.WithCoarseClock())
	assert.ErrorIs(t, err, atomiclimit.ErrOption)
}

// Bands of one band is that band, but the band's validation error must
// still wrap ErrInvalidRule as well as its own sentinel, as ErrInvalidRule
// documents (and as the old package's ErrInvalidBand did for one band).
func TestBandsOneInvalidBandWrapsErrInvalidRule(t *testing.T) {
	_, err := atomiclimit.NewRule(atomiclimit.Bands(atomiclimit.GCRA(gcra.Per(1, time.Second), 0)))
	assert.ErrorIs(t, err, gcra.ErrInvalidBurst)
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule, "Bands(one invalid band): %v", err)
	_, err = atomiclimit.NewKeyedRule[int](atomiclimit.Bands(atomiclimit.FixedWindow(0, time.Second)))
	assert.ErrorIs(t, err, gcra.ErrInvalidLimit)
	assert.ErrorIs(t, err, atomiclimit.ErrInvalidRule, "Bands(one invalid band): %v", err)
}

// randomBands returns GCRA, fixed and log bands (log last, if any) and
// their reference models, with small limits so that every band binds.
func randomBands(rng *rand.Rand, start int64) ([]atomiclimit.Rule, *refBands) {
	var rules []atomiclimit.Rule
	var refs []refBand
	for k := 1 + rng.IntN(3); k > 0; k-- {
		switch rng.IntN(2) {
		case 0:
			iv, b := 1+rng.Int64N(200), 1+rng.IntN(4)
			rules = append(rules, atomiclimit.GCRA(gcra.Every(time.Duration(iv)), b))
			refs = append(refs, &refGCRA{interval: iv, burst: int64(b)})
		case 1:
			n, w := 1+rng.IntN(6), 64+rng.Int64N(1000)
			rules = append(rules, atomiclimit.FixedWindow(n, time.Duration(w)))
			refs = append(refs, &refFixed{limit: n, period: w, start: start, counts: map[int64]int{}})
		}
	}
	if rng.IntN(2) == 0 {
		n, w := 1+rng.IntN(5), 1+rng.Int64N(1000)
		rules = append(rules, atomiclimit.SlidingLog(n, time.Duration(w)))
		refs = append(refs, &refLog{limit: n, period: w})
	}
	return rules, &refBands{bands: refs}
}

// checkAgainstRef runs (now, n) steps through a Limiter of Bands(rules...)
// and through the references, and checks RetryAfter by its definition.
func checkAgainstRef(t *testing.T, rules []atomiclimit.Rule, ref *refBands, nows []int64, ns []int) {
	t.Helper()
	clk := newFakeClock()
	l := newBands(t, clk, rules...)
	for i := range nows {
		at := clk.At(time.Duration(nows[i]))
		d := l.TakeN(at, ns[i])
		r := ref.request(nows[i], ns[i])
		require.Equal(t, r, refResult{d.Allowed, d.Remaining, d.RetryAfter}, "step %d: now %d n %d (%v)", i, nows[i], ns[i], rules)
		if !d.Allowed && d.RetryAfter != gcra.Never {
			require.True(t, l.PeekN(at.Add(d.RetryAfter), ns[i]).Allowed, "step %d: admitted after RetryAfter", i)
			require.False(t, l.PeekN(at.Add(d.RetryAfter-1), ns[i]).Allowed, "step %d: denied 1ns before", i)
		}
	}
}

func TestBandsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 300; trial++ {
		rules, ref := randomBands(rng, 0)
		var nows []int64
		var ns []int
		now := int64(0)
		for i := 0; i < 100; i++ {
			now = max(now+rng.Int64N(200)-40, 0)
			nows = append(nows, now)
			ns = append(ns, 1+rng.IntN(3)-rng.IntN(2))
		}
		checkAgainstRef(t, rules, ref, nows, ns)
	}
}

func TestBandsAllocateNothing(t *testing.T) {
	l, err := atomiclimit.NewRule(atomiclimit.Bands(
		atomiclimit.GCRA(gcra.Per(20, time.Second), 20),
		atomiclimit.FixedWindowUTC(1000, time.Hour, 0),
		atomiclimit.SlidingCounter(10000, 24*time.Hour),
		atomiclimit.SlidingLog(100, time.Minute),
	))
	require.NoError(t, err)
	now := time.Now()
	for name, fn := range map[string]func(){
		"allow":  func() { l.Allow() },
		"allowN": func() { l.AllowN(now, 1) },
		"decide": func() { l.Take(1) },
		"peek":   func() { l.PeekN(now, 1) },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, fn), name)
	}
}

// A log band's peek describes the state after the hypothetical admission,
// so Peek equals the Decide that follows at the same instant on a t0…t9
// timeline, for a log band alone and behind a GCRA band, single-key and
// keyed.
func TestLogBandPeekMatchesDecide(t *testing.T) {
	ms := time.Millisecond
	timeline := []time.Duration{0, 0, 400 * ms, 999 * ms, time.Second, 1300 * ms, 1400 * ms, 500 * ms, 1800 * ms, 5 * time.Second}
	for name, rules := range map[string][]atomiclimit.Rule{
		"log":      {atomiclimit.SlidingLog(3, time.Second)},
		"gcra+log": {atomiclimit.GCRA(gcra.Per(100, time.Second), 50), atomiclimit.SlidingLog(3, time.Second)},
		"log N=1":  {atomiclimit.SlidingLog(1, time.Second)},
	} {
		clk := newFakeClock()
		l := newBands(t, clk, rules...)
		k, err := atomiclimit.NewKeyedRule[string](atomiclimit.Bands(rules...), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
		require.NoError(t, err)
		for i, at := range timeline {
			now := clk.At(at)
			peek := l.PeekN(now, 1)
			assert.Equal(t, peek, l.TakeN(now, 1), "%s step %d (at %v): peek, then decide", name, i, at)
			kpeek := k.PeekN("a", now, 1)
			assert.Equal(t, kpeek, decideN(k, "a", now, 1), "%s step %d (at %v): keyed peek, then decide", name, i, at)
		}
	}
}

// n = 0 is a peek under bands too: admitted by every band kind (a log band
// included), counting nothing, creating no key.
func TestBandsZeroNIsAnAdmittedPeek(t *testing.T) {
	rules := []atomiclimit.Rule{atomiclimit.GCRA(gcra.Per(10, time.Second), 2), atomiclimit.FixedWindow(2, time.Second),
		atomiclimit.SlidingCounter(2, time.Second), atomiclimit.SlidingLog(2, time.Second)}
	clk := newFakeClock()
	l := newBands(t, clk, rules...)
	k, err := atomiclimit.NewKeyedRule[string](atomiclimit.Bands(rules...), atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	for i, at := range []time.Duration{0, 0, 300 * time.Millisecond, 100 * time.Millisecond} { // t0…t3
		now := clk.At(at)
		l.AllowN(now, 1)
		before := l.PeekN(now, 1)
		assert.True(t, l.AllowN(now, 0), "step %d: AllowN(0)", i)
		d := l.TakeN(now, 0)
		assert.True(t, d.Allowed, "step %d: DecideAt(0)", i)
		assert.Zero(t, d.RetryAfter, "step %d", i)
		assert.True(t, l.PeekN(now, 0).Allowed, "step %d: PeekAt(0)", i)
		assert.Equal(t, before, l.PeekN(now, 1), "step %d: nothing counted", i)
		assert.Equal(t, gcra.Never, l.TakeN(now, -1).RetryAfter, "step %d: n < 0", i)
		assert.True(t, k.AllowN("new", now, 0), "step %d: keyed", i)
		assert.True(t, decideN(k, "new", now, 0).Allowed, "step %d: keyed", i)
		assert.Zero(t, k.Stats().Keys, "step %d: n = 0 creates no key", i)
	}
}

// checkGCRABound asserts the GCRA bound on sorted admission times: for
// every i ≤ j, the j−i+1 admissions in [t_i, t_j] are at most B + (t_j−t_i)/T,
// i.e. (j+1−B)·T − t_j ≤ i·T − t_i, checked in one pass against the running
// minimum of the right-hand side.
func checkGCRABound(t *testing.T, ts []int64, interval, burst int64) {
	t.Helper()
	best := int64(1) << 62
	for j, tj := range ts {
		best = min(best, int64(j)*interval-tj)
		require.LessOrEqual(t, (int64(j)+1-burst)*interval-tj, best, "admission %d at %d: over B + d/T", j, tj)
	}
}

// maxInWindow is the most sorted times ts holds in any half-open window
// (t − w, t].
func maxInWindow(ts []int64, w int64) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[lo] <= ts[hi]-w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

const (
	gInterval = 20 * time.Microsecond
	gBurst    = 4
	fN        = 10
	fWindow   = 500 * time.Microsecond
	lN        = 6
	lWindow   = 200 * time.Microsecond
)

func hammerBands(clk *fakeClock) (*atomiclimit.Limiter, error) {
	return atomiclimit.NewRule(atomiclimit.Bands(
		atomiclimit.GCRA(gcra.Every(gInterval), gBurst),
		atomiclimit.FixedWindow(fN, fWindow),
		atomiclimit.SlidingLog(lN, lWindow),
	), atomiclimit.WithClock(clk))
}

// checkBands checks each band's bound on the admission times nows (ns since
// the limiter's epoch, where its fixed windows start).
func checkBands(t *testing.T, nows []int64, perWindow bool) {
	t.Helper()
	slices.Sort(nows)
	checkGCRABound(t, nows, int64(gInterval), gBurst)
	require.LessOrEqual(t, maxInWindow(nows, int64(lWindow)), lN, "log band")
	if perWindow {
		counts := map[int64]int{}
		for _, now := range nows {
			counts[now/int64(fWindow)]++
			require.LessOrEqual(t, counts[now/int64(fWindow)], fN, "fixed band, window %d", now/int64(fWindow))
		}
	}
}

// Rounds at frozen instants, the clock moved by a random step between them:
// every goroutine takes what it can. Each band keeps its bound (the fixed
// one per window, exactly: at a frozen instant every admission counts in the
// instant's window), and the rounds admit no more than one goroutine alone
// admits. (They may admit less: a GCRA refund dropped behind a later
// admission leaves its tokens spent.)
func TestBandsConcurrentRounds(t *testing.T) {
	clk, seqClk := newFakeClock(), newFakeClock()
	conc, err := hammerBands(clk)
	require.NoError(t, err)
	seq, err := hammerBands(seqClk)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(9, 10))
	var nows []int64
	got, want := 0, 0
	rounds := 3000
	if raceEnabled {
		rounds = 300
	}
	for range rounds {
		step := time.Duration(rng.Int64N(int64(60 * time.Microsecond)))
		at, seqAt := clk.Advance(step), seqClk.Advance(step)
		now, seqNow := clk.At(at), seqClk.At(seqAt)
		for seq.AllowN(seqNow, 1) {
			want++
		}
		for _, k := range hammerEach(func(int) int {
			k := 0
			for conc.AllowN(now, 1) {
				k++
			}
			return k
		}) {
			got += k
			for range k {
				nows = append(nows, int64(at))
			}
		}
	}
	checkBands(t, nows, true)
	assert.LessOrEqual(t, got, want)
	assert.Greater(t, got, want*9/10, "refunds lose little")
	t.Logf("%d rounds: %d admitted concurrently, %d alone", rounds, got, want)
}

// A clock that every call moves, and callers that yield between reading it
// and deciding (stale nows): the GCRA and log bands keep their bounds on the
// nows the callers passed.
func TestBandsConcurrentStaleNow(t *testing.T) {
	clk := newFakeClock()
	l, err := hammerBands(clk)
	require.NoError(t, err)
	calls := 20000
	if raceEnabled {
		calls = 2000
	}
	logs := hammerEach(func(g int) []int64 {
		var got []int64
		for i := range calls {
			at := clk.Advance(time.Microsecond)
			if i%4 == g%4 {
				runtime.Gosched()
			}
			if l.AllowN(clk.At(at), 1) {
				got = append(got, int64(at))
			}
		}
		return got
	})
	nows := slices.Concat(logs...)
	checkBands(t, nows, false)
	assert.Greater(t, len(nows), 100)
	t.Logf("%d admitted over %v", len(nows), time.Duration(goroutines*calls)*time.Microsecond)
}

// FuzzBands draws the bands from seed (GCRA, fixed and log bands, the log
// last) and the requests from ops (pairs of bytes: a signed time step and a
// size from 0 to 3), and checks every decision against the reference models
// and RetryAfter by its definition.
func FuzzBands(f *testing.F) {
	f.Add(uint64(1), []byte{0, 1, 0, 1, 0, 1, 10, 2, 200, 1, 127, 3, 1, 0})
	f.Add(uint64(42), []byte{5, 1, 5, 1, 5, 1, 5, 1, 5, 1, 5, 1})
	f.Fuzz(func(t *testing.T, seed uint64, ops []byte) {
		rules, ref := randomBands(rand.New(rand.NewPCG(seed, seed>>32)), 0)
		var nows []int64
		var ns []int
		now := int64(0)
		for i := 0; i+1 < len(ops); i += 2 {
			now = max(now+int64(int8(ops[i])), 0)
			nows = append(nows, now)
			ns = append(ns, int(ops[i+1])%4)
		}
		checkAgainstRef(t, rules, ref, nows, ns)
	})
}

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
				// False when the hammer retired the key last and no request
				// replaced its cell since: retired already. Either way the
				// request below meets a retired cell and replaces it, which
				// the count of cells created checks.
				k.RetireKey(key, k.Nanos(clk.Now()))
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

// Plain reference models of the bands, guarded by one mutex: a request is
// admitted iff every model would admit it, and then recorded in all of them.

type refBand interface {
	// would returns whether n fits at now, the remaining after it would be
	// recorded (or now, if it does not fit) and the wait when it does not.
	would(now int64, n int) (ok bool, remaining int, retry time.Duration)
	record(now int64, n int)
}

type refBands struct {
	mu    sync.Mutex
	bands []refBand
}

type refResult struct {
	ok        bool
	remaining int
	retry     time.Duration
}

func (m *refBands) request(now int64, n int) refResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := refResult{ok: n >= 0, remaining: math.MaxInt} // n = 0: a peek, admitted
	if n < 0 {
		r.retry = gcra.Never // (would(now, 0) is the state query below)
	}
	for _, b := range m.bands {
		if n < 1 {
			break
		}
		ok, _, retry := b.would(now, n)
		if !ok {
			r.ok = false
			r.retry = max(r.retry, retry)
		}
	}
	if r.ok && n > 0 { // a peek records nothing
		for _, b := range m.bands {
			b.record(now, n)
		}
	}
	for _, b := range m.bands {
		_, rem, _ := b.would(now, 0) // n = 0: just the state
		r.remaining = min(r.remaining, rem)
	}
	return r
}

// refGCRA is the continuous leaky bucket (ITU-T I.371): level drains one ns
// per ns; a request adds n·T and fits if the level stays ≤ B·T.
type refGCRA struct {
	interval, burst int64
	level, lct      int64
}

func (m *refGCRA) drained(now int64) int64 { return max(m.level-(now-m.lct), 0) }

func (m *refGCRA) would(now int64, n int) (bool, int, time.Duration) {
	x, capacity := m.drained(now), m.burst*m.interval
	rem := 0
	if x < capacity {
		rem = int((capacity - x) / m.interval)
	}
	switch {
	case n == 0:
		return true, rem, 0
	case n < 0 || int64(n) > m.burst:
		return false, rem, gcra.Never
	case x+int64(n)*m.interval <= capacity:
		return true, rem, 0
	}
	return false, rem, time.Duration(x + int64(n)*m.interval - capacity)
}

func (m *refGCRA) record(now int64, n int) {
	m.level, m.lct = m.drained(now)+int64(n)*m.interval, now
}

// refFixed counts per window index; a stale now counts in the latest
// window that admitted anything.
type refFixed struct {
	limit         int
	period, start int64
	counts        map[int64]int
	top           int64
}

func (m *refFixed) window(now int64) int64 {
	return max((max(now, m.start)-m.start)/m.period, m.top)
}

func (m *refFixed) would(now int64, n int) (bool, int, time.Duration) {
	w := m.window(now)
	rem := m.limit - m.counts[w]
	switch {
	case n == 0:
		return true, rem, 0
	case n < 0 || n > m.limit:
		return false, rem, gcra.Never
	case m.counts[w]+n <= m.limit:
		return true, rem, 0
	}
	return false, rem, time.Duration(m.start + (w+1)*m.period - now)
}

func (m *refFixed) record(now int64, n int) {
	w := m.window(now)
	m.counts[w] += n
	m.top = w
}

// refLog keeps every admission's effective time (the running maximum of
// admitted nows) and admits iff fewer than N are within (now − W, ∞).
type refLog struct {
	limit  int
	period int64
	times  []int64
}

func (m *refLog) live(now int64) []int64 {
	var in []int64
	for _, e := range m.times {
		if e > now-m.period {
			in = append(in, e)
		}
	}
	return in
}

func (m *refLog) would(now int64, n int) (bool, int, time.Duration) {
	in := m.live(now)
	rem := max(m.limit-len(in), 0)
	switch {
	case n == 0:
		return true, rem, 0
	case n != 1:
		return false, rem, gcra.Never
	case len(in) < m.limit:
		return true, rem, 0
	}
	return false, rem, time.Duration(in[len(in)-m.limit] + m.period - now)
}

func (m *refLog) record(now int64, _ int) {
	if k := len(m.times); k > 0 {
		now = max(now, m.times[k-1])
	}
	m.times = append(m.times, now)
}

// A GCRA band before another band, under contention: eight goroutines ask
// one key, whose second band (5 per hour) denies nearly all of them, some
// only when they take from it after the first band admitted them. The first
// band is charged what was served, within a token (its give-backs are
// stricter by the time between an admission and its give-back), in every
// one of 20 runs.
func TestBandsRefundUnderContention(t *testing.T) {
	const workers, calls, quota = 8, 300, 100_000
	for run := range 20 {
		k, err := atomiclimit.NewKeyedRule[string](atomiclimit.Bands(atomiclimit.GCRA(gcra.Per(quota, 24*time.Hour), quota), atomiclimit.FixedWindow(5, time.Hour)),
			atomiclimit.WithSweepInterval(0))
		require.NoError(t, err)
		var served sync.WaitGroup
		var mu sync.Mutex
		n := 0
		start := make(chan struct{})
		for range workers {
			served.Add(1)
			go func() {
				defer served.Done()
				<-start
				for range calls {
					if k.Allow("k") {
						mu.Lock()
						n++
						mu.Unlock()
					}
				}
			}()
		}
		close(start)
		served.Wait()
		require.Equal(t, 5, n, "run %d: the window's 5", run)
		charged := quota - k.BandRemaining("k", 0)
		require.GreaterOrEqual(t, charged, n, "run %d: the bucket band created quota", run)
		require.LessOrEqual(t, charged, n+1, "run %d: the bucket band was charged %d for %d served", run, charged, n)
		require.Equal(t, 0, k.BandRemaining("k", 1), "run %d", run)
		k.Close()
	}
}

// Benchmarks for 1 to 4 bands on one key (the old package bands'
// BenchmarkSerial and BenchmarkParallel, renamed: core already has
// benchmarks of those names), named for benchstat:
//
//	go test . -run='^$' -bench=Bands -count=10 > new.txt
//	benchstat -col /bands new.txt
//
// path=allow admits every call (limits never reached in a run: GCRA 1/ns
// with a burst of 2^30, fixed 2^30 per hour, counter 2^23 per day, renewed
// off the clock every 2^22 calls, log 64 per ns); path=deny is denied by
// the last band, after every band's check. bands=1 is one rule, as
// Bands(rule) is.

func benchBandRules(k int, deny bool) []atomiclimit.Rule {
	all := []atomiclimit.Rule{
		atomiclimit.GCRA(gcra.Every(time.Nanosecond), 1<<30),
		atomiclimit.FixedWindowUTC(1<<30, time.Hour, 0),
		atomiclimit.SlidingCounter(1<<23, 24*time.Hour),
		atomiclimit.SlidingLog(64, time.Nanosecond),
	}
	rules := append([]atomiclimit.Rule(nil), all[:k]...)
	if deny {
		rules[k-1] = []atomiclimit.Rule{
			atomiclimit.GCRA(gcra.Every(time.Hour), 1),
			atomiclimit.FixedWindow(1, time.Hour),
			atomiclimit.SlidingCounter(1, time.Hour),
			atomiclimit.SlidingLog(1, time.Hour),
		}[k-1]
	}
	return rules
}

func benchBandsLimiter(b *testing.B, k int, deny bool) *atomiclimit.Limiter {
	l, err := atomiclimit.NewRule(atomiclimit.Bands(benchBandRules(k, deny)...))
	if err != nil {
		b.Fatal(err)
	}
	if deny && (!l.Allow() || l.Allow()) {
		b.Fatal("not drained")
	}
	return l
}

func BenchmarkBandsSerial(b *testing.B) {
	for _, path := range []string{"allow", "deny"} {
		for k := 1; k <= 4; k++ {
			b.Run(fmt.Sprintf("path=%s/bands=%d", path, k), func(b *testing.B) {
				l := benchBandsLimiter(b, k, path == "deny")
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if k >= 3 && path == "allow" && i&(1<<22-1) == 1<<22-1 {
						b.StopTimer()
						l = benchBandsLimiter(b, k, false)
						b.StartTimer()
					}
					if l.Allow() != (path == "allow") {
						b.Fatalf("call %d: wrong decision", i)
					}
				}
			})
		}
	}
}

// BenchmarkBandsParallel hits one Limiter (one hot key) from every P; the
// allow path skips the counter band, whose quota the run would exhaust.
func BenchmarkBandsParallel(b *testing.B) {
	for _, path := range []string{"allow", "deny"} {
		for _, k := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("path=%s/bands=%d", path, k), func(b *testing.B) {
				rules := benchBandRules(k, path == "deny")
				if k == 4 && path == "allow" {
					rules = append(rules[:2], rules[3]) // gcra, fixed, log
				}
				l, err := atomiclimit.NewRule(atomiclimit.Bands(rules...))
				if err != nil {
					b.Fatal(err)
				}
				if path == "deny" && (!l.Allow() || l.Allow()) {
					b.Fatal("not drained")
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						l.Allow()
					}
				})
			})
		}
	}
}
