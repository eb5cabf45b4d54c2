package atomiclimit_test

import (
	"math/rand/v2"
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
