package atomiclimit_test

import (
	"context"
	"math"
	"runtime"
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

func TestNewRejectsBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		limit gcra.Limit
		burst int
		want  error
	}{
		{gcra.Limit{}, 1, gcra.ErrInvalidLimit},
		{gcra.Per(-1, time.Second), 1, gcra.ErrInvalidLimit},
		{gcra.Rate(math.NaN()), 1, gcra.ErrInvalidLimit},
		{gcra.Per(10, 5*time.Nanosecond), 1, gcra.ErrRateTooHigh},
		{gcra.Per(1, time.Second), 0, gcra.ErrInvalidBurst},
		{gcra.Per(1, 24*time.Hour), 1 << 30, gcra.ErrOverflow},
	} {
		lim, err := atomiclimit.NewRule(atomiclimit.GCRA(tc.limit, tc.burst))
		assert.ErrorIs(t, err, tc.want, "%v burst %d", tc.limit, tc.burst)
		assert.Nil(t, lim)
	}
}

// The limiter's methods, on a fake clock's timeline: each line is one call at
// time t (ms) and what it must return.
func TestLimiterTimeline(t *testing.T) {
	clk := newFakeClock()
	lim := newLimiter(t, gcra.Per(100, time.Second), 3, atomiclimit.WithClock(clk)) // T 10ms
	at := func(msec int64) time.Time { return clk.At(time.Duration(msec) * time.Millisecond) }
	ms := time.Millisecond

	assert.Equal(t, 3, lim.PeekN(at(0), 0).Remaining)
	assert.True(t, lim.AllowN(at(0), 2))
	assert.Equal(t, gcra.Decision{Allowed: false, Remaining: 1, RetryAfter: 10 * ms, ResetAfter: 20 * ms},
		lim.PeekN(at(0), 2), "peek consumes nothing")
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 0, ResetAfter: 30 * ms, TokenAfter: 10 * ms},
		lim.TakeN(at(0), 1))
	assert.False(t, lim.AllowN(at(9), 1))
	assert.Equal(t, 0, lim.PeekN(at(9), 0).Remaining)
	assert.True(t, lim.AllowN(at(10), 1))
	assert.False(t, lim.AllowN(at(5), 1), "a stale time is stricter")
	assert.False(t, lim.AllowN(at(100), 4), "n > burst")
	assert.False(t, lim.AllowN(at(100), -1), "n < 0")
	assert.Equal(t, 3, lim.PeekN(at(100), 0).Remaining)

	// The clock-reading forms read the fake clock.
	clk.Set(200 * ms)
	assert.Equal(t, 3, lim.Peek(0).Remaining)
	assert.True(t, lim.Allow())
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 0, ResetAfter: 30 * ms, TokenAfter: 10 * ms}, lim.Take(2))
	assert.Equal(t, gcra.Decision{Remaining: 0, RetryAfter: 10 * ms, ResetAfter: 30 * ms, TokenAfter: 10 * ms}, lim.Peek(1))
	assert.False(t, lim.Allow())

	// Times before the limiter's epoch count as the epoch: never a refill.
	assert.Equal(t, lim.PeekN(clk.At(0), 0).Remaining, lim.PeekN(clk.At(-time.Hour), 0).Remaining)
}

func TestLimiterUnlimitedAndDenyAll(t *testing.T) {
	un := newLimiter(t, gcra.Unlimited, 1)
	for i := 0; i < 1000; i++ {
		require.True(t, un.Allow())
	}
	assert.Equal(t, math.MaxInt, un.Peek(0).Remaining)

	deny := newLimiter(t, gcra.DenyAll, 1)
	assert.False(t, deny.Allow())
	assert.Equal(t, gcra.Never, deny.Take(1).RetryAfter)
	assert.Equal(t, 0, deny.Peek(0).Remaining)
}

func TestSetLimitKeepsTheTAT(t *testing.T) {
	clk := newFakeClock()
	lim := newLimiter(t, gcra.Per(10, time.Second), 10, atomiclimit.WithClock(clk)) // T 100ms, span 1s
	assert.Equal(t, "10/s, burst 10", lim.Quota().String)
	for i := 0; i < 10; i++ {
		require.True(t, lim.Allow())
	}
	// Drained: 1s until full. At 1/s with burst 5 (span 5s) the same 1s of
	// debt leaves floor((5s − 1s)/1s) = 4 tokens.
	require.NoError(t, lim.SetRule(atomiclimit.GCRA(gcra.Per(1, time.Second), 5)))
	assert.Equal(t, 4, lim.Peek(0).Remaining)
	assert.Equal(t, 5*time.Second, lim.Quota().Window)
	assert.Equal(t, "1/s, burst 5", lim.Quota().String)

	// A bad limit changes nothing.
	assert.ErrorIs(t, lim.SetRule(atomiclimit.GCRA(gcra.Per(0, time.Second), 5)), gcra.ErrInvalidLimit)
	assert.ErrorIs(t, lim.SetRule(atomiclimit.GCRA(gcra.Per(1, time.Second), 0)), gcra.ErrInvalidBurst)
	assert.Equal(t, "1/s, burst 5", lim.Quota().String)

	// To deny everything from now on, and back.
	require.NoError(t, lim.SetRule(atomiclimit.GCRA(gcra.DenyAll, 0)))
	assert.False(t, lim.Allow())
	require.NoError(t, lim.SetRule(atomiclimit.GCRA(gcra.Unlimited, 0)))
	assert.True(t, lim.Allow())
}

// Each hot path, on a limiter that admits every call (T = 1ns and a burst
// far beyond the runs, so every Allow stores a new state with a CAS) and on
// one that denies every call.
func TestHotPathsAllocateNothing(t *testing.T) {
	clk := newFakeClock()
	for name, opts := range map[string][]atomiclimit.Option{
		"monotonic": nil,
		"coarse":    {atomiclimit.WithCoarseClock()},
		"fake":      {atomiclimit.WithClock(clk)},
	} {
		now := time.Now()
		if name == "fake" {
			now = clk.Now() // the …At forms take times on the limiter's clock
		}
		admit := newLimiter(t, gcra.Every(time.Nanosecond), 1<<30, opts...)
		deny := newLimiter(t, gcra.Every(time.Hour), 2, opts...)
		require.True(t, deny.AllowN(now, 2))
		for op, f := range map[string]func(){
			"Allow":    func() { assert.True(t, admit.Allow()) },
			"AllowN":   func() { assert.True(t, admit.AllowN(now, 3)) },
			"Decide":   func() { assert.True(t, admit.Take(1).Allowed) },
			"DecideAt": func() { assert.True(t, admit.TakeN(now, 1).Allowed) },
			"Peek":     func() { admit.Peek(1) },
			"PeekAt":   func() { admit.PeekN(now, 1) },
			"Tokens":   func() { admit.Peek(0) },
			"deny":     func() { assert.False(t, deny.Allow()) },
			"denyN":    func() { assert.False(t, deny.AllowN(now, 1)) },
			"denyPeek": func() { assert.False(t, deny.Peek(1).Allowed) },
		} {
			assert.Zero(t, testing.AllocsPerRun(1000, f), "%s/%s", name, op)
		}
	}
}

func TestUnlimitedWritesNothing(t *testing.T) {
	p, err := gcra.NewParams(gcra.Unlimited, 1)
	require.NoError(t, err)
	var w atomic.Uint64 // the bucket's word, read back to see what it stored
	b := algo.BucketOf(&w)
	for now := int64(1); now < 100; now += 7 {
		assert.True(t, b.AllowN(&p, now, 5))
		d, _ := b.TakeN(&p, now, 1)
		assert.True(t, d.Allowed)
		_, _, ok := b.ReserveN(&p, now, 1, 0, nil)
		assert.True(t, ok)
		assert.Equal(t, int64(0), int64(w.Load()), "Unlimited stored a state")
	}
	assert.False(t, b.AllowN(&p, 1, -1), "n < 0 is denied even when unlimited")
	lim := newLimiter(t, gcra.Unlimited, 1)
	assert.True(t, lim.Allow())
	assert.True(t, lim.AllowN(time.Now(), 1000))
	assert.False(t, lim.AllowN(time.Now(), -1))
}

// n = 0 is a peek, admitted and consuming nothing, as in x/time/rate,
// throttled, redis-cell and redis_rate, on a t0…t3 timeline, for a finite
// limit, DenyAll and Unlimited, on every path: Bucket, Limiter, Keyed (no key
// created), Reserve and Wait. Before the fix it was denied with RetryAfter
// Never. n < 0 stays invalid.
func TestZeroNIsAnAdmittedPeek(t *testing.T) {
	ms := time.Millisecond
	for _, lc := range []struct {
		name  string
		limit gcra.Limit
		burst int
	}{{"finite", gcra.Per(10, time.Second), 2}, {"deny-all", gcra.DenyAll, 0}, {"unlimited", gcra.Unlimited, 0}} {
		clk := newFakeClock()
		lim := newLimiter(t, lc.limit, lc.burst, atomiclimit.WithClock(clk))
		k := newKeyed[string](t, lc.limit, lc.burst, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
		params, err := gcra.NewParams(lc.limit, lc.burst)
		p := &params
		require.NoError(t, err)
		var w atomic.Uint64 // the bucket's word, read back to see what it stored
		b := algo.BucketOf(&w)
		for i, at := range []time.Duration{0, 0, 50 * ms, 10 * ms} { // t0…t3, t3 jumps back
			clk.Set(at)
			now := clk.Now()
			lim.AllowN(now, 1) // drain a token where there is one, so the state is not the zero one
			before, tat := lim.PeekN(now, 1), int64(w.Load())
			assert.True(t, lim.AllowN(now, 0), "%s step %d: AllowN(0)", lc.name, i)
			d := lim.TakeN(now, 0)
			assert.True(t, d.Allowed, "%s step %d: DecideAt(0)", lc.name, i)
			assert.Zero(t, d.RetryAfter, "%s step %d: RetryAfter", lc.name, i)
			assert.Equal(t, lim.PeekN(now, 0).Remaining, d.Remaining, "%s step %d: the state as it is", lc.name, i)
			r, err := lim.ReserveN(now, 0)
			require.NoError(t, err, "%s step %d: ReserveN(0)", lc.name, i)
			assert.Zero(t, r.DelayFrom(now))
			r.CancelAt(now)
			require.NoError(t, lim.WaitNWithTimer(context.Background(), 0, nil), "%s step %d: WaitN(0)", lc.name, i)
			assert.Equal(t, before, lim.PeekN(now, 1), "%s step %d: nothing consumed", lc.name, i)

			assert.True(t, b.AllowN(p, int64(at), 0))
			assert.True(t, bucketDecide(b, p, int64(at), 0).Allowed)
			_, wait, ok := b.ReserveN(p, int64(at), 0, 0, nil)
			assert.True(t, ok)
			assert.Zero(t, wait)
			assert.Equal(t, tat, int64(w.Load()), "%s step %d: the bucket stored nothing", lc.name, i)

			assert.True(t, k.AllowN("new", now, 0), "%s step %d: keyed AllowN(0)", lc.name, i)
			assert.True(t, decideN(k, "new", now, 0).Allowed, "%s step %d: keyed DecideAt(0)", lc.name, i)
			_, err = k.ReserveN("new", now, 0)
			require.NoError(t, err)
			require.NoError(t, k.WaitNWithTimer(context.Background(), "new", 0, nil))
			assert.Zero(t, k.Stats().Keys, "%s step %d: n = 0 creates no key", lc.name, i)

			assert.False(t, lim.AllowN(now, -1), "%s step %d: n < 0", lc.name, i)
			assert.Equal(t, gcra.Never, lim.TakeN(now, -1).RetryAfter)
			_, err = lim.ReserveN(now, -1)
			assert.ErrorIs(t, err, gcra.ErrInvalidN)
			assert.Contains(t, err.Error(), "at least 0")
		}
	}
}

const goroutines = 16

// hammer runs f on goroutines goroutines at once and returns the sum of what
// they return. Every goroutine does a bounded amount of work.
func hammer(f func(g int) int64) int64 {
	var total int64
	for _, n := range hammerEach(f) {
		total += n
	}
	return total
}

// hammerEach runs f on goroutines goroutines released at once and returns
// what each returned. Every goroutine does a bounded amount of work.
func hammerEach[T any](f func(g int) T) []T {
	out := make([]T, goroutines)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[g] = f(g)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// In rounds separated by barriers, the clock moves and every goroutine takes
// tokens until it is denied. Each round must admit exactly what the same
// round admits when one goroutine runs it: none lost to a race, none minted
// by one. The steps include refills of a fraction of a token, of several, and
// an idle stretch far longer than B·T, after which exactly B pass.
func TestConcurrentAdmissionIsExact(t *testing.T) {
	const burst = 7
	interval := 10 * time.Millisecond
	clk, seqClk := newFakeClock(), newFakeClock()
	lim := newLimiter(t, gcra.Every(interval), burst, atomiclimit.WithClock(clk))
	seq := newLimiter(t, gcra.Every(interval), burst, atomiclimit.WithClock(seqClk))
	steps := []time.Duration{0, 3 * time.Millisecond, 7 * time.Millisecond, 50 * time.Millisecond, time.Millisecond, 0, 12 * time.Second}
	wants := []int64{burst, 0, 1, 5, 0, 0, burst}
	for r, step := range steps {
		clk.Advance(step)
		seqClk.Advance(step)
		got := hammer(func(int) int64 { return drain(lim) })
		want := drain(seq)
		require.Equal(t, wants[r], want, "round %d: sequential reference", r)
		require.Equal(t, want, got, "round %d: concurrent", r)
	}
}

// Under the real monotonic clock, with goroutines that read the time and
// are then delayed before deciding (a stale now), and random n: admitted
// tokens ≤ B + elapsed/T, elapsed measured around the whole run.
func TestConcurrentBoundWithStaleNow(t *testing.T) {
	const burst = 10
	interval := 2 * time.Microsecond
	lim := newLimiter(t, gcra.Every(interval), burst)
	start := time.Now()
	admitted := hammer(func(g int) int64 {
		var tokens int64
		for i := 0; i < 3000; i++ {
			now := time.Now()
			if i%7 == g%7 {
				runtime.Gosched() // let others move the state past now
			}
			n := 1 + (i+g)%3
			if lim.AllowN(now, n) {
				tokens += int64(n)
			}
		}
		return tokens
	})
	elapsed := time.Since(start)
	bound := int64(burst) + int64(elapsed/interval)
	assert.LessOrEqual(t, admitted, bound, "elapsed %v", elapsed)
	assert.Greater(t, admitted, int64(burst), "the run should admit beyond the burst")
}

// Allow with the default clock under contention: the same bound.
func TestConcurrentBoundDefaultClock(t *testing.T) {
	const burst = 5
	interval := time.Microsecond
	lim := newLimiter(t, gcra.Every(interval), burst)
	start := time.Now()
	admitted := hammer(func(int) int64 {
		var n int64
		for i := 0; i < 5000; i++ {
			if lim.Allow() {
				n++
			}
		}
		return n
	})
	elapsed := time.Since(start)
	assert.LessOrEqual(t, admitted, int64(burst)+int64(elapsed/interval), "elapsed %v", elapsed)
}

// Reservations and refunds racing at one frozen instant. Exactly B
// reservations are immediate, whatever the delayed ones do with Cancel. Every
// reservation adds T to the state and every refund takes T back (now is
// frozen below every refunded slot), so the final state is exactly
// T·(B + delayed − refunded): no refund lost, none applied twice, none
// applied to the wrong reservation.
func TestConcurrentReserveCancel(t *testing.T) {
	clk := newFakeClock()
	const burst, perG = 5, 200
	interval := time.Second
	lim := newLimiter(t, gcra.Every(interval), burst, atomiclimit.WithClock(clk))
	var refunded atomic.Int64
	immediate := hammer(func(int) int64 {
		var n int64
		for i := 0; i < perG; i++ {
			r, err := lim.Reserve()
			if err != nil {
				panic(err)
			}
			if r.Delay() == 0 {
				n++
			} else if r.CancelReporting() {
				refunded.Add(1)
			}
		}
		return n
	})
	assert.Equal(t, int64(burst), immediate)
	delayed := int64(goroutines*perG - burst)
	owed := delayed - refunded.Load() // delayed reservations still holding a slot
	assert.Positive(t, refunded.Load(), "some cancellation must have refunded")
	// Peek's RetryAfter for one token is TAT + T − now − B·T = T·(owed + 1).
	assert.Equal(t, time.Duration(owed+1)*interval, lim.Peek(1).RetryAfter)
}
