package algo_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// Bands built directly from the algorithms, every window starting at 0 (the
// limiter's epoch), as the limiters build them.

func gcraBand(t testing.TB, l gcra.Limit, burst int) algo.Algorithm {
	t.Helper()
	p, err := gcra.NewParams(l, burst)
	require.NoError(t, err)
	return algo.NewGCRA(p)
}

func fixedBand(t testing.TB, n int, period time.Duration) algo.Algorithm {
	t.Helper()
	p, err := window.NewFixedParams(n, period, 0)
	require.NoError(t, err)
	return window.FixedAlgorithm(p)
}

func counterBand(t testing.TB, n int, period time.Duration) algo.Algorithm {
	t.Helper()
	p, err := window.NewCounterParams(n, period, 0)
	require.NoError(t, err)
	return window.CounterAlgorithm(p)
}

func logBand(t testing.TB, n int, period time.Duration) algo.Algorithm {
	t.Helper()
	p, err := window.NewLogParams(n, period)
	require.NoError(t, err)
	return window.LogAlgorithm(p)
}

// setState is a Set with its state words and floors, initialised.
type setState struct {
	set    *algo.Set
	words  []atomic.Uint64
	floors []atomic.Uint64
	st     algo.State
}

func newSetState(t testing.TB, algs ...algo.Algorithm) *setState {
	t.Helper()
	s, err := algo.NewSet(zeroClock{}, algs...)
	require.NoError(t, err)
	ss := &setState{set: s, words: make([]atomic.Uint64, s.Words()), floors: make([]atomic.Uint64, s.Len())}
	ss.st = algo.State{Word: &ss.words[0], Rest: ss.words[1:]}
	s.Init(ss.st, ss.floors)
	return ss
}

// word returns band i's first state word.
func (ss *setState) word(i int) uint64 { return ss.set.Sub(ss.st, i).Word.Load() }

// all returns every state word of the set.
func (ss *setState) all() []uint64 {
	out := make([]uint64, len(ss.words))
	for i := range ss.words {
		out[i] = ss.words[i].Load()
	}
	return out
}

func (ss *setState) floorValues() []uint64 {
	out := make([]uint64, len(ss.floors))
	for i := range ss.floors {
		out[i] = ss.floors[i].Load()
	}
	return out
}

type setStep struct {
	at        time.Duration
	n         int
	ok        bool
	remaining int
	retry     time.Duration
	band      int
}

// 2 per second (burst 2) and 5 per 10 s (fixed, from 0): the short band
// limits first, then the long one, and Set.Decide names the band that binds
// (the limiters drop the index; see core's TestBandsTimeline).
func TestSetDecideTimeline(t *testing.T) {
	const ms = time.Millisecond
	ss := newSetState(t, gcraBand(t, gcra.Per(2, time.Second), 2), fixedBand(t, 5, 10*time.Second))
	for i, s := range []setStep{
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
		d, band := ss.set.Decide(ss.st, int64(s.at), s.n, false)
		assert.Equal(t, s, setStep{s.at, s.n, d.Allowed, d.Remaining, d.RetryAfter, band}, "step %d", i)
	}
}

// A band that admits before another denies gives its quota back: the race
// the check phase cannot exclude, forced by skipping the check.
func TestSetRefundOnLateDenial(t *testing.T) {
	ss := newSetState(t,
		gcraBand(t, gcra.Per(1, time.Second), 3),
		fixedBand(t, 10, time.Minute),
		counterBand(t, 10, time.Minute),
		fixedBand(t, 1, time.Minute))
	require.True(t, ss.set.Admit(ss.st, 0, 1))
	before := [4]uint64{ss.word(0), ss.word(1), ss.word(2), ss.word(3)}
	assert.False(t, ss.set.TakeAll(ss.st, 0, 1), "band 3 denies after 0–2 admitted")
	assert.Equal(t, before, [4]uint64{ss.word(0), ss.word(1), ss.word(2), ss.word(3)}, "every band restored exactly")
	d, band := ss.set.Decide(ss.st, 0, 1, true)
	assert.False(t, d.Allowed)
	assert.Equal(t, 3, band)

	// A GCRA refund behind a later admission is dropped, never applied to
	// someone else's tokens.
	g := newSetState(t, gcraBand(t, gcra.Per(1, time.Second), 3), fixedBand(t, 1, time.Minute))
	require.True(t, g.set.Admit(g.st, 0, 1))
	assert.False(t, g.set.TakeAll(g.st, 0, 1))
	assert.Equal(t, uint64(time.Second), g.word(0), "TAT back to one token spent")
}

// A band that cannot refund (the log) is allowed only last, and only once;
// a set holds 1 to MaxBands bands.
func TestNewSetErrors(t *testing.T) {
	_, err := algo.NewSet(zeroClock{})
	assert.Error(t, err)
	many := make([]algo.Algorithm, algo.MaxBands+1)
	for i := range many {
		many[i] = gcraBand(t, gcra.Per(1, time.Second), 1)
	}
	_, err = algo.NewSet(zeroClock{}, many...)
	assert.Error(t, err)
	_, err = algo.NewSet(zeroClock{}, many[:algo.MaxBands]...)
	assert.NoError(t, err)
	_, err = algo.NewSet(zeroClock{}, logBand(t, 3, time.Second), gcraBand(t, gcra.Per(1, time.Second), 1))
	assert.ErrorIs(t, err, algo.ErrLogNotLast)
	_, err = algo.NewSet(zeroClock{}, logBand(t, 3, time.Second), logBand(t, 3, time.Minute))
	assert.ErrorIs(t, err, algo.ErrLogNotLast)
	_, err = algo.NewSet(zeroClock{}, gcraBand(t, gcra.Per(1, time.Second), 1), logBand(t, 3, time.Minute))
	assert.NoError(t, err)
}

// recorder wraps a band and logs the eviction steps the Set runs on it:
// "idle i" (with the floor it reported) and "retire i" (with every floor as
// the Retire found them: raised already, or not).
type recorder struct {
	algo.Algorithm
	i      int
	events *[]string
	floors *[]atomic.Uint64
	idle   *[algo.MaxBands]uint64 // the floor each band's Idle reported
	atRet  *[]uint64              // the floors when Retire ran
}

func (r *recorder) Idle(s algo.State, now int64) (algo.Mark, int64, uint64, bool, bool) {
	m, from, floor, idle, live := r.Algorithm.Idle(s, now)
	*r.events = append(*r.events, fmt.Sprintf("idle %d", r.i))
	r.idle[r.i] = floor
	return m, from, floor, idle, live
}

func (r *recorder) Retire(s algo.State, m algo.Mark) bool {
	*r.events = append(*r.events, fmt.Sprintf("retire %d", r.i))
	fl := *r.floors
	for i := range fl {
		*r.atRet = append(*r.atRet, fl[i].Load())
	}
	return r.Algorithm.Retire(s, m)
}

// Set's removal (see the proof on algo.Set) idles the last band first, then
// the others last to first; raises every band's floor to what its Idle
// reported; and only then retires, the last band and no other. A Set that
// retired an earlier band, or raised a floor after retiring, fails here.
func TestSetRetireOrder(t *testing.T) {
	sets := map[string]func() []algo.Algorithm{
		"gcra+fixed+counter": func() []algo.Algorithm {
			return []algo.Algorithm{gcraBand(t, gcra.Every(10*time.Millisecond), 3), fixedBand(t, 5, 100*time.Millisecond), counterBand(t, 4, 50*time.Millisecond)}
		},
		"counter+fixed+gcra": func() []algo.Algorithm {
			return []algo.Algorithm{counterBand(t, 4, 50*time.Millisecond), fixedBand(t, 5, 100*time.Millisecond), gcraBand(t, gcra.Every(10*time.Millisecond), 3)}
		},
		"gcra+fixed+log": func() []algo.Algorithm {
			return []algo.Algorithm{gcraBand(t, gcra.Every(10*time.Millisecond), 3), fixedBand(t, 5, 100*time.Millisecond), logBand(t, 3, 60*time.Millisecond)}
		},
	}
	for name, mk := range sets {
		for _, how := range []string{"RetireIdle", "RetireStale"} {
			t.Run(name+"/"+how, func(t *testing.T) {
				var (
					events []string
					floors []atomic.Uint64
					idle   [algo.MaxBands]uint64
					atRet  []uint64
				)
				algs := mk()
				for i, a := range algs {
					algs[i] = &recorder{Algorithm: a, i: i, events: &events, floors: &floors, idle: &idle, atRet: &atRet}
				}
				ss := newSetState(t, algs...)
				floors = ss.floors
				last := ss.set.Len() - 1
				for _, at := range []int64{0, int64(3 * time.Millisecond), int64(7 * time.Millisecond)} {
					require.True(t, ss.set.Admit(ss.st, at, 1))
				}

				// Not idle yet: nothing retired, no floor raised.
				busy := ss.all()
				events = nil
				require.False(t, ss.set.RetireIdle(ss.st, ss.floors, int64(8*time.Millisecond)))
				assert.Equal(t, busy, ss.all(), "a state that is not idle keeps every word")
				assert.Equal(t, make([]uint64, ss.set.Len()), ss.floorValues(), "no floor raised for a state that is not idle")
				for _, e := range events {
					assert.NotContains(t, e, "retire", "nothing retired while busy")
				}

				now := int64(time.Second)
				before := ss.all()
				events = nil
				var ok bool
				if how == "RetireIdle" {
					ok = ss.set.RetireIdle(ss.st, ss.floors, now)
				} else {
					var wasIdle bool
					ok, wasIdle = ss.set.RetireStale(ss.st, ss.floors, now, now)
					assert.True(t, wasIdle)
				}
				require.True(t, ok)

				// Step 1: every band idled, the last first, then last to first.
				var want []string
				for i := last; i >= 0; i-- {
					want = append(want, fmt.Sprintf("idle %d", i))
				}
				require.GreaterOrEqual(t, len(events), len(want))
				assert.Equal(t, want, events[:len(want)], "idle the last band first, then the others last to first")
				// Step 3: one retirement, of the last band.
				assert.Equal(t, []string{fmt.Sprintf("retire %d", last)}, events[len(want):], "retire the last band, and only it")
				// Step 2 came before it: every floor raised already.
				// When Retire ran, every floor was already what Idle reported.
				require.Len(t, atRet, ss.set.Len())
				for i := range ss.set.Len() {
					assert.Equal(t, idle[i], atRet[i], "band %d: floor at retirement", i)
					assert.Positive(t, idle[i], "band %d reported a floor (the test needs one to tell a raise)", i)
				}
				assert.Equal(t, atRet, ss.floorValues(), "nothing raised after the retirement")

				// The last band retired; every earlier band untouched.
				assert.True(t, ss.set.IsRetired(ss.st))
				assert.True(t, ss.set.Band(last).IsRetired(ss.set.Sub(ss.st, last)))
				for i := range last {
					sub := ss.set.Sub(ss.st, i)
					assert.False(t, ss.set.Band(i).IsRetired(sub), "band %d retired", i)
				}
				after := ss.all()
				lastFirst := ss.set.Words() - ss.set.Band(last).Words()
				assert.Equal(t, before[:lastFirst], after[:lastFirst], "the words of every band but the last unchanged")

				// A retired state denies without writing, and is not retired twice.
				assert.False(t, ss.set.Admit(ss.st, now, 1))
				assert.Equal(t, after, ss.all())
				assert.False(t, ss.set.RetireIdle(ss.st, ss.floors, now))
			})
		}
	}
}

// A fresh state initialised from the raised floors is never fuller than the
// retired one: each band admits no more than it would have on the old state.
func TestSetFloorsCarryOver(t *testing.T) {
	algs := func() []algo.Algorithm {
		return []algo.Algorithm{gcraBand(t, gcra.Every(10*time.Millisecond), 3), fixedBand(t, 5, 100*time.Millisecond), counterBand(t, 4, 50*time.Millisecond)}
	}
	old := newSetState(t, algs()...)
	ref := newSetState(t, algs()...) // the same traffic, never retired
	for _, at := range []int64{0, 1, 2, int64(40 * time.Millisecond)} {
		require.Equal(t, ref.set.Admit(ref.st, at, 1), old.set.Admit(old.st, at, 1))
	}
	// Idle from 90ms on (the counter's window is two periods... from its
	// last admission); retire it as soon as RetireIdle agrees.
	var at int64
	for at = int64(40 * time.Millisecond); !old.set.RetireIdle(old.st, old.floors, at); at += int64(time.Millisecond) {
		require.Less(t, at, int64(time.Second), "never idle")
	}
	fresh := make([]atomic.Uint64, old.set.Words())
	st := algo.State{Word: &fresh[0], Rest: fresh[1:]}
	old.set.Init(st, old.floors)
	for now := at; now < at+int64(300*time.Millisecond); now += int64(time.Millisecond) {
		for range 3 {
			want := ref.set.Admit(ref.st, now, 1)
			assert.Equal(t, want, old.set.Admit(st, now, 1), "at %v: the replacement decides as the kept state", time.Duration(now))
		}
	}
}

// zeroClock reads 0.
type zeroClock struct{}

func (zeroClock) Now() int64 { return 0 }

// interposed is a band's WordRule that, on its first decision, first lets
// another request through. Run by TakeAll (a take whose check passed, every
// band taken by its loop), that is the interleaving in which a request
// takes from the first band and finds the second band's last token taken
// by another request that also took from the first band after it.
type interposed struct {
	algo.WordRule
	calls int
	other func()
}

func (r *interposed) AdmitAt(state uint64, m algo.Moment, n int) (uint64, bool) {
	if r.calls++; r.calls == 1 {
		r.other()
	}
	return r.WordRule.AdmitAt(state, m, n)
}

// A request that the second band denies at its take gives back what the
// first band (GCRA) took, although another request took from that band in
// between: the first band holds exactly the other request's admission.
func TestSetGivesBackPastALaterAdmission(t *testing.T) {
	p, err := window.NewFixedParams(1, time.Hour, 0)
	require.NoError(t, err)
	fixed := &interposed{WordRule: &p}
	ss := newSetState(t, gcraBand(t, gcra.Every(time.Second), 10), algo.Word(fixed))
	other, err := algo.NewSet(zeroClock{}, gcraBand(t, gcra.Every(time.Second), 10), window.FixedAlgorithm(p))
	require.NoError(t, err)
	fixed.other = func() {
		require.True(t, other.Admit(ss.st, 0, 1), "the other request takes from both bands")
	}
	require.False(t, ss.set.TakeAll(ss.st, 0, 1), "the second band's token went to the other request")
	d := ss.set.Band(0).Decide(ss.set.Sub(ss.st, 0), 0, 0, true)
	assert.Equal(t, 9, d.Remaining, "the first band holds the other request's token only")
}

// A band's take stores the word its check decided only if the word is still
// the one the check loaded: when another request changed both bands in
// between (here, during the check of the second band, after its load),
// each band decides again on the word as it is, and both requests are
// counted in both.
func TestSetTakesAfterTheWordsChanged(t *testing.T) {
	p, err := window.NewFixedParams(2, time.Hour, 0)
	require.NoError(t, err)
	fixed := &interposed{WordRule: &p}
	ss := newSetState(t, gcraBand(t, gcra.Every(time.Second), 10), algo.Word(fixed))
	other, err := algo.NewSet(zeroClock{}, gcraBand(t, gcra.Every(time.Second), 10), window.FixedAlgorithm(p))
	require.NoError(t, err)
	fixed.other = func() {
		require.True(t, other.Admit(ss.st, 0, 1), "the other request takes from both bands")
	}
	require.True(t, ss.set.Admit(ss.st, 0, 1), "one token is left in each band for this request")
	for i, want := range []int{8, 0} {
		d := ss.set.Band(i).Decide(ss.set.Sub(ss.st, i), 0, 0, true)
		assert.Equal(t, want, d.Remaining, "band %d counts both requests", i)
	}
}

// atClock is a Clock that always reads its value.
type atClock int64

func (c atClock) Now() int64 { return int64(c) }

// A far state behind a band that denies for now (found by review): X,
// stamped 30h ahead of the clock, moves the day window to day 2 and is
// given back, and a window's give-back keeps its window; Z, stamped 18h
// ahead, is given back too, and leaves band 2 where it was. At the clock
// band 1 denies, exhausted by Q (not far), while the whole state is idle
// 52h after the clock, more than twice the longest IdleAfter (48h). A
// Suspect that looked only at the band that denied missed it.
func TestSuspectSeesFarBandBehindDenial(t *testing.T) {
	h := int64(time.Hour)
	clock := 20 * h
	s, err := algo.NewSet(atClock(clock),
		fixedBand(t, 100, 24*time.Hour),          // IdleAfter 24h
		gcraBand(t, gcra.Per(1, 3*time.Hour), 6), // 18h
		gcraBand(t, gcra.Per(1, 4*time.Hour), 6)) // 24h
	require.NoError(t, err)
	words := make([]atomic.Uint64, s.Words())
	st := algo.State{Word: &words[0], Rest: words[1:]}
	s.Init(st, make([]atomic.Uint64, s.Len()))

	x, ok := s.Check(st, 50*h, 6)
	require.True(t, ok)
	require.True(t, x.Take()) // band 0: window 2, count 6
	q, ok := s.Check(st, clock, 6)
	require.True(t, ok)
	require.True(t, q.Take()) // band 0: counted in window 2
	require.True(t, q.Take()) // band 1: TAT 38h
	z, ok := s.Check(st, 38*h, 6)
	require.True(t, ok)
	require.True(t, z.Take())  // band 0
	require.True(t, z.Take())  // band 1: TAT 56h
	require.False(t, x.Take()) // band 1 denies X: band 0 given back
	require.True(t, q.Take())  // band 2: TAT 44h; Q admitted
	require.False(t, z.Take()) // band 2 denies Z: bands 1 and 0 given back

	from, live := s.IdleFrom(st)
	require.True(t, live)
	var reach atomic.Int64
	reach.Store(2 * 24 * h) // the rule's far: twice the longest IdleAfter
	require.True(t, algo.Far(from, clock, atClock(clock), &reach), "idle %v after the clock", time.Duration(from-clock))

	require.False(t, s.Admit(st, clock, 1), "band 1 denies, exhausted")
	assert.True(t, s.Suspect(st, clock), "a far state behind the denial")
}

// A set of MaxBands bands, wider than a plan holds (the bands after the
// planned ones are taken by their loops), decides as the plain model of
// bands: a request is admitted iff each band, alone, would admit it, and
// then every band records it. Each band's model is a set of that one
// band; random sizes and times, each request a little later or earlier
// than the one before (stale times included).
func TestSetWiderThanItsPlan(t *testing.T) {
	const ms = time.Millisecond
	algs := func() []algo.Algorithm {
		return []algo.Algorithm{
			gcraBand(t, gcra.Per(20, time.Second), 8),
			fixedBand(t, 30, 2*time.Second),
			counterBand(t, 40, 3*time.Second),
			gcraBand(t, gcra.Per(5, time.Second), 12),
			fixedBand(t, 25, time.Second),
			counterBand(t, 60, 5*time.Second),
			gcraBand(t, gcra.Per(50, time.Second), 3),
			logBand(t, 10, 500*ms),
		}
	}
	wide := newSetState(t, algs()...)
	require.Equal(t, algo.MaxBands, wide.set.Len())
	var model []*setState
	for _, a := range algs() {
		model = append(model, newSetState(t, a))
	}
	rng := rand.New(rand.NewPCG(31, 4))
	now := int64(0)
	admitted := 0
	for i := range 20_000 {
		now = max(now+int64(rng.IntN(40))*int64(ms)/4-int64(2*ms), 0)
		n := rng.IntN(3)
		want := true
		for _, m := range model {
			_, ok := m.set.Check(m.st, now, n)
			want = want && ok
		}
		if want {
			for _, m := range model {
				require.True(t, m.set.Admit(m.st, now, n))
			}
			admitted++
		}
		require.Equal(t, want, wide.set.Admit(wide.st, now, n), "request %d: %d at %v", i, n, time.Duration(now))
	}
	for b, m := range model {
		sub := wide.set.Sub(wide.st, b)
		words := []uint64{sub.Word.Load()}
		for i := range sub.Rest {
			words = append(words, sub.Rest[i].Load())
		}
		assert.Equal(t, m.all(), words, "band %d's state", b)
	}
	t.Logf("%d of 20000 admitted", admitted)
}
