package window_test

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

type step struct {
	at        time.Duration
	n         int
	ok        bool
	remaining int
	retry     time.Duration
}

// runFixed runs steps against a fixed-window limiter on a fake clock (epoch
// t0) and against the reference model.
func runFixed(t *testing.T, lim *atomiclimit.Limiter, ref *refFixed, steps []step) {
	t.Helper()
	for i, s := range steps {
		d := lim.TakeN(t0.Add(s.at), s.n)
		r := ref.request(int64(s.at), s.n)
		assert.Equal(t, s.ok, d.Allowed, "step %d (at %v, n %d): allowed", i, s.at, s.n)
		assert.Equal(t, s.remaining, d.Remaining, "step %d: remaining", i)
		assert.Equal(t, s.retry, d.RetryAfter, "step %d: retry", i)
		assert.Equal(t, r.ok, d.Allowed, "step %d: reference allowed", i)
		assert.Equal(t, r.remaining, d.Remaining, "step %d: reference remaining", i)
		assert.Equal(t, r.retry, d.RetryAfter, "step %d: reference retry", i)
	}
}

// 3 per second, windows from creation (t0): a timeline with a boundary, a
// stale now after the boundary, a jump back, a long idle and bad n.
func TestFixedTimeline(t *testing.T) {
	const ms = time.Millisecond
	lim, err := atomiclimit.NewRule(atomiclimit.FixedWindow(3, time.Second), atomiclimit.WithClock(newFakeClock()))
	require.NoError(t, err)
	runFixed(t, lim, newRefFixed(3, time.Second, 0), []step{
		{at: 0, n: 1, ok: true, remaining: 2},
		{at: 100 * ms, n: 2, ok: true, remaining: 0},
		{at: 200 * ms, n: 1, ok: false, remaining: 0, retry: 800 * ms},
		{at: 999 * ms, n: 1, ok: false, remaining: 0, retry: ms},
		{at: 1000 * ms, n: 3, ok: true, remaining: 0},                   // the boundary: the whole quota
		{at: 900 * ms, n: 1, ok: false, remaining: 0, retry: 1100 * ms}, // stale now: decided in window 1
		{at: 0, n: 1, ok: false, remaining: 0, retry: 2 * time.Second},  // far back: the same
		{at: 2500 * ms, n: 4, ok: false, remaining: 3, retry: gcra.Never},
		{at: 2500 * ms, n: 0, ok: true, remaining: 3}, // a peek: admitted, counts nothing (was denied)
		{at: 2500 * ms, n: -1, ok: false, remaining: 3, retry: gcra.Never},
		{at: time.Hour, n: 2, ok: true, remaining: 1}, // idle: N again, never more (interval refill)
		{at: time.Hour, n: 2, ok: false, remaining: 1, retry: time.Second},
	})
}

// Days starting at 00:00 UTC, for a limiter created at 18:00 UTC: the first
// window ends at midnight, six hours after creation, not 24.
func TestFixedUTCAlignment(t *testing.T) {
	clk := newFakeClock()
	clk.Set(18 * time.Hour)
	lim, err := atomiclimit.NewRule(atomiclimit.FixedWindowUTC(2, 24*time.Hour, 0), atomiclimit.WithClock(clk))
	require.NoError(t, err)
	evening := t0.Add(18 * time.Hour)
	assert.True(t, lim.AllowN(evening, 2))
	d := lim.TakeN(evening, 1)
	assert.False(t, d.Allowed)
	assert.Equal(t, 6*time.Hour, d.RetryAfter, "the day ends at midnight UTC")
	assert.False(t, lim.AllowN(t0.Add(24*time.Hour-time.Nanosecond), 1))
	assert.True(t, lim.AllowN(t0.Add(24*time.Hour), 2), "a new UTC day")

	// Weeks from Monday 00:00 UTC (1970-01-01 was a Thursday): 2026-01-01 is
	// a Thursday, so the week containing it ends on Monday 2026-01-05.
	wk, err := atomiclimit.NewRule(atomiclimit.FixedWindowUTC(1, 7*24*time.Hour, 4*24*time.Hour), atomiclimit.WithClock(newFakeClock()))
	require.NoError(t, err)
	assert.True(t, wk.AllowN(t0, 1))
	assert.Equal(t, 4*24*time.Hour, wk.TakeN(t0, 1).RetryAfter)
	assert.Equal(t, "utc+96h0m0s", window.AlignUTC(4*24*time.Hour).String())
}

func TestAlignStart(t *testing.T) {
	epoch := time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC)
	assert.Equal(t, int64(77), window.AlignStart.Start(epoch, 77, time.Hour))
	// 10:30 + 45 min = 11:15: the hour began 15 min before.
	assert.Equal(t, int64(45*time.Minute-15*time.Minute), window.AlignUTC(0).Start(epoch, int64(45*time.Minute), time.Hour))
	// Offsets are taken modulo the period; negative offsets work too.
	assert.Equal(t, window.AlignUTC(-50*time.Minute).Start(epoch, 0, time.Hour), window.AlignUTC(10*time.Minute).Start(epoch, 0, time.Hour))
	// The window containing the epoch may begin before it.
	assert.Equal(t, -int64(30*time.Minute), window.AlignUTC(0).Start(epoch, 0, time.Hour))
}

// Random sequences of times (forward, stale, backward) and sizes: the cell
// and the reference agree on every decision.
func TestFixedMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		limit := 1 + rng.IntN(6)
		period := time.Duration(1 + rng.Int64N(1000))
		start := rng.Int64N(int64(period)) - int64(period)/2
		p := mustFixed(t, limit, period, start)
		ref := newRefFixed(limit, period, start)
		var cell wordCell
		now := int64(0)
		for i := 0; i < 200; i++ {
			now = max(now+rng.Int64N(int64(period))-int64(period)/4, 0)
			n := rng.IntN(limit+2) - rng.IntN(2)
			d := cell.DecideN(p, now, n)
			r := ref.request(now, n)
			require.Equal(t, r, refDecision{d.Allowed, d.Remaining, d.RetryAfter}, "trial %d step %d: now %d n %d", trial, i, now, n)
		}
	}
}

// What a fixed window is for and against: 2N admitted within a span much
// shorter than W across a boundary.
func TestFixedBoundaryBurst(t *testing.T) {
	const n = 10
	lim, err := atomiclimit.NewRule(atomiclimit.FixedWindow(n, time.Minute), atomiclimit.WithClock(newFakeClock()))
	require.NoError(t, err)
	var admitted []int64
	for _, at := range []time.Duration{time.Minute - time.Millisecond, time.Minute} {
		for lim.AllowN(t0.Add(at), 1) {
			admitted = append(admitted, int64(at))
		}
	}
	assert.Len(t, admitted, 2*n, "N before the boundary, N after")
	assert.Equal(t, 2*n, maxInWindow(admitted, int64(2*time.Millisecond)), "all 2N within 2ms, in a limit of N per minute")
}

func TestFixedRefund(t *testing.T) {
	p := mustFixed(t, 5, time.Second, 0)
	var cell wordCell
	tok, ok := cell.AdmitN(p, 0, 3)
	require.True(t, ok)
	_, ok = cell.AdmitN(p, 0, 2)
	require.True(t, ok)
	assert.True(t, cell.Refund(p, tok, 3), "counts commute: refund behind a later admission")
	assert.Equal(t, 2, cell.PeekN(p, 0, 1).Remaining, "2 counted, and the peeked 1")
	assert.False(t, cell.Refund(p, tok, 3), "only what is counted can be given back")
	tok, _ = cell.AdmitN(p, 0, 1)
	_, ok = cell.AdmitN(p, int64(time.Second), 1)
	require.True(t, ok)
	assert.False(t, cell.Refund(p, tok, 1), "the window has been replaced")
	assert.Equal(t, 3, cell.PeekN(p, int64(time.Second), 1).Remaining)
}

func TestFixedErrors(t *testing.T) {
	for _, tc := range []struct {
		n      int
		period time.Duration
		err    error
	}{
		{0, time.Second, window.ErrInvalidLimit},
		{-1, time.Second, window.ErrInvalidLimit},
		{1, 0, window.ErrInvalidPeriod},
		{1, -time.Second, window.ErrInvalidPeriod},
		{1, gcra.MaxSpan + 1, window.ErrInvalidPeriod},
		{1 << 22, time.Millisecond, window.ErrOverflow}, // needs 42 index bits, has 41
		{1 << 30, time.Microsecond, window.ErrOverflow}, // 33 index bits, needs 52
	} {
		_, err := atomiclimit.NewRule(atomiclimit.FixedWindow(tc.n, tc.period))
		assert.ErrorIs(t, err, tc.err, "%d per %v", tc.n, tc.period)
		if err != nil {
			// The sentinel, wrapped with the details.
			assert.Contains(t, err.Error(), tc.err.Error()+": ", "%d per %v", tc.n, tc.period)
		}
		// The engine's own constructor returns the same errors.
		_, err = window.NewFixedParams(tc.n, tc.period, 0)
		assert.ErrorIs(t, err, tc.err, "params: %d per %v", tc.n, tc.period)
	}
	_, err := atomiclimit.NewRule(atomiclimit.FixedWindow(1<<22-1, time.Millisecond))
	assert.NoError(t, err, "2^22−1 per ms fits")
	if strconv.IntSize == 64 {
		var big uint64 = 1<<32 - 1 // a variable: the constant overflows int on 386
		_, err = atomiclimit.NewRule(atomiclimit.FixedWindow(int(big), time.Second))
		assert.NoError(t, err, "2^32−1 per second fits")
	}
}

// The largest index and count never collide: at the end of the time range,
// with the largest count, the state still decodes to the right window.
func TestFixedLayoutAtLimits(t *testing.T) {
	p := mustFixed(t, 1<<22-1, time.Millisecond, -int64(time.Millisecond))
	var cell wordCell
	last := int64(gcra.MaxNow)
	require.True(t, cell.AllowN(p, last, 1<<22-1))
	assert.False(t, cell.AllowN(p, last, 1))
	assert.Equal(t, 0, cell.PeekN(p, last, 1).Remaining)
	assert.Equal(t, 1<<22-2, cell.PeekN(p, last+int64(time.Millisecond), 1).Remaining, "the next window (past MaxNow) is empty")
}

// n = 0 is a peek, admitted and counting nothing, on every window algorithm
// and path (single-key and keyed; a keyed n = 0 creates no key), on a t0…t3
// timeline: Decide(0) describes the state as it is, equal to the state a
// Decide(1)'s denial or Tokens would report, and n < 0 stays denied with
// RetryAfter Never. Before the fix n = 0 was denied with RetryAfter Never.
func TestZeroNIsAnAdmittedPeek(t *testing.T) {
	type single interface {
		AllowN(time.Time, int) bool
		TakeN(time.Time, int) gcra.Decision
		PeekN(time.Time, int) gcra.Decision
	}
	type keyedLim interface {
		AllowN(string, time.Time, int) bool
		TakeN(string, time.Time, int) (gcra.Decision, atomiclimit.Receipt, error)
		Stats() atomiclimit.Stats
	}
	mkSingle := func(r atomiclimit.Rule) *atomiclimit.Limiter {
		l, err := atomiclimit.NewRule(r, atomiclimit.WithClock(newFakeClock()))
		require.NoError(t, err)
		return l
	}
	mkKeyed := func(r atomiclimit.Rule) *atomiclimit.Keyed[string] {
		k, err := atomiclimit.NewKeyedRule[string](r, atomiclimit.WithClock(newFakeClock()), atomiclimit.WithSweepInterval(0))
		require.NoError(t, err)
		return k
	}
	f, kf := mkSingle(atomiclimit.FixedWindow(2, time.Second)), mkKeyed(atomiclimit.FixedWindow(2, time.Second))
	c, kc := mkSingle(atomiclimit.SlidingCounter(2, time.Second)), mkKeyed(atomiclimit.SlidingCounter(2, time.Second))
	l, kl := mkSingle(atomiclimit.SlidingLog(2, time.Second)), mkKeyed(atomiclimit.SlidingLog(2, time.Second))
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		s    single
		k    keyedLim
	}{{"fixed", f, kf}, {"counter", c, kc}, {"log", l, kl}} {
		for i, at := range []time.Duration{0, 0, 300 * ms, 100 * ms} { // t0…t3, t3 jumps back
			now := t0.Add(at)
			tc.s.AllowN(now, 1)
			before := tc.s.PeekN(now, 1)
			assert.True(t, tc.s.AllowN(now, 0), "%s step %d: AllowN(0)", tc.name, i)
			d := tc.s.TakeN(now, 0)
			assert.True(t, d.Allowed, "%s step %d: DecideAt(0)", tc.name, i)
			assert.Zero(t, d.RetryAfter, "%s step %d: RetryAfter", tc.name, i)
			assert.Equal(t, d, tc.s.PeekN(now, 0), "%s step %d: PeekAt(0)", tc.name, i)
			assert.Equal(t, before, tc.s.PeekN(now, 1), "%s step %d: nothing counted", tc.name, i)
			neg := tc.s.TakeN(now, -1)
			assert.False(t, neg.Allowed, "%s step %d: n < 0", tc.name, i)
			assert.Equal(t, gcra.Never, neg.RetryAfter, "%s step %d: n < 0", tc.name, i)

			assert.True(t, tc.k.AllowN("new", now, 0), "%s step %d: keyed AllowN(0)", tc.name, i)
			assert.True(t, first(tc.k.TakeN("new", now, 0)).Allowed, "%s step %d: keyed DecideAt(0)", tc.name, i)
			assert.Zero(t, tc.k.Stats().Keys, "%s step %d: n = 0 creates no key", tc.name, i)
		}
	}
}

// first is the decision of a Take.
func first(d gcra.Decision, _ atomiclimit.Receipt, _ error) gcra.Decision { return d }
