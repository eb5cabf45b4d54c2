package window_test

import (
	"math/bits"
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
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// refAnchored is the reference anchored window, written from the
// definition: a window opens at the first admitted request's time (rounded
// up to g, and no earlier than the earliest allowed anchor) and counts at
// most N until anchor + W; a stale now is counted in the open window.
type refAnchored struct {
	mu       sync.Mutex
	n, g, w  int64
	open     bool
	anchor   int64 // of the open window, or the earliest next one
	count    int64
	anchored []int64 // anchors of the windows opened, in order
}

func newRefAnchored(n int, w time.Duration) *refAnchored {
	// g from the documented rule, not from the params.
	return &refAnchored{n: int64(n), g: 1 << max(0, bits.Len(uint(n))-2), w: int64(w)}
}

func (m *refAnchored) up(t int64) int64 { return (t + m.g - 1) / m.g * m.g }

func (m *refAnchored) request(now int64, n int) gcra.Decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	now = min(max(now, 0), int64(gcra.MaxNow))
	a, c := m.anchor, m.count
	if !m.open || now >= m.anchor+m.w {
		a, c = max(m.up(now), m.anchor), 0
	}
	var d gcra.Decision
	switch {
	case n == 0:
		d.Allowed = true
		a, c = m.anchor, m.count
		if !m.open || now >= m.anchor+m.w {
			c = 0
		}
	case n < 0 || int64(n) > m.n:
		d.RetryAfter = gcra.Never
	case c+int64(n) <= m.n:
		d.Allowed = true
		if c == 0 {
			m.anchored = append(m.anchored, a)
		}
		c += int64(n)
		m.open, m.anchor, m.count = true, a, c
	default:
		d.RetryAfter = time.Duration(a + m.w - now)
	}
	d.Remaining = int(m.n - c)
	if c > 0 {
		d.ResetAfter = time.Duration(a + m.w - now)
	}
	if c == m.n {
		d.TokenAfter = d.ResetAfter
	}
	return d
}

// giveBack takes back n from the open window at t; opened says the
// admission opened it. The first of several moves the window to t (the
// earliest the others could have opened it, from the definition's view: it
// is no earlier than any of them).
func (m *refAnchored) giveBack(n int, opened bool, t int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count -= int64(n)
	switch {
	case m.count == 0:
		m.open = false // the earliest next anchor stays the given-back one
	case opened:
		m.anchor = max(m.anchor, m.up(t))
	}
}

func mustAnchored(t testing.TB, n int, w time.Duration) *window.AnchoredParams {
	t.Helper()
	p, err := window.NewAnchoredParams(n, w)
	require.NoError(t, err)
	return &p
}

func TestAnchoredParams(t *testing.T) {
	for _, tc := range []struct {
		n int
		g time.Duration
	}{{1, 1}, {3, 1}, {4, 2}, {15, 4}, {100, 32}, {127, 32}, {128, 64}, {1<<16 - 1, 16384}, {1<<31 - 1, 1 << 29}} {
		p := mustAnchored(t, tc.n, 24*time.Hour)
		assert.Equal(t, tc.g, p.Resolution(), "N=%d", tc.n)
	}
	for _, tc := range []struct {
		n    int
		w    time.Duration
		want error
	}{{0, time.Second, window.ErrInvalidLimit}, {1, 0, window.ErrInvalidPeriod}, {1, gcra.MaxSpan + 1, window.ErrInvalidPeriod}, {100, 31, window.ErrOverflow}} {
		_, err := window.NewAnchoredParams(tc.n, tc.w)
		assert.ErrorIs(t, err, tc.want, "%+v", tc)
	}
	p := mustAnchored(t, 100, 32)
	assert.Equal(t, []any{100, time.Duration(32)}, []any{p.Limit(), p.Period()})
}

// 3 per second from the first request (g = 1 ns): the figures by hand.
func TestAnchoredTimeline(t *testing.T) {
	const ms = time.Millisecond
	p := mustAnchored(t, 3, time.Second)
	ref := newRefAnchored(3, time.Second)
	var state uint64
	for i, s := range []struct {
		at                  time.Duration
		n                   int
		ok                  bool
		remaining           int
		retry, reset, token time.Duration
	}{
		{at: 250 * ms, n: 0, ok: true, remaining: 3},                                                        // peek on a fresh cell
		{at: 250 * ms, n: 2, ok: true, remaining: 1, reset: time.Second},                                    // opens [250ms, 1250ms)
		{at: 900 * ms, n: 2, remaining: 1, retry: 350 * ms, reset: 350 * ms},                                // 2 + 2 > 3
		{at: 100 * ms, n: 1, ok: true, reset: 1150 * ms, token: 1150 * ms},                                  // stale: counted in the open window
		{at: 1249 * ms, n: 1, retry: ms, reset: ms, token: ms},                                              // still that window
		{at: 1250 * ms, n: 4, retry: gcra.Never, remaining: 3},                                              // n > N: never; the window has ended
		{at: 1300 * ms, n: 1, ok: true, remaining: 2, reset: time.Second},                                   // opens at its own time, not at 1250
		{at: 2299 * ms, n: 2, ok: true, reset: ms, token: ms},                                               // the last ms of it
		{at: 2300 * ms, n: -1, retry: gcra.Never, remaining: 3},                                             // n < 0
		{at: 5 * time.Second, n: 3, ok: true, reset: time.Second, token: time.Second},                       // long idle: whole quota
		{at: 4 * time.Second, n: 1, retry: 2 * time.Second, reset: 2 * time.Second, token: 2 * time.Second}, // jump back
	} {
		next, d := p.Decide(state, int64(s.at), s.n)
		want := gcra.Decision{Allowed: s.ok, Remaining: s.remaining, RetryAfter: s.retry, ResetAfter: s.reset, TokenAfter: s.token}
		assert.Equal(t, want, d, "step %d (at %v, n %d)", i, s.at, s.n)
		assert.Equal(t, ref.request(int64(s.at), s.n), d, "step %d: reference", i)
		if !d.Allowed {
			assert.Equal(t, state, next, "step %d: a denial stores nothing", i)
		}
		if s.n == 0 {
			assert.Equal(t, state, next, "step %d: a peek stores nothing", i)
		}
		state = next
	}
	assert.Equal(t, gcra.Decision{RetryAfter: gcra.Never}, func() gcra.Decision { _, d := p.Decide(window.Retired, 0, 1); return d }())
	_, ok := p.Admit(window.Retired, 0, 0)
	assert.False(t, ok, "retired: even a peek is denied")
}

// runAnchored drives the params and the reference through steps, refunding
// an earlier admission where refund is set, and checks the bound: windows
// do not overlap and each counts at most N.
func runAnchored(t *testing.T, n int, w int64, steps []fuzzStep, refunds []bool) {
	t.Helper()
	p := mustAnchored(t, n, time.Duration(w))
	ref := newRefAnchored(n, time.Duration(w))
	var state uint64
	perWindow := map[int64]int{}
	type adm struct {
		stored uint64
		anchor int64
		n      int
		opened bool
	}
	var pending adm
	latest := int64(0) // the latest time decided at: a give-back's clock is no earlier
	for i, s := range steps {
		latest = max(latest, s.now)
		next, d := p.Decide(state, s.now, s.n)
		require.Equal(t, ref.request(s.now, s.n), d, "step %d: now %d n %d", i, s.now, s.n)
		if d.Allowed && s.n > 0 {
			anchor := max(s.now, 0) + int64(d.ResetAfter) - w
			perWindow[anchor] += s.n
			require.LessOrEqual(t, perWindow[anchor], n, "step %d: over N in one window", i)
			if i < len(refunds) && refunds[i] {
				pending = adm{next, anchor, s.n, n-d.Remaining == s.n}
			}
		} else {
			require.Equal(t, state, next, "step %d: nothing stored", i)
		}
		state = next
		if i < len(refunds) && refunds[i] && pending.n > 0 && pending.stored != next {
			back, _, ok := p.Refund(state, algo.Taken{Word: pending.stored}, latest, pending.n, gcra.Alone)
			if ok {
				ref.giveBack(pending.n, pending.opened, latest)
				perWindow[pending.anchor] -= pending.n
				if moved, open := p.AnchorOf(back); pending.opened && open && moved != pending.anchor {
					// The window moved with its first admission's give-back:
					// its others are counted at the new anchor.
					perWindow[moved] += perWindow[pending.anchor]
					delete(perWindow, pending.anchor)
				}
				state = back
			}
			pending.n = 0
		}
		// Idle matches the definition: an open window is idle from its
		// end, an empty state from its earliest anchor.
		from, _, idle := p.Idle(state, s.now)
		require.Equal(t, max(s.now, 0) >= from, idle, "step %d: idle", i)
	}
	a := slices.Sorted(func(yield func(int64) bool) {
		for k, c := range perWindow {
			if c > 0 && !yield(k) {
				return
			}
		}
	})
	for i := 1; i < len(a); i++ {
		require.GreaterOrEqual(t, a[i]-a[i-1], w, "windows at %d and %d overlap", a[i-1], a[i])
	}
}

func TestAnchoredMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for run := range 300 {
		n := 1 + rng.IntN(20)
		if run%10 == 0 {
			n = 100 + rng.IntN(200) // g > 1
		}
		w := int64(64 + rng.IntN(10000))
		now := int64(0)
		var steps []fuzzStep
		var refunds []bool
		for range 200 {
			now = max(now+rng.Int64N(w)-w/4, 0)
			if rng.IntN(20) == 0 {
				now += rng.Int64N(3 * w)
			}
			steps = append(steps, fuzzStep{now, rng.IntN(n+3) - 1})
			refunds = append(refunds, rng.IntN(6) == 0)
		}
		t.Run("run="+itoa(run), func(t *testing.T) { runAnchored(t, n, w, steps, refunds) })
	}
}

func FuzzAnchored(f *testing.F) {
	f.Add(uint8(3), uint16(100), []byte{0, 1, 10, 2, 60, 3, 0, 1, 200, 1, 127, 4, 3, 3})
	f.Add(uint8(100), uint16(1000), []byte{1, 100, 0, 1, 255, 1, 40, 50})
	f.Fuzz(func(t *testing.T, n uint8, w uint16, ops []byte) {
		if n == 0 || w < 64 {
			return // rejected at construction (TestAnchoredParams) or g > W
		}
		steps := decodeOps(int(n), int64(w), 0, ops)
		refunds := make([]bool, len(steps))
		for i := range steps {
			refunds[i] = ops[2*i]&3 == 1
		}
		runAnchored(t, int(n), int64(w), steps, refunds)
	})
}

// A replacement started from Idle's floor counts a stale request in a
// window after the removed one; from 0 it would open a window inside it.
func TestAnchoredFloor(t *testing.T) {
	const s = time.Second
	p := mustAnchored(t, 5, 10*s)
	old, ok := p.Admit(0, int64(3*s), 5) // [3s, 13s) full
	require.True(t, ok)
	from, _, idle := p.Idle(old, int64(12*s))
	require.False(t, idle)
	require.Equal(t, int64(13*s), from)
	from, floor, idle := p.Idle(old, int64(13*s))
	require.True(t, idle)
	require.Equal(t, int64(13*s), from)
	// A request stamped at 5s arrives after the removal: its window opens
	// at 13s, after the removed one.
	_, d := p.Decide(floor, int64(5*s), 5)
	require.True(t, d.Allowed)
	require.Equal(t, 18*s, d.ResetAfter, "opened at 13s")
	// From the floor on, the idle state and the replacement agree.
	for _, at := range []time.Duration{13 * s, 14 * s, 30 * s} {
		_, a := p.Decide(old, int64(at), 2)
		_, b := p.Decide(floor, int64(at), 2)
		require.Equal(t, a, b, "at %v", at)
	}
}

// Sixteen goroutines on one word under a clock that every call moves, with
// stale nows and refunds: windows never overlap and each counts at most N.
func TestAnchoredConcurrentBound(t *testing.T) {
	for _, n := range []int{1, 5, 100} {
		period := 500 * time.Microsecond
		p := mustAnchored(t, n, period)
		var word atomic.Uint64
		clk := newFakeClock()
		logs := hammer(func(g int) map[int64]int {
			got := map[int64]int{}
			for i := range perCall() {
				now := int64(tick(clk, period/50).Sub(t0))
				if i%5 == g%5 {
					runtime.Gosched()
				}
				k := 1 + (i+g)%min(n, 3)
				for {
					old := word.Load()
					next, d := p.Decide(old, now, k)
					if !d.Allowed {
						break
					}
					if word.CompareAndSwap(old, next) {
						a := now + int64(d.ResetAfter) - int64(period)
						got[a] += k
						// Give back some that did not open their window, by
						// the real give-back (its lock, a clock read after the
						// load): a window's first admission, given back with
						// others after it, moves the window, which this count
						// by anchor cannot follow (runAnchored checks that).
						if i%13 == 0 && next&(1<<bitsOf(n)-1) > uint64(k) {
							if algo.RefundWord(&word, p, algo.Taken{Word: next, At: now}, nsClock{clk}, k) {
								got[a] -= k
							}
						}
						break
					}
				}
			}
			return got
		})
		perWindow := map[int64]int{}
		for _, l := range logs {
			for a, k := range l {
				perWindow[a] += k
			}
		}
		var anchors []int64
		for a, k := range perWindow {
			require.LessOrEqual(t, k, n, "N=%d: window at %d", n, a)
			if k > 0 {
				anchors = append(anchors, a)
			}
		}
		slices.Sort(anchors)
		for i := 1; i < len(anchors); i++ {
			require.GreaterOrEqual(t, anchors[i]-anchors[i-1], int64(period), "N=%d: windows overlap", n)
		}
		assert.Greater(t, len(anchors), 10, "N=%d: many windows", n)
	}
}

func TestAnchoredAllocatesNothing(t *testing.T) {
	p := mustAnchored(t, 100, time.Second)
	var state uint64
	now := int64(0)
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		now += int64(time.Millisecond)
		state, _ = p.Decide(state, now, 1)
		p.State(state, now)
		p.Idle(state, now)
	}))
}

// nsClock reads a fakeClock as ns since t0, for a give-back.
type nsClock struct{ c *fakeClock }

func (c nsClock) Now() int64 { return int64(c.c.Now().Sub(t0)) }

// bitsOf is the width of an anchored window's count field for N = n.
func bitsOf(n int) uint { return uint(bits.Len(uint(n))) }

// A window's first admission, given back with another after it: the window
// moves to the give-back's time, so that the other's quota is not renewed
// early (left in place, two more would pass at 60s: three in two seconds).
func TestAnchoredRefundFirst(t *testing.T) {
	const s = time.Second
	p := mustAnchored(t, 2, time.Minute)
	a, ok := p.Admit(0, 0, 1)
	require.True(t, ok)
	b, ok := p.Admit(a, int64(59*s), 1)
	require.True(t, ok)
	back, _, ok := p.Refund(b, algo.Taken{Word: a, At: 0}, int64(59*s), 1, gcra.Alone)
	require.True(t, ok)
	anchor, open := p.AnchorOf(back)
	require.True(t, open)
	require.Equal(t, int64(59*s), anchor, "the window opens where the other was admitted")
	next, ok := p.Admit(back, int64(60*s), 1)
	require.True(t, ok, "one of two left")
	_, ok = p.Admit(next, int64(60*s), 1)
	require.False(t, ok, "not a renewed quota")
	_, ok = p.Admit(next, int64(119*s), 1)
	require.True(t, ok, "renewed one minute after the moved anchor")
	// Given back after the window ended: nothing (its counts decide nothing).
	_, _, ok = p.Refund(b, algo.Taken{Word: a, At: 0}, int64(61*s), 1, gcra.Alone)
	require.False(t, ok)
	// Alone in its window, the first admission closes it.
	back, _, ok = p.Refund(a, algo.Taken{Word: a, At: 0}, int64(s), 1, gcra.Alone)
	require.True(t, ok)
	_, open = p.AnchorOf(back)
	require.False(t, open)
}
