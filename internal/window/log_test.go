package window_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// 3 per second, exact: a timeline with a stale now and a jump back.
func TestLogTimeline(t *testing.T) {
	const ms = time.Millisecond
	lim, err := atomiclimit.NewRule(atomiclimit.SlidingLog(3, time.Second), atomiclimit.WithClock(newFakeClock()))
	require.NoError(t, err)
	ref := newRefLog(3, time.Second)
	for i, s := range []step{
		{at: 0, n: 1, ok: true, remaining: 2},
		{at: 400 * ms, n: 1, ok: true, remaining: 1},
		{at: 800 * ms, n: 1, ok: true, remaining: 0},
		{at: 999 * ms, n: 1, ok: false, remaining: 0, retry: 1 * ms},
		{at: 1000 * ms, n: 1, ok: true, remaining: 0}, // the one at 0 has left
		{at: 1300 * ms, n: 1, ok: false, remaining: 0, retry: 100 * ms},
		{at: 1400 * ms, n: 1, ok: true, remaining: 0},
		{at: 500 * ms, n: 1, ok: false, remaining: 0, retry: 1300 * ms}, // stale: the N-th latest (800ms) leaves at 1800ms
		{at: 1800 * ms, n: 1, ok: true, remaining: 0},
		{at: 5 * time.Second, n: 1, ok: true, remaining: 2},
	} {
		d := lim.TakeN(t0.Add(s.at), s.n)
		r := ref.request(int64(s.at))
		assert.Equal(t, s.ok, d.Allowed, "step %d (at %v): allowed", i, s.at)
		assert.Equal(t, s.remaining, d.Remaining, "step %d: remaining", i)
		assert.Equal(t, s.retry, d.RetryAfter, "step %d: retry", i)
		assert.Equal(t, r, refDecision{d.Allowed, d.Remaining, d.RetryAfter}, "step %d: reference", i)
	}
	d := lim.PeekN(t0.Add(5*time.Second), 2)
	assert.False(t, d.Allowed)
	assert.Equal(t, gcra.Never, d.RetryAfter, "one event per call")
	assert.False(t, lim.AllowN(t0.Add(9*time.Second), 2))
	assert.False(t, lim.AllowN(t0.Add(9*time.Second), -1))
}

// checkLogSequence runs nows through a ring and the reference, and checks
// the guarantee itself on the nows admitted.
func checkLogSequence(t *testing.T, limit int, period time.Duration, nows []int64) {
	t.Helper()
	p := mustLog(t, limit, period)
	ring := window.NewLogRing(p)
	ref := newRefLog(limit, period)
	var admitted []int64
	for i, now := range nows {
		d := ring.Decide(p, now)
		r := ref.request(now)
		require.Equal(t, r, refDecision{d.Allowed, d.Remaining, d.RetryAfter}, "step %d: now %d", i, now)
		if d.Allowed {
			admitted = append(admitted, now)
		} else {
			require.True(t, ring.Peek(p, now+int64(d.RetryAfter)).Allowed, "step %d: admitted after RetryAfter", i)
			require.False(t, ring.Peek(p, now+int64(d.RetryAfter)-1).Allowed, "step %d: denied 1ns before", i)
		}
	}
	slices.Sort(admitted)
	require.LessOrEqual(t, maxInWindow(admitted, int64(period)), limit, "at most N in any rolling window")
}

func TestLogMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 300; trial++ {
		limit := 1 + rng.IntN(6)
		period := time.Duration(1 + rng.Int64N(1000))
		var nows []int64
		now := int64(0)
		for i := 0; i < 100; i++ {
			now = max(now+rng.Int64N(int64(period))/int64(limit)-int64(period)/8, 0)
			nows = append(nows, now)
		}
		checkLogSequence(t, limit, period, nows)
	}
}

// The fixed window's boundary burst does not happen here: the same traffic
// as TestFixedBoundaryBurst admits N, and N more only a whole W after the
// first N.
func TestLogNoBoundaryBurst(t *testing.T) {
	const n = 10
	lim, err := atomiclimit.NewRule(atomiclimit.SlidingLog(n, time.Minute), atomiclimit.WithClock(newFakeClock()))
	require.NoError(t, err)
	var admitted []int64
	for _, at := range []time.Duration{time.Minute - time.Millisecond, time.Minute, 2*time.Minute - 2*time.Millisecond, 2*time.Minute - time.Millisecond} {
		for lim.AllowN(t0.Add(at), 1) {
			admitted = append(admitted, int64(at))
		}
	}
	require.Len(t, admitted, 2*n)
	assert.Equal(t, int64(time.Minute-time.Millisecond), admitted[n-1])
	assert.Equal(t, int64(2*time.Minute-time.Millisecond), admitted[n], "the next N only when the first N have left the window")
	assert.Equal(t, n, maxInWindow(admitted, int64(time.Minute)))
}

func TestLogErrors(t *testing.T) {
	for _, tc := range []struct {
		n      int
		period time.Duration
		err    error
	}{
		{0, time.Second, window.ErrInvalidLimit},
		{1, 0, window.ErrInvalidPeriod},
		{window.MaxLogLimit + 1, time.Second, window.ErrOverflow},
	} {
		_, err := atomiclimit.NewRule(atomiclimit.SlidingLog(tc.n, tc.period))
		assert.ErrorIs(t, err, tc.err, "%d per %v", tc.n, tc.period)
		if err != nil {
			// The sentinel, wrapped with the details.
			assert.Contains(t, err.Error(), tc.err.Error()+": ", "%d per %v", tc.n, tc.period)
		}
		_, err = window.NewLogParams(tc.n, tc.period)
		assert.ErrorIs(t, err, tc.err, "params: %d per %v", tc.n, tc.period)
	}
}

// The zero LogRing has no slots: every call denies (RetryAfter gcra.Never)
// without panicking or writing, on a t0…t3 timeline. Before the fix, Allow
// divided by zero.
func TestLogZeroRingDeniesEverything(t *testing.T) {
	p := mustLog(t, 3, time.Second)
	var ring window.LogRing
	for i, now := range []int64{0, int64(time.Millisecond), int64(time.Hour), 0} { // t0…t3, t3 jumps back
		assert.False(t, ring.Allow(p, now), "step %d: Allow", i)
		assert.False(t, ring.Admits(p, now), "step %d: Admits", i)
		want := gcra.Decision{RetryAfter: gcra.Never, TokenAfter: gcra.Never}
		assert.Equal(t, want, ring.Decide(p, now), "step %d: Decide", i)
		assert.Equal(t, want, ring.Peek(p, now), "step %d: Peek", i)
		assert.Equal(t, gcra.Decision{TokenAfter: gcra.Never}, ring.State(p, now), "step %d: State", i)
		_, _, idle := ring.Idle(now)
		assert.False(t, idle, "step %d: the zero ring is never idle (nothing to retire)", i)
		assert.False(t, ring.IsRetired(), "step %d: IsRetired", i)
	}
	assert.Zero(t, ring.Len())
}

// logPeekTimeline is t0…t9 for a log of N per second: each step is peeked,
// then decided, at the same instant.
var logPeekTimeline = []time.Duration{0, 0, 400 * time.Millisecond, 999 * time.Millisecond, time.Second,
	1300 * time.Millisecond, 1400 * time.Millisecond, 500 * time.Millisecond, 1800 * time.Millisecond, 5 * time.Second}

// The log's Peek describes the state after its hypothetical admission, so
// it equals the Decide that follows at the same instant (Remaining,
// ResetAfter and TokenAfter included), for the single-key sliding log and
// the keyed one, N = 3 and N = 1. Before the fix an admitted peek reported
// Remaining one higher (and TokenAfter 0 where Decide then reported a wait).
func TestLogPeekMatchesDecide(t *testing.T) {
	for _, limit := range []int{3, 1} {
		lim, err := atomiclimit.NewRule(atomiclimit.SlidingLog(limit, time.Second), atomiclimit.WithClock(newFakeClock()))
		require.NoError(t, err)
		k, err := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingLog(limit, time.Second), atomiclimit.WithClock(newFakeClock()), atomiclimit.WithSweepInterval(0))
		require.NoError(t, err)
		for i, at := range logPeekTimeline {
			now := t0.Add(at)
			peek := lim.PeekN(now, 1)
			assert.Equal(t, peek, lim.TakeN(now, 1), "N=%d step %d (at %v): Log peek, then decide", limit, i, at)
			kpeek := k.PeekN("a", now, 1)
			assert.Equal(t, kpeek, first(k.TakeN("a", now, 1)), "N=%d step %d (at %v): KeyedLog peek, then decide", limit, i, at)
			assert.Equal(t, peek, kpeek, "N=%d step %d: keyed and single-key agree", limit, i)
		}
	}
}
