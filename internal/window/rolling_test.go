package window_test

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// refRolling is the reference rolling window: a map from slice to count
// under a mutex, every figure found by brute force over the slices. The
// head (top) is the latest slice anything was admitted in; a stale now is
// decided in it.
type refRolling struct {
	mu       sync.Mutex
	q, c, k  int // c: the per-slice cap, q when there is none
	p, start int64
	counts   map[int64]int
	top      int64
}

func newRefRolling(q, k, perSlice int, slice time.Duration, start int64, floor int64) *refRolling {
	c := q
	if perSlice > 0 {
		c = perSlice
	}
	return &refRolling{q: q, c: c, k: k, p: int64(slice), start: start, counts: map[int64]int{}, top: floor}
}

func (m *refRolling) slice(now int64) int64 { return max(now-m.start, 0) / m.p }

// total counts the slices (u−K, s] with add more in slice s.
func (m *refRolling) total(u, s int64, add int) int {
	t := 0
	for j := u - int64(m.k) + 1; j <= s; j++ {
		t += m.counts[j]
		if j == s {
			t += add
		}
	}
	return t
}

// fit returns the first slice u > s whose window holds need more, counting
// add more in s.
func (m *refRolling) fit(s int64, add, need int) int64 {
	for u := s + 1; ; u++ {
		if m.total(u, s, add)+need <= m.q {
			return u
		}
	}
}

func (m *refRolling) at(u, now int64) time.Duration { return time.Duration(m.start + u*m.p - now) }

// decide returns the decision and, for a stored admission, its slice (−1
// otherwise).
func (m *refRolling) decide(now int64, n int, peek bool) (gcra.Decision, int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := max(m.slice(now), m.top)
	valid := n >= 0 && n <= m.c
	var d gcra.Decision
	d.Allowed = valid && m.counts[s]+n <= m.c && m.total(s, s, 0)+n <= m.q
	switch {
	case !valid:
		d.RetryAfter = gcra.Never
	case !d.Allowed:
		d.RetryAfter = m.at(m.fit(s, 0, n), now)
	}
	add, stored := 0, int64(-1)
	if d.Allowed {
		add = n
		if !peek && n > 0 {
			m.counts[s] += n
			m.top, add, stored = s, 0, s
		}
	}
	d.Remaining = max(min(m.q-m.total(s, s, add), m.c-m.counts[s]-add), 0)
	for j := s; j > s-int64(m.k); j-- {
		if m.counts[j]+add > 0 && (j == s || m.counts[j] > 0) {
			d.ResetAfter = max(m.at(j+int64(m.k), now), 0)
			break
		}
	}
	if d.Remaining == 0 {
		d.TokenAfter = m.at(m.fit(s, add, 1), now)
	}
	return d, stored
}

func (m *refRolling) refund(slice int64, n int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if slice != m.top || n < 1 || n > m.c || m.counts[slice] < n {
		return false
	}
	m.counts[slice] -= n
	return true
}

// idle returns the first slice from which no counted slice is in the window.
func (m *refRolling) idle() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	for j := m.top; j > m.top-int64(m.k); j-- {
		if m.counts[j] > 0 {
			return j + int64(m.k)
		}
	}
	return m.top
}

func mustRolling(t testing.TB, q int, w, p time.Duration, perSlice int, start int64) *window.RollingParams {
	t.Helper()
	rp, err := window.NewRollingParams(q, w, p, perSlice, start)
	require.NoError(t, err)
	return &rp
}

func newWords(p *window.RollingParams) []atomic.Uint64 {
	w := make([]atomic.Uint64, p.Words())
	p.Init(w, 0)
	return w
}

type rollStep struct {
	at                  time.Duration
	n                   int
	peek                bool
	ok                  bool
	remaining           int
	retry, reset, token time.Duration
}

// 10 per rolling 4 hours, recalculated every hour, at most 4 per hour: a
// timeline with the cap, the window, a stale now, a peek, bad n and a long
// idle. The figures are worked out by hand.
func TestRollingTimeline(t *testing.T) {
	const h, m = time.Hour, time.Minute
	p := mustRolling(t, 10, 4*h, h, 4, 0)
	words := newWords(p)
	ref := newRefRolling(10, 4, 4, h, 0, 0)
	for i, s := range []rollStep{
		{at: 0, n: 4, ok: true, reset: 4 * h, token: h},                             // slice 0 full (cap)
		{at: 30 * m, n: 1, retry: 30 * m, reset: 3*h + 30*m, token: 30 * m},         // the cap: next slice
		{at: h, n: 4, ok: true, reset: 4 * h, token: h},                             // 8 in the window
		{at: 2 * h, n: 3, remaining: 2, retry: 2 * h, reset: 3 * h},                 // 11 > 10 until slice 0 leaves at 4h
		{at: 2 * h, n: 2, ok: true, reset: 4 * h, token: 2 * h},                     // 10: the window is full
		{at: 2*h + 30*m, n: 4, retry: h + 30*m, reset: 3*h + 30*m, token: h + 30*m}, // slice 1's 4 are needed: it stays
		{at: 30 * m, n: 1, retry: 3*h + 30*m, reset: 5*h + 30*m, token: 3*h + 30*m}, // stale now: decided in slice 2
		{at: 3*h + 59*m, n: 1, retry: m, reset: 2*h + m, token: m},                  // slice 3 is still full
		{at: 4 * h, n: 4, ok: true, reset: 4 * h, token: h},                         // slice 0 has left: 6 + 4
		{at: 4 * h, n: 0, peek: false, ok: true, reset: 4 * h, token: h},            // n = 0: an admitted peek
		{at: 4 * h, n: 5, retry: gcra.Never, reset: 4 * h, token: h},                // n > C: never
		{at: 4 * h, n: -1, retry: gcra.Never, reset: 4 * h, token: h},               // n < 0: never
		{at: 10 * h, n: 3, peek: true, ok: true, remaining: 1, reset: 4 * h},        // a peek reports the state after
		{at: 10 * h, n: 4, ok: true, reset: 4 * h, token: h},                        // long idle: the whole quota
		{at: 10*h + 30*m, n: 1, retry: 30 * m, reset: 3*h + 30*m, token: 30 * m},    // the cap again
		{at: 11 * h, n: 1, ok: true, remaining: 3, reset: 4 * h},                    // next slice
		{at: 9 * h, n: 3, ok: true, reset: 6 * h, token: 3 * h},                     // stale: counted in slice 11
		{at: 14*h + 1, n: 4, ok: true, reset: 4*h - 1, token: h - 1},                // slice 10 has left
		{at: 14*h + 1, n: 1, retry: h - 1, reset: 4*h - 1, token: h - 1},            // cap of slice 14
		{at: 15 * h, n: 2, ok: true, remaining: 2, reset: 4 * h},                    // 6 of 10, 2 of 4
		{at: 15 * h, n: 3, remaining: 2, retry: h, reset: 4 * h},                    // the cap, not the window
		{at: 16 * h, n: 4, ok: true, reset: 4 * h, token: 2 * h},                    // 10 of 10
		{at: 17 * h, n: 1, retry: h, reset: 3 * h, token: h},                        // until slice 13 leaves
	} {
		d := p.Decide(words, int64(s.at), s.n, s.peek)
		want := gcra.Decision{Allowed: s.ok, Remaining: s.remaining, RetryAfter: s.retry, ResetAfter: s.reset, TokenAfter: s.token}
		r, _ := ref.decide(int64(s.at), s.n, s.peek)
		assert.Equal(t, want, d, "step %d (at %v, n %d)", i, s.at, s.n)
		assert.Equal(t, r, d, "step %d (at %v, n %d): reference", i, s.at, s.n)
	}
}

func TestRollingErrors(t *testing.T) {
	h := time.Hour
	for _, tc := range []struct {
		q, perSlice int
		w, p        time.Duration
		start       int64
		want        error
	}{
		{0, 0, h, h, 0, window.ErrInvalidLimit},
		{10, -1, h, h, 0, window.ErrInvalidLimit},
		{10, 11, h, h, 0, window.ErrInvalidLimit},
		{10, 0, 0, h, 0, window.ErrInvalidPeriod},
		{10, 0, h, 0, 0, window.ErrInvalidPeriod},
		{10, 0, h, 2 * h, 0, window.ErrInvalidPeriod},
		{10, 0, 3 * h, 2 * h, 0, window.ErrInvalidPeriod},                    // not a multiple
		{10, 0, 1025 * time.Second, time.Second, 0, window.ErrInvalidPeriod}, // K > 1024
		{10, 0, gcra.MaxSpan + 1, gcra.MaxSpan + 1, 0, window.ErrInvalidPeriod},
		{10, 0, h, h, -int64(h) - 1, window.ErrInvalidPeriod},
		{1 << 30, 0, 1024 * time.Microsecond, time.Microsecond, 0, window.ErrOverflow}, // 30 count bits; 1µs slices leave 13
	} {
		_, err := window.NewRollingParams(tc.q, tc.w, tc.p, tc.perSlice, tc.start)
		assert.ErrorIs(t, err, tc.want, "%+v", tc)
	}
	p := mustRolling(t, 1<<20, 1024*time.Second, time.Second, 1000, -int64(time.Second))
	assert.Equal(t, []any{1 << 20, 1024 * time.Second, time.Second, 1000, 1025},
		[]any{p.Limit(), p.Window(), p.Slice(), p.PerSlice(), p.Words()})
	assert.Equal(t, 0, mustRolling(t, 5, h, h, 0, 0).PerSlice())
}

// Words that are not a state for the params, and zero params, deny without
// panicking and store nothing.
func TestRollingBadWords(t *testing.T) {
	p := mustRolling(t, 5, 4*time.Second, time.Second, 0, 0)
	var zero window.RollingParams
	for name, tc := range map[string]struct {
		p     *window.RollingParams
		words []atomic.Uint64
	}{
		"nil": {p, nil}, "empty": {p, []atomic.Uint64{}}, "short": {p, make([]atomic.Uint64, 4)},
		"zero params": {&zero, make([]atomic.Uint64, 5)},
	} {
		tc.p.Init(tc.words, 0)
		d := tc.p.Decide(tc.words, 0, 1, false)
		assert.Equal(t, gcra.Decision{RetryAfter: gcra.Never}, d, name)
		assert.False(t, tc.p.Refund(tc.words, 1, 1), name)
		_, _, _, idle := tc.p.Idle(tc.words, 0)
		assert.False(t, idle, name)
		assert.False(t, tc.p.RetireFrom(tc.words, 0), name)
		assert.False(t, tc.p.IsRetired(tc.words), name)
		for i := range tc.words {
			assert.Zero(t, tc.words[i].Load(), name)
		}
	}
}

// checkRolling runs one request against the engine and the reference and
// requires the same decision; it returns the decision and the head the
// engine stored with the reference's slice for it.
func checkRolling(t *testing.T, p *window.RollingParams, words []atomic.Uint64, ref *refRolling, now int64, n int, peek bool, msg string) (gcra.Decision, uint64, int64) {
	t.Helper()
	var d gcra.Decision
	var stored uint64
	if peek {
		d = p.Decide(words, now, n, true)
	} else {
		stored, d = p.DecideHead(words, now, n)
	}
	r, slice := ref.decide(now, n, peek)
	require.Equal(t, r, d, "%s: now %d n %d peek %v", msg, now, n, peek)
	require.Equal(t, slice >= 0, stored != 0, "%s: stored", msg)
	return d, stored, slice
}

// rollingBound requires at most Q in every K consecutive slices and at most
// C in each, for per-slice counts.
func rollingBound(t *testing.T, perSlice map[int64]int, q, c, k int) {
	t.Helper()
	for s, n := range perSlice {
		require.LessOrEqual(t, n, c, "slice %d", s)
		run := 0
		for j := s; j < s+int64(k); j++ {
			run += perSlice[j]
		}
		require.LessOrEqual(t, run, q, "slices [%d, %d)", s, s+int64(k))
	}
}

// runRolling drives the engine and the reference through steps (refunding
// the latest admission where refund is set), checks Idle against the
// reference after every step, and the bound on what the engine admitted.
func runRolling(t *testing.T, q, k, perSlice int, slice int64, start int64, steps []fuzzStep, refunds []bool) {
	t.Helper()
	p := mustRolling(t, q, time.Duration(slice*int64(k)), time.Duration(slice), perSlice, start)
	words := newWords(p)
	ref := newRefRolling(q, k, perSlice, time.Duration(slice), start, 0)
	counted := map[int64]int{}
	var pending struct { // the admission to refund at the next refund step
		stored uint64
		slice  int64
		n      int
	}
	for i, s := range steps {
		peek := s.n%7 == 3 // some peeks, of every size
		d, stored, sl := checkRolling(t, p, words, ref, s.now, s.n, peek, "step "+itoa(i))
		if stored != 0 {
			counted[sl] += s.n
			// The slice is the one ResetAfter names: it leaves the window
			// at its start + W.
			require.Equal(t, sl, (s.now+int64(d.ResetAfter)-start)/slice-int64(k), "step %d: slice", i)
		}
		if i < len(refunds) && refunds[i] {
			// Refund an earlier admission, whose slice may have been
			// replaced since (nothing to give back then), and keep this
			// one for a later refund step.
			if pending.n > 0 {
				got := p.Refund(words, pending.stored, pending.n)
				require.Equal(t, ref.refund(pending.slice, pending.n), got, "step %d: refund", i)
				if got {
					counted[pending.slice] -= pending.n
				}
			}
			pending.stored, pending.slice, pending.n = stored, sl, s.n
			if stored == 0 {
				pending.n = 0
			}
		}
		_, from, _, idle := p.Idle(words, s.now)
		want := ref.idle()
		require.Equal(t, start+want*slice, from, "step %d: idle from", i)
		require.Equal(t, ref.slice(s.now) >= want, idle, "step %d: idle", i)
	}
	c := q
	if perSlice > 0 {
		c = perSlice
	}
	rollingBound(t, counted, q, c, k)
}

// Random geometries and timelines, stale nows and jumps back included, with
// refunds: every decision equals the reference's.
func TestRollingMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 300 {
		q := 1 + rng.IntN(20)
		k := 1 + rng.IntN(8)
		perSlice := 0
		if rng.IntN(2) == 0 {
			perSlice = 1 + rng.IntN(q)
		}
		slice := int64(1 + rng.IntN(1000))
		start := rng.Int64N(2*slice) - slice
		now := max(start, 0)
		var steps []fuzzStep
		var refunds []bool
		for range 200 {
			now = max(now+rng.Int64N(4*slice)-slice, 0) // back up to a slice
			if rng.IntN(20) == 0 {
				now += rng.Int64N(int64(k+2) * slice) // a long idle
			}
			steps = append(steps, fuzzStep{now, rng.IntN(min(q, max(perSlice, 1)*q)+3) - 1})
			refunds = append(refunds, rng.IntN(8) == 0)
		}
		t.Run("run="+itoa(run), func(t *testing.T) { runRolling(t, q, k, perSlice, slice, start, steps, refunds) })
	}
}

func FuzzRolling(f *testing.F) {
	f.Add(uint8(10), uint8(4), uint8(4), uint16(100), []byte{0, 4, 10, 2, 32, 4, 200, 1, 64, 3, 127, 4, 0, 11})
	f.Add(uint8(1), uint8(1), uint8(0), uint16(1), []byte{1, 1, 0, 1, 255, 1, 1, 1})
	f.Fuzz(func(t *testing.T, q, k, perSlice uint8, slice uint16, ops []byte) {
		if q == 0 || k == 0 || slice == 0 || k > 64 {
			return // rejected at construction (TestRollingErrors), or slow
		}
		c := int(perSlice) % (int(q) + 1)
		_, err := window.NewRollingParams(int(q), time.Duration(slice)*time.Duration(k), time.Duration(slice), c, 0)
		if errors.Is(err, window.ErrOverflow) {
			return // tiny slices leave too few index bits; TestRollingErrors
		}
		steps := decodeOps(int(q), int64(slice), 0, ops)
		refunds := make([]bool, len(steps))
		for i := range steps {
			refunds[i] = ops[2*i]&1 == 1 && ops[2*i+1]&8 != 0
		}
		runRolling(t, int(q), int(k), c, int64(slice), 0, steps, refunds)
	})
}

// Sixteen goroutines on one state under a clock that every call moves,
// with stale nows and refunds: every run of K slices counts at most Q and
// every slice at most C, and an admission is counted in a slice no earlier
// than its now's and no later than the clock's when it returned.
func TestRollingConcurrentBound(t *testing.T) {
	for _, tc := range []struct{ q, k, c int }{{10, 4, 4}, {7, 3, 0}, {3, 1, 0}, {40, 16, 5}} {
		t.Run("q="+itoa(tc.q)+"/k="+itoa(tc.k)+"/c="+itoa(tc.c), func(t *testing.T) {
			slice := 200 * time.Microsecond
			start := int64(slice / 3)
			p := mustRolling(t, tc.q, slice*time.Duration(tc.k), slice, tc.c, start)
			words := newWords(p)
			clk := newFakeClock()
			type adm struct{ slice, now, after int64 }
			logs := hammer(func(g int) map[adm]int {
				got := map[adm]int{}
				for i := range perCall() {
					now := int64(tick(clk, slice/40).Sub(t0))
					if i%5 == g%5 {
						runtime.Gosched() // let the clock and the others move past now
					}
					n := 1 + (i+g)%2
					stored, d := p.DecideHead(words, now, n)
					if !d.Allowed {
						continue
					}
					s := (now+int64(d.ResetAfter)-start)/int64(slice) - int64(tc.k)
					a := adm{s, now, int64(clk.Now().Sub(t0))}
					got[a] += n
					if i%11 == 0 && p.Refund(words, stored, 1) {
						got[a]--
					}
				}
				return got
			})
			perSlice := map[int64]int{}
			idx := func(t int64) int64 { return max(t-start, 0) / int64(slice) }
			late, total := 0, 0
			for _, l := range logs {
				for a, n := range l {
					perSlice[a.slice] += n
					total += n
					require.GreaterOrEqual(t, a.slice, idx(a.now), "counted before its now's slice")
					require.LessOrEqual(t, a.slice, idx(a.after), "counted after it returned")
					if a.slice > idx(a.now) {
						late++
					}
				}
			}
			c := tc.q
			if tc.c > 0 {
				c = tc.c
			}
			rollingBound(t, perSlice, tc.q, c, tc.k)
			t.Logf("%d admitted in %d slices; %d admissions with a stale now", total, len(perSlice), late)
			assert.Greater(t, len(perSlice), 10*tc.k, "the clock crossed many windows")
		})
	}
}

// Retiring while sixteen goroutines admit: every admission completed before
// the retirement (its head is at most the one retired, and the retired
// slice's count is exactly what was admitted in it), or was denied.
func TestRollingRetireRace(t *testing.T) {
	for round := range 20 {
		// 1024 slices: Idle reads them all between loading the head and
		// returning the mark, a wide window for admissions to slip in.
		p := mustRolling(t, 1<<20, 1024*time.Millisecond, time.Millisecond, 0, 0)
		words := newWords(p)
		var mark atomic.Uint64
		var retired atomic.Bool
		type adm struct {
			stored uint64
			slice  int64
		}
		logs := hammer(func(g int) []adm {
			var got []adm
			for i := range 2000 {
				now := int64(i/100) * int64(time.Millisecond)
				if g == 0 && i == 500+round*50 {
					for {
						m, _, _, _ := p.Idle(words, now)
						if p.RetireFrom(words, m) {
							mark.Store(m)
							retired.Store(true)
							break
						}
					}
				}
				stored, d := p.DecideHead(words, now, 1)
				if d.Allowed {
					got = append(got, adm{stored, (now+int64(d.ResetAfter))/int64(time.Millisecond) - 1024})
				}
			}
			return got
		})
		require.True(t, retired.Load())
		require.True(t, p.IsRetired(words))
		_, _, _, idle := p.Idle(words, 1<<50)
		require.False(t, idle, "a retired state is never idle")
		m := mark.Load()
		markSlice, inMark, n := int64(-1), 0, 0
		for _, l := range logs {
			for _, a := range l {
				require.LessOrEqual(t, a.stored, m, "round %d: an admission after the retirement", round)
				if a.stored == m {
					markSlice = a.slice
				}
				n++
			}
		}
		for _, l := range logs {
			for _, a := range l {
				if a.slice == markSlice {
					inMark++
				}
			}
		}
		require.Positive(t, n)
		if markSlice >= 0 {
			require.Equal(t, inMark, int(m&0x1fffff), "round %d: the retired head counts every admission of its slice", round)
		}
		require.False(t, p.Decide(words, 1<<40, 1, false).Allowed, "retired: denied")
		require.False(t, p.Refund(words, m, 1), "retired: no refund")
	}
}

// A replacement started from Idle's floor counts a stale request after
// every slice the old state counted; from 0, it would be counted beside
// them and admit a second quota in one window.
func TestRollingFloor(t *testing.T) {
	const s = time.Second
	p := mustRolling(t, 10, 4*s, s, 0, 0)
	old := newWords(p)
	require.True(t, p.Decide(old, int64(5*s), 10, false).Allowed) // slice 5 full
	_, from, _, idle := p.Idle(old, int64(8*s))
	require.False(t, idle, "slice 5 is in the window of slice 8")
	require.Equal(t, int64(9*s), from)
	var floor uint64
	_, from, floor, idle = p.Idle(old, int64(9*s))
	require.True(t, idle)
	require.Equal(t, int64(9*s), from)
	fresh := make([]atomic.Uint64, p.Words())
	p.Init(fresh, floor)
	// A request stamped in slice 6 (inside the old window) arrives after
	// the old state was removed: counted in slice 9, outside it.
	d := p.Decide(fresh, int64(6*s), 10, false)
	require.True(t, d.Allowed)
	require.Equal(t, 13*s-6*s, d.ResetAfter, "counted in slice 9")
	// The idle state and the fresh one decide alike from the floor on.
	fresh2 := make([]atomic.Uint64, p.Words())
	p.Init(fresh2, floor)
	for _, at := range []time.Duration{9 * s, 9*s + s/2, 10 * s, 12 * s, 13 * s} {
		require.Equal(t, p.Decide(fresh2, int64(at), 3, false), p.Decide(old, int64(at), 3, false), "at %v", at)
	}
}

func TestRollingAllocatesNothing(t *testing.T) {
	p := mustRolling(t, 1<<20, 1024*time.Second, time.Second, 0, 0)
	words := newWords(p)
	now := int64(0)
	for name, fn := range map[string]func(){
		"admit":  func() { now += int64(time.Second / 3); p.Decide(words, now, 1, false) },
		"peek":   func() { p.Decide(words, now, 1, true) },
		"deny":   func() { p.Decide(words, now, 1<<21, false) },
		"refund": func() { s, _ := p.DecideHead(words, now, 1); p.Refund(words, s, 1) },
		"idle":   func() { p.Idle(words, now) },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, fn), name)
	}
}
