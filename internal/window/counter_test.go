package window_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// 10 per second: a timeline through the weighting of the previous window.
func TestCounterTimeline(t *testing.T) {
	const ms = time.Millisecond
	lim, err := atomiclimit.NewRule(atomiclimit.SlidingCounter(10, time.Second), atomiclimit.WithClock(newFakeClock()))
	require.NoError(t, err)
	ref := newRefCounter(10, time.Second, 0)
	for i, s := range []step{
		{at: 0, n: 10, ok: true, remaining: 0},
		{at: 500 * ms, n: 1, ok: false, remaining: 0, retry: 500*ms + 100*ms}, // next window: prev 10 weighs 10·(1−0.1) = 9 at 100ms
		{at: 1000 * ms, n: 1, ok: false, remaining: 0, retry: 100 * ms},       // prev weighs 10: nothing
		{at: 1100 * ms, n: 1, ok: true, remaining: 0},                         // 10·0.9 + 1 = 10
		{at: 1500 * ms, n: 4, ok: true, remaining: 0},                         // 10·0.5 + 1 + 4 = 10
		{at: 1500 * ms, n: 1, ok: false, remaining: 0, retry: 100 * ms},
		{at: 900 * ms, n: 1, ok: false, remaining: 0, retry: 700 * ms}, // stale: read at 1000ms (weight 10) → 5+10 > 10; fits at 1600
		{at: 2000 * ms, n: 5, ok: true, remaining: 0},                  // prev = 5 at full weight
		{at: 2000 * ms, n: 11, ok: false, remaining: 0, retry: gcra.Never},
		{at: 4000 * ms, n: 10, ok: true, remaining: 0},                  // two windows idle: empty
		{at: 4999 * ms, n: 1, ok: false, remaining: 0, retry: 101 * ms}, // cur = N: the next window, once prev 10 weighs ≤ 9 (5100ms)
	} {
		d := lim.TakeN(t0.Add(s.at), s.n)
		r := ref.request(int64(s.at), s.n)
		assert.Equal(t, s.ok, d.Allowed, "step %d (at %v, n %d): allowed", i, s.at, s.n)
		assert.Equal(t, s.remaining, d.Remaining, "step %d: remaining", i)
		assert.Equal(t, s.retry, d.RetryAfter, "step %d: retry", i)
		assert.Equal(t, r.ok, d.Allowed, "step %d: reference", i)
		assert.Equal(t, r.remaining, d.Remaining, "step %d: reference remaining", i)
	}
}

// checkCounterStep compares one decision with the reference and checks the
// retry-after by its definition: the same request at now + RetryAfter fits,
// and one nanosecond earlier it does not (both peeked, writing nothing).
func checkCounterStep(t *testing.T, p *window.CounterParams, cell *wordCell, ref *refCounter, now int64, n int, what string) (d gcra.Decision) {
	t.Helper()
	before := cell.Load()
	d = cell.DecideN(p, now, n)
	r := ref.request(now, n)
	require.Equal(t, r.ok, d.Allowed, "%s: allowed (now %d, n %d)", what, now, n)
	require.Equal(t, r.remaining, d.Remaining, "%s: remaining", what)
	if d.Allowed {
		return d
	}
	require.Equal(t, before, cell.Load(), "%s: a denial writes nothing", what)
	if n < 1 || n > p.Limit() {
		require.Equal(t, gcra.Never, d.RetryAfter, what)
		return d
	}
	require.Positive(t, d.RetryAfter, what)
	at := now + int64(d.RetryAfter)
	require.True(t, cell.PeekN(p, at, n).Allowed, "%s: admitted after RetryAfter %v", what, d.RetryAfter)
	require.False(t, cell.PeekN(p, at-1, n).Allowed, "%s: denied 1ns before RetryAfter %v", what, d.RetryAfter)
	return d
}

func TestCounterMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		limit := 1 + rng.IntN(8)
		period := time.Duration(64 + rng.Int64N(1000)) // 2^61/64 windows fit 56 index bits
		start := rng.Int64N(int64(period))
		p := mustCounter(t, limit, period, start)
		ref := newRefCounter(limit, period, start)
		var cell wordCell
		now := int64(0)
		for i := 0; i < 200; i++ {
			now = max(now+rng.Int64N(int64(period))-int64(period)/4, 0)
			n := rng.IntN(limit+2) - rng.IntN(2)
			checkCounterStep(t, p, &cell, ref, now, n, "trial "+itoa(trial)+" step "+itoa(i))
		}
	}
}

// The estimate's worst case, shown: N admitted at the very end of one
// window, then N−1 just before the end of the next, all inside one rolling
// window. Fewer than the fixed window's 2N; more than the log's N.
func TestCounterWorstCase(t *testing.T) {
	const n = 10
	w := int64(time.Second)
	p := mustCounter(t, n, time.Second, 0)
	var cell wordCell
	var admitted []int64
	for _, at := range []int64{w - 1, 2*w - 2} {
		for cell.AllowN(p, at, 1) {
			admitted = append(admitted, at)
		}
	}
	assert.Len(t, admitted, 2*n-1)
	assert.Equal(t, 2*n-1, maxInWindow(admitted, w))
}

func TestCounterRefund(t *testing.T) {
	w := int64(time.Second)
	p := mustCounter(t, 4, time.Second, 0)
	var cell wordCell
	tok, ok := cell.AdmitN(p, 0, 3)
	require.True(t, ok)
	require.True(t, cell.AllowN(p, w, 1), "the next window: prev 3 at full weight, 1 left")
	assert.True(t, cell.Refund(p, tok, 3), "refunded from prev")
	assert.Equal(t, 2, cell.PeekN(p, w, 1).Remaining, "prev 0, cur 1, and the peeked 1")
	assert.False(t, cell.Refund(p, tok, 3))
	tok, _ = cell.AdmitN(p, w, 1)
	assert.True(t, cell.Refund(p, tok, 1), "refunded from cur")
	tok, _ = cell.AdmitN(p, w, 1)
	require.True(t, cell.AllowN(p, 3*w, 1))
	assert.False(t, cell.Refund(p, tok, 1), "its window has left the estimate")
}

func TestCounterErrors(t *testing.T) {
	for _, tc := range []struct {
		n      int
		period time.Duration
		err    error
	}{
		{0, time.Second, window.ErrInvalidLimit},
		{1, 0, window.ErrInvalidPeriod},
		{1 << 16, time.Second, window.ErrOverflow},
		{1 << 19, time.Minute, window.ErrOverflow},
		{1 << 24, 24 * time.Hour, window.ErrOverflow},
	} {
		_, err := atomiclimit.NewRule(atomiclimit.SlidingCounter(tc.n, tc.period))
		assert.ErrorIs(t, err, tc.err, "%d per %v", tc.n, tc.period)
		_, err = window.NewCounterParams(tc.n, tc.period, 0)
		assert.ErrorIs(t, err, tc.err, "params: %d per %v", tc.n, tc.period)
	}
	// The documented largest limits fit.
	for _, tc := range []struct {
		n      int
		period time.Duration
	}{{1<<16 - 1, time.Second}, {1<<19 - 1, time.Minute}, {1<<22 - 1, time.Hour}, {1<<24 - 1, 24 * time.Hour}} {
		_, err := atomiclimit.NewRule(atomiclimit.SlidingCounter(tc.n, tc.period))
		assert.NoError(t, err, "%d per %v", tc.n, tc.period)
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
