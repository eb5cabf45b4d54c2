package gcra_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
)

const ms = int64(time.Millisecond)

// step is one request on a timeline: at time at (ns since the epoch), n
// tokens; and every field of the decision it must get.
type step struct {
	at        int64
	n         int
	ok        bool
	remaining int
	retry     time.Duration
	reset     time.Duration
	nextToken time.Duration
}

func mustParams(t testing.TB, l gcra.Limit, burst int) *gcra.Params {
	t.Helper()
	p, err := gcra.NewParams(l, burst)
	require.NoError(t, err)
	return &p
}

// runSteps feeds steps to Decide, storing each returned state, and checks
// every field; it also checks the reference model agrees on every step.
func runSteps(t *testing.T, p *gcra.Params, ref *refBucket, steps []step) {
	t.Helper()
	var tat int64
	for i, s := range steps {
		next, d := p.Decide(tat, s.at, s.n)
		assert.Equal(t, s.ok, d.Allowed, "step %d: Allowed", i)
		assert.Equal(t, s.remaining, d.Remaining, "step %d: Remaining", i)
		assert.Equal(t, s.retry, d.RetryAfter, "step %d: RetryAfter", i)
		assert.Equal(t, s.reset, d.ResetAfter, "step %d: ResetAfter", i)
		assert.Equal(t, s.nextToken, d.TokenAfter, "step %d: TokenAfter", i)
		if !d.Allowed {
			assert.Equal(t, tat, next, "step %d: a denial must not change the state", i)
		}
		admitNext, admitOK := p.Admit(tat, s.at, s.n)
		assert.Equal(t, d.Allowed, admitOK, "step %d: Admit disagrees with Decide", i)
		assert.Equal(t, next, admitNext, "step %d: Admit's state", i)
		if ref != nil {
			r := ref.request(s.at, s.n)
			assert.Equal(t, refDecision{s.ok, s.remaining, s.retry, s.reset, s.nextToken}, r, "step %d: reference model", i)
		}
		tat = next
	}
}

func TestDecideTimeline(t *testing.T) {
	// 100/s, burst 3: T = 10ms, B·T = 30ms.
	p := mustParams(t, gcra.Per(100, time.Second), 3)
	ref := newRefBucket(10*time.Millisecond, 3)
	const t0, t5, t10, t40, t100 = 0, 5 * ms, 10 * ms, 40 * ms, 100 * ms
	D := func(n int64) time.Duration { return time.Duration(n * ms) }
	runSteps(t, p, ref, []step{
		{at: t0, n: 1, ok: true, remaining: 2, reset: D(10)},
		{at: t0, n: 1, ok: true, remaining: 1, reset: D(20)},
		{at: t0, n: 1, ok: true, remaining: 0, reset: D(30), nextToken: D(10)},
		{at: t0, n: 1, ok: false, remaining: 0, retry: D(10), reset: D(30), nextToken: D(10)},
		{at: t5, n: 1, ok: false, remaining: 0, retry: D(5), reset: D(25), nextToken: D(5)},
		{at: t10, n: 1, ok: true, remaining: 0, reset: D(30), nextToken: D(10)}, // TAT 40ms
		{at: t10, n: 2, ok: false, remaining: 0, retry: D(20), reset: D(30), nextToken: D(10)},
		// A stale or backward now (5ms after 10ms) is stricter, never a refill.
		{at: t5, n: 1, ok: false, remaining: 0, retry: D(15), reset: D(35), nextToken: D(15)},
		{at: t0, n: 1, ok: false, remaining: 0, retry: D(20), reset: D(40), nextToken: D(20)},
		{at: t40, n: 3, ok: true, remaining: 0, reset: D(30), nextToken: D(10)},        // full again: all 3
		{at: t40 + 15*ms, n: 1, ok: true, remaining: 0, reset: D(25), nextToken: D(5)}, // 1.5 tokens back, 1 taken
		// n > B and n < 1 can never pass: Never, and nothing is consumed.
		{at: t100, n: 4, ok: false, remaining: 3, retry: gcra.Never},
		{at: t100, n: 0, ok: true, remaining: 3}, // a peek: admitted, consumes nothing (was denied)
		{at: t100, n: -1, ok: false, remaining: 3, retry: gcra.Never},
		{at: t100, n: math.MinInt, ok: false, remaining: 3, retry: gcra.Never},
		{at: t100, n: 2, ok: true, remaining: 1, reset: D(20)},
		// Exactly at the retry-after instant the same request passes.
		{at: t100, n: 2, ok: false, remaining: 1, retry: D(10), reset: D(20)},
		{at: t100 + 10*ms, n: 2, ok: true, remaining: 0, reset: D(30), nextToken: D(10)},
	})
}

func TestDecideNoBurst(t *testing.T) {
	// Burst 1: a hard limit, one event every T and never two at once.
	p := mustParams(t, gcra.Every(time.Second), 1)
	S := time.Second
	runSteps(t, p, newRefBucket(time.Second, 1), []step{
		{at: 0, n: 1, ok: true, remaining: 0, reset: S, nextToken: S},
		{at: 0, n: 1, ok: false, retry: S, reset: S, nextToken: S},
		{at: int64(S) - 1, n: 1, ok: false, retry: 1, reset: 1, nextToken: 1},
		{at: int64(S), n: 1, ok: true, remaining: 0, reset: S, nextToken: S},
		{at: 10 * int64(S), n: 1, ok: true, remaining: 0, reset: S, nextToken: S}, // idle time never banks tokens beyond B
		{at: 10 * int64(S), n: 1, ok: false, retry: S, reset: S, nextToken: S},
	})
}

func TestDecideUnlimitedAndDenyAll(t *testing.T) {
	un := mustParams(t, gcra.Unlimited, 1)
	for _, n := range []int{1, 2, math.MaxInt} {
		next, d := un.Decide(0, 5, n)
		assert.Equal(t, int64(5), next, "Unlimited's state only tracks the time")
		assert.Equal(t, gcra.Decision{Allowed: true, Remaining: math.MaxInt}, d)
		// Even a state deep in debt (left by an earlier finite limit) admits.
		next, d = un.Decide(int64(gcra.MaxNow)+int64(gcra.MaxSpan), 0, n)
		assert.True(t, d.Allowed)
		assert.Equal(t, int64(gcra.MaxNow)+int64(gcra.MaxSpan), next)
	}
	_, d := un.Decide(0, 5, -1)
	assert.False(t, d.Allowed, "n < 0 is invalid even when unlimited")
	assert.Equal(t, gcra.Never, d.RetryAfter)

	deny := mustParams(t, gcra.DenyAll, 1)
	for _, n := range []int{1, 2, -1} {
		next, d := deny.Decide(7, 5, n)
		assert.Equal(t, int64(7), next)
		assert.Equal(t, gcra.Decision{RetryAfter: gcra.Never, TokenAfter: gcra.Never}, d)
	}
}

func TestReserve(t *testing.T) {
	p := mustParams(t, gcra.Per(100, time.Second), 2) // T 10ms, span 20ms
	// Two tokens now, then each further one waits one more T.
	var tat int64
	for i, want := range []int64{0, 0, 10 * ms, 20 * ms, 30 * ms} {
		next, wait, ok := p.Reserve(tat, 0, 1, math.MaxInt64)
		require.True(t, ok, "reservation %d", i)
		assert.Equal(t, want, wait, "reservation %d", i)
		tat = next
	}
	// A bounded wait: 40ms needed, 39ms allowed → denied, nothing stored.
	next, wait, ok := p.Reserve(tat, 0, 1, 39*ms)
	assert.False(t, ok)
	assert.Equal(t, 40*ms, wait)
	assert.Equal(t, tat, next)
	// n > B: Never, whatever the patience.
	_, wait, ok = p.Reserve(0, 0, 3, math.MaxInt64)
	assert.False(t, ok)
	assert.Equal(t, int64(math.MaxInt64), wait)
}

// randomLimit draws small parameters so that random sequences hit every
// branch: empty, full, partially drained, backward time.
func randomParams(t testing.TB, rng *rand.Rand) (*gcra.Params, *refBucket) {
	interval := time.Duration(1 + rng.IntN(1000))
	burst := 1 + rng.IntN(8)
	return mustParams(t, gcra.Every(interval), burst), newRefBucket(interval, burst)
}

// checkSequence runs the decisions encoded by ops (three values per request:
// a signed time step, and n) against Decide and the reference model, and
// checks the properties that must hold on every sequence:
//   - identical decisions, every field;
//   - the stored state never moves backwards;
//   - admitted tokens ≤ B + (latest now − earliest now) / T.
func checkSequence(t testing.TB, p *gcra.Params, ref *refBucket, steps []int64, ns []int) {
	t.Helper()
	var tat, now int64 = 0, 1 << 20
	lo, hi := now, now
	admitted := int64(0)
	for i := range steps {
		now = gcra.Nanos(time.Duration(now + steps[i]))
		lo, hi = min(lo, now), max(hi, now)
		next, d := p.Decide(tat, now, ns[i])
		r := ref.request(now, ns[i])
		got := refDecision{d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter, d.TokenAfter}
		if got != r {
			t.Fatalf("step %d (now=%d n=%d, %v): Decide = %+v, reference = %+v", i, now, ns[i], p.Interval(), got, r)
		}
		if next < tat {
			t.Fatalf("step %d: state moved backwards: %d -> %d", i, tat, next)
		}
		if d.Allowed {
			admitted += int64(ns[i])
		}
		tat = next
	}
	// The bucket starts full at state 0 ≤ lo, so the bound counts from lo.
	if bound := int64(p.Burst()) + (hi-lo)/int64(p.Interval()); admitted > bound {
		t.Fatalf("admitted %d tokens over [%d, %d], bound B + d/T = %d", admitted, lo, hi, bound)
	}
}

func TestDecideMatchesReferenceOnRandomSequences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		p, ref := randomParams(t, rng)
		steps := make([]int64, 200)
		ns := make([]int, 200)
		for i := range steps {
			steps[i] = int64(rng.IntN(int(3*p.Interval()))) - int64(p.Interval()/2) // mostly forward, sometimes back
			ns[i] = rng.IntN(p.Burst()+2) - rng.IntN(2)                             // includes 0, -1, B+1
		}
		checkSequence(t, p, ref, steps, ns)
	}
}

func FuzzDecide(f *testing.F) {
	f.Add(uint16(10), uint8(3), []byte{0, 1, 0, 1, 0, 1, 0, 1, 5, 1, 10, 2})
	f.Add(uint16(1), uint8(1), []byte{0, 1, 255, 1, 0, 0, 1, 2})
	f.Add(uint16(1000), uint8(255), []byte{200, 255, 100, 128, 0, 7})
	f.Fuzz(func(t *testing.T, interval uint16, burst uint8, ops []byte) {
		if interval == 0 || burst == 0 {
			return // rejected at construction, covered by the params table
		}
		p := mustParams(t, gcra.Every(time.Duration(interval)), int(burst))
		ref := newRefBucket(time.Duration(interval), int(burst))
		var steps []int64
		var ns []int
		for i := 0; i+1 < len(ops); i += 2 {
			// Time step: signed byte, scaled so that sequences cross the
			// interval in both directions; n: 0..B+1 with 0 and B+1 rare.
			steps = append(steps, int64(int8(ops[i]))*int64(interval)/16)
			ns = append(ns, int(ops[i+1])%(int(burst)+2))
		}
		checkSequence(t, p, ref, steps, ns)
	})
}

func TestDecideAllocatesNothing(t *testing.T) {
	p := mustParams(t, gcra.Per(100, time.Second), 3)
	var tat int64
	allocs := testing.AllocsPerRun(1000, func() {
		tat, _ = p.Admit(tat, 0, 1)
		_, _ = p.Decide(tat, 0, 1)
	})
	assert.Zero(t, allocs)
}

// Regression (review finding): unbounded reservations used to add n·T to
// TAT without limit, wrap it past 2^63 and so reset the bucket. Reserve now
// caps every wait at MaxWait.
func TestReserveCannotOverflow(t *testing.T) {
	p := mustParams(t, gcra.Every(gcra.MaxSpan), 1) // the largest T there is
	var tat int64
	admitted := 0
	for i := 0; i < 10; i++ {
		next, wait, ok := p.Reserve(tat, 0, 1, math.MaxInt64)
		require.GreaterOrEqual(t, next, tat, "reservation %d rewound the state", i)
		if !ok {
			assert.Greater(t, wait, int64(gcra.MaxWait))
			break
		}
		assert.LessOrEqual(t, wait, int64(gcra.MaxWait))
		admitted++
		tat = next
	}
	// 1 immediate token plus every whole T that fits in MaxWait (2^60 < 2^61 = T).
	assert.Equal(t, 1, admitted)
	_, ok := p.Admit(tat, 0, 1)
	assert.False(t, ok, "the bucket must still be drained")
}

// The arithmetic at the extremes that validation allows: T up to MaxSpan,
// B·T up to MaxSpan, now anywhere in [0, MaxNow] and moving either way,
// unbounded waits. No state may go negative or backwards, and a stored state
// never runs further ahead of its now than B·T + MaxWait.
func TestDecideAtTheExtremes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 2000; trial++ {
		burst := 1 + rng.IntN(4)
		interval := 1 + rng.Int64N(int64(gcra.MaxSpan)/int64(burst))
		p := mustParams(t, gcra.Every(time.Duration(interval)), burst)
		var tat int64
		for i := 0; i < 50; i++ {
			now := gcra.Nanos(time.Duration(rng.Int64N(int64(gcra.MaxNow) + 1)))
			if rng.IntN(3) == 0 {
				now = int64(gcra.MaxNow)
			}
			n := 1 + rng.IntN(burst)
			maxWait := []int64{0, rng.Int64N(int64(gcra.MaxSpan)), math.MaxInt64}[rng.IntN(3)]
			next, wait, ok := p.Reserve(tat, now, n, maxWait)
			require.GreaterOrEqual(t, next, tat, "trial %d step %d: state went backwards", trial, i)
			if ok {
				require.LessOrEqual(t, next-now, int64(p.Span())+int64(gcra.MaxWait), "trial %d step %d", trial, i)
				require.GreaterOrEqual(t, wait, int64(0))
			} else {
				require.Positive(t, wait)
			}
			_, d := p.Decide(next, now, n)
			require.GreaterOrEqual(t, d.Remaining, 0)
			require.GreaterOrEqual(t, d.ResetAfter, time.Duration(0))
			tat = next
		}
	}
}
