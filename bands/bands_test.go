package bands_test

import (
	"math/rand/v2"
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

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) Now() time.Time { return t0.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) Advance(d time.Duration) time.Time {
	return t0.Add(time.Duration(c.ns.Add(int64(d))))
}

func newLimiter(t testing.TB, specs ...bands.Band) *bands.Limiter {
	t.Helper()
	l, err := bands.New(specs, bands.WithClock(&fakeClock{}))
	require.NoError(t, err)
	return l
}

type step struct {
	at        time.Duration
	n         int
	ok        bool
	remaining int
	retry     time.Duration
	band      int
}

// 2 per second (burst 2) and 5 per 10 s (fixed, from creation): the
// short band limits first, then the long one, and the result names it.
func TestBandsTimeline(t *testing.T) {
	const ms = time.Millisecond
	l := newLimiter(t, bands.GCRA(gcra.PerSecond(2), 2), bands.Fixed(5, 10*time.Second, window.AlignStart))
	for i, s := range []step{
		{at: 0, n: 1, ok: true, remaining: 1, band: 0},
		{at: 0, n: 1, ok: true, remaining: 0, band: 0},
		{at: 0, n: 1, ok: false, remaining: 0, retry: 500 * ms, band: 0},
		{at: 1000 * ms, n: 2, ok: true, remaining: 0, band: 0}, // fixed: 4 of 5
		{at: 2000 * ms, n: 2, ok: false, remaining: 1, retry: 8 * time.Second, band: 1},
		{at: 2000 * ms, n: 1, ok: true, remaining: 0, band: 1}, // ties go to the first band with the least
		{at: 5000 * ms, n: 1, ok: false, remaining: 0, retry: 5 * time.Second, band: 1},
		{at: 5000 * ms, n: 3, ok: false, remaining: 0, retry: gcra.Never, band: 0},
		{at: 10 * time.Second, n: 2, ok: true, remaining: 0, band: 0},
	} {
		d := l.DecideAt(t0.Add(s.at), s.n)
		assert.Equal(t, step{s.at, s.n, d.Allowed, d.Remaining, d.RetryAfter, d.Band}, s, "step %d", i)
	}
}

// A band that admits before another denies gives its quota back: the race
// the check phase cannot exclude, forced by skipping the check.
func TestBandsRefundOnLateDenial(t *testing.T) {
	l := newLimiter(t,
		bands.GCRA(gcra.PerSecond(1), 3),
		bands.Fixed(10, time.Minute, window.AlignStart),
		bands.Counter(10, time.Minute),
		bands.Fixed(1, time.Minute, window.AlignStart))
	require.True(t, l.AllowN(t0, 1))
	before := [4]uint64{l.Word(0), l.Word(1), l.Word(2), l.Word(3)}
	assert.False(t, l.TakeAllAt(t0, 1), "band 3 denies after 0–2 admitted")
	assert.Equal(t, before, [4]uint64{l.Word(0), l.Word(1), l.Word(2), l.Word(3)}, "every band restored exactly")
	d := l.PeekAt(t0, 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, 3, d.Band)

	// A GCRA refund behind a later admission is dropped, never applied to
	// someone else's tokens.
	g := newLimiter(t, bands.GCRA(gcra.PerSecond(1), 3), bands.Fixed(1, time.Minute, window.AlignStart))
	require.True(t, g.AllowN(t0, 1))
	assert.False(t, g.TakeAllAt(t0, 1))
	assert.Equal(t, uint64(time.Second), g.Word(0), "TAT back to one token spent")
}

// A log band must be last and alone; bad bands report both sentinels.
func TestBandsErrors(t *testing.T) {
	_, err := bands.New(nil)
	assert.ErrorIs(t, err, bands.ErrNoBands)
	many := make([]bands.Band, bands.MaxBands+1)
	for i := range many {
		many[i] = bands.GCRA(gcra.PerSecond(1), 1)
	}
	_, err = bands.New(many)
	assert.ErrorIs(t, err, bands.ErrTooManyBands)
	_, err = bands.New([]bands.Band{bands.Log(3, time.Second), bands.GCRA(gcra.PerSecond(1), 1)})
	assert.ErrorIs(t, err, bands.ErrLogNotLast)
	_, err = bands.New([]bands.Band{bands.Log(3, time.Second), bands.Log(3, time.Minute)})
	assert.ErrorIs(t, err, bands.ErrLogNotLast)
	_, err = bands.New([]bands.Band{bands.GCRA(gcra.PerSecond(1), 0)})
	assert.ErrorIs(t, err, bands.ErrInvalidBand)
	assert.ErrorIs(t, err, gcra.ErrInvalidBurst)
	assert.Contains(t, err.Error(), "bands: ")
	_, err = bands.New([]bands.Band{bands.GCRA(gcra.PerSecond(1), 1), bands.Counter(1<<20, time.Second)})
	assert.ErrorIs(t, err, window.ErrOverflow)
	_, err = bands.New([]bands.Band{{}})
	assert.ErrorIs(t, err, bands.ErrInvalidBand)
	_, err = bands.New([]bands.Band{bands.GCRA(gcra.Every(time.Microsecond), 2)}, bands.WithCoarseClock())
	assert.ErrorIs(t, err, atomicbucket.ErrCoarseTick)
	l, err := bands.New([]bands.Band{bands.GCRA(gcra.PerSecond(10), 100), bands.Fixed(10, time.Hour, window.AlignUTC(0))}, bands.WithCoarseClock())
	require.NoError(t, err)
	assert.True(t, l.Allow())
}

// randomBands returns GCRA, fixed and log bands (log last, if any) and
// their reference models, with small limits so that every band binds.
func randomBands(rng *rand.Rand, start int64) ([]bands.Band, *refBands) {
	var specs []bands.Band
	var refs []refBand
	for k := 1 + rng.IntN(3); k > 0; k-- {
		switch rng.IntN(2) {
		case 0:
			iv, b := 1+rng.Int64N(200), 1+rng.IntN(4)
			specs = append(specs, bands.GCRA(gcra.Every(time.Duration(iv)), b))
			refs = append(refs, &refGCRA{interval: iv, burst: int64(b)})
		case 1:
			n, w := 1+rng.IntN(6), 64+rng.Int64N(1000)
			specs = append(specs, bands.Fixed(n, time.Duration(w), window.AlignStart))
			refs = append(refs, &refFixed{limit: n, period: w, start: start, counts: map[int64]int{}})
		}
	}
	if rng.IntN(2) == 0 {
		n, w := 1+rng.IntN(5), 1+rng.Int64N(1000)
		specs = append(specs, bands.Log(n, time.Duration(w)))
		refs = append(refs, &refLog{limit: n, period: w})
	}
	return specs, &refBands{bands: refs}
}

// checkAgainstRef runs (now, n) steps through a Limiter built from specs
// and through the references, and checks RetryAfter by its definition.
func checkAgainstRef(t *testing.T, specs []bands.Band, ref *refBands, nows []int64, ns []int) {
	t.Helper()
	l := newLimiter(t, specs...)
	for i := range nows {
		at := t0.Add(time.Duration(nows[i]))
		d := l.DecideAt(at, ns[i])
		r := ref.request(nows[i], ns[i])
		require.Equal(t, r, refResult{d.Allowed, d.Remaining, d.RetryAfter}, "step %d: now %d n %d (%v)", i, nows[i], ns[i], specs)
		if !d.Allowed && d.RetryAfter != gcra.Never {
			require.True(t, l.PeekAt(at.Add(d.RetryAfter), ns[i]).Allowed, "step %d: admitted after RetryAfter", i)
			require.False(t, l.PeekAt(at.Add(d.RetryAfter-1), ns[i]).Allowed, "step %d: denied 1ns before", i)
		}
	}
}

func TestBandsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 300; trial++ {
		specs, ref := randomBands(rng, 0)
		var nows []int64
		var ns []int
		now := int64(0)
		for i := 0; i < 100; i++ {
			now = max(now+rng.Int64N(200)-40, 0)
			nows = append(nows, now)
			ns = append(ns, 1+rng.IntN(3)-rng.IntN(2))
		}
		checkAgainstRef(t, specs, ref, nows, ns)
	}
}

func TestBandsAllocateNothing(t *testing.T) {
	l, err := bands.New([]bands.Band{
		bands.GCRA(gcra.PerSecond(20), 20),
		bands.Fixed(1000, time.Hour, window.AlignUTC(0)),
		bands.Counter(10000, 24*time.Hour),
		bands.Log(100, time.Minute),
	})
	require.NoError(t, err)
	now := time.Now()
	for name, fn := range map[string]func(){
		"allow":  func() { l.Allow() },
		"allowN": func() { l.AllowN(now, 1) },
		"decide": func() { l.Decide(1) },
		"peek":   func() { l.PeekAt(now, 1) },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, fn), name)
	}
}

// A log band's peek describes the state after the hypothetical admission,
// so Peek equals the Decide that follows at the same instant on a t0…t9
// timeline, for a log band alone and behind a GCRA band, single-key and
// keyed. Before the fix the log band's peek reported one token more.
func TestLogBandPeekMatchesDecide(t *testing.T) {
	ms := time.Millisecond
	timeline := []time.Duration{0, 0, 400 * ms, 999 * ms, time.Second, 1300 * ms, 1400 * ms, 500 * ms, 1800 * ms, 5 * time.Second}
	for name, specs := range map[string][]bands.Band{
		"log":      {bands.Log(3, time.Second)},
		"gcra+log": {bands.GCRA(gcra.PerSecond(100), 50), bands.Log(3, time.Second)},
		"log N=1":  {bands.Log(1, time.Second)},
	} {
		l := newLimiter(t, specs...)
		k, err := bands.NewKeyed[string](specs, bands.WithClock(&fakeClock{}), bands.WithSweepInterval(0))
		require.NoError(t, err)
		for i, at := range timeline {
			now := t0.Add(at)
			peek := l.PeekAt(now, 1)
			assert.Equal(t, peek, l.DecideAt(now, 1), "%s step %d (at %v): peek, then decide", name, i, at)
			kpeek := k.PeekAt("a", now, 1)
			assert.Equal(t, kpeek, k.DecideAt("a", now, 1), "%s step %d (at %v): keyed peek, then decide", name, i, at)
		}
	}
}

// n = 0 is a peek under bands too: admitted by every band kind (a log band
// included), counting nothing, creating no key. Before the fix it was denied.
func TestZeroNIsAnAdmittedPeek(t *testing.T) {
	specs := []bands.Band{bands.GCRA(gcra.PerSecond(10), 2), bands.Fixed(2, time.Second, window.AlignStart),
		bands.Counter(2, time.Second), bands.Log(2, time.Second)}
	l := newLimiter(t, specs...)
	k, err := bands.NewKeyed[string](specs, bands.WithClock(&fakeClock{}), bands.WithSweepInterval(0))
	require.NoError(t, err)
	for i, at := range []time.Duration{0, 0, 300 * time.Millisecond, 100 * time.Millisecond} { // t0…t3
		now := t0.Add(at)
		l.AllowN(now, 1)
		before := l.PeekAt(now, 1)
		assert.True(t, l.AllowN(now, 0), "step %d: AllowN(0)", i)
		d := l.DecideAt(now, 0)
		assert.True(t, d.Allowed, "step %d: DecideAt(0)", i)
		assert.Zero(t, d.RetryAfter, "step %d", i)
		assert.True(t, l.PeekAt(now, 0).Allowed, "step %d: PeekAt(0)", i)
		assert.Equal(t, before, l.PeekAt(now, 1), "step %d: nothing counted", i)
		assert.Equal(t, gcra.Never, l.DecideAt(now, -1).RetryAfter, "step %d: n < 0", i)
		assert.True(t, k.AllowN("new", now, 0), "step %d: keyed", i)
		assert.True(t, k.DecideAt("new", now, 0).Allowed, "step %d: keyed", i)
		assert.Zero(t, k.Len(), "step %d: n = 0 creates no key", i)
	}
}
