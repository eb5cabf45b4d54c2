package atomiclimit_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

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
