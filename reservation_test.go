package atomiclimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

func TestReserveAndCancel(t *testing.T) {
	clk := newFakeClock()
	lim := newLimiter(t, gcra.Per(10, time.Second), 2, atomiclimit.WithClock(clk)) // T 100ms
	ms := time.Millisecond

	var rs []*atomiclimit.Reservation
	for i, want := range []time.Duration{0, 0, 100 * ms, 200 * ms} {
		r, err := lim.ReserveN(clk.Now(), 1)
		require.NoError(t, err)
		assert.Equal(t, want, r.Delay(), "reservation %d", i)
		assert.Equal(t, want, r.DelayFrom(clk.Now()), "reservation %d", i)
		rs = append(rs, r)
	}
	// Cancelling in any order gives back: the middle one's slot comes back
	// (the last one keeps the time it was promised), then the last one's.
	// State: TAT 400ms, so one more token would wait 300ms.
	require.Equal(t, 300*ms, lim.Peek(1).RetryAfter)
	rs[2].Cancel()
	assert.Equal(t, 200*ms, lim.Peek(1).RetryAfter, "the middle one given back")
	rs[3].Cancel()
	rs[3].Cancel() // idempotent
	assert.Equal(t, 100*ms, lim.Peek(1).RetryAfter, "then the last one")
	rs[2].Cancel() // idempotent
	assert.Equal(t, 100*ms, lim.Peek(1).RetryAfter)

	// Tokens that are already due are not refunded.
	clk.Set(time.Second) // full again
	r, err := lim.Reserve()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), r.Delay())
	clk.Advance(ms)
	r.Cancel()
	assert.Equal(t, 1, lim.Peek(0).Remaining, "due tokens count as used")

	// A reservation due in the future, cancelled part-way: only the part of
	// its slot that is still ahead comes back (the state never goes below now).
	clk.Set(10 * time.Second)
	full := lim.Peek(0).Remaining
	require.Equal(t, 2, full)
	r1, _ := lim.Reserve()
	r2, _ := lim.Reserve()
	r3, _ := lim.Reserve()
	require.Equal(t, 100*ms, r3.Delay())
	r3.Cancel()
	r2.Cancel() // due now (delay 0, now == its time): refunded
	r1.Cancel()
	assert.Equal(t, 2, lim.Peek(0).Remaining, "LIFO cancellation restores the bucket")

	// After a give-back moved later slots, a later reservation is not alone
	// any more; but none queued behind it since, so nothing can be due after
	// it: it gives back its whole slot.
	clk.Set(20 * time.Second) // full again
	a, _ := lim.Reserve()     // due now
	b, _ := lim.Reserve()     // due now
	c, _ := lim.Reserve()     // due at +100ms
	d, _ := lim.Reserve()     // due at +200ms
	require.Equal(t, 200*ms, d.Delay())
	clk.Advance(50 * ms)
	c.Cancel() // alone: its whole slot; d's slot moves down
	assert.Equal(t, 150*ms, lim.Peek(1).RetryAfter, "TAT +300ms after c: one more would wait 150ms")
	d.Cancel() // not alone, nothing queued since: its whole 100ms
	assert.Equal(t, 50*ms, lim.Peek(1).RetryAfter, "as if c and d had never been: TAT +200ms")
	_, _ = a, b
}

func TestReserveErrors(t *testing.T) {
	lim := newLimiter(t, gcra.Per(10, time.Second), 2)
	for _, tc := range []struct {
		n    int
		want error
	}{{-1, gcra.ErrInvalidN}, {-3, gcra.ErrInvalidN}, {3, gcra.ErrExceedsBurst}} {
		_, err := lim.ReserveN(time.Now(), tc.n)
		assert.ErrorIs(t, err, tc.want, "n=%d", tc.n)
	}
	deny := newLimiter(t, gcra.DenyAll, 1)
	_, err := deny.Reserve()
	assert.ErrorIs(t, err, gcra.ErrExceedsBurst)
	assert.Equal(t, 2, lim.Peek(0).Remaining, "errors consume nothing")

	var zero atomiclimit.Reservation // zero and nil Reservations do nothing, without panicking
	zero.Cancel()
	assert.Zero(t, zero.Delay())
	var none *atomiclimit.Reservation
	none.Cancel()
	none.CancelAt(time.Now())
	assert.Zero(t, none.Delay())
	assert.Zero(t, none.DelayFrom(time.Now()))
}

// manualTimer hands each timer the code under test creates to the test.
type manualTimer struct {
	created chan time.Duration
	fire    chan time.Time
	stopped chan struct{}
}

func newManualTimer() *manualTimer {
	return &manualTimer{created: make(chan time.Duration, 1), fire: make(chan time.Time), stopped: make(chan struct{}, 1)}
}

func (m *manualTimer) new(d time.Duration) (<-chan time.Time, func() bool) {
	m.created <- d
	return m.fire, func() bool { m.stopped <- struct{}{}; return true }
}

func TestWaitFiresAfterTheDelay(t *testing.T) {
	clk := newFakeClock()
	lim := newLimiter(t, gcra.Per(10, time.Second), 1, atomiclimit.WithClock(clk))
	require.True(t, lim.Allow())

	mt := newManualTimer()
	done := make(chan error)
	go func() { done <- lim.WaitNWithTimer(context.Background(), 1, mt.new) }()
	assert.Equal(t, 100*time.Millisecond, <-mt.created, "waits exactly the retry-after")
	mt.fire <- time.Time{}
	require.NoError(t, <-done)
	<-mt.stopped // the timer is stopped on return
	assert.False(t, lim.Allow(), "the waiter holds the token")
}

func TestWaitCancelledRefunds(t *testing.T) {
	clk := newFakeClock()
	lim := newLimiter(t, gcra.Per(10, time.Second), 1, atomiclimit.WithClock(clk))
	require.True(t, lim.Allow())
	before := lim.Peek(1)

	mt := newManualTimer()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- lim.WaitNWithTimer(ctx, 1, mt.new) }()
	<-mt.created
	assert.Equal(t, 200*time.Millisecond, lim.Peek(1).RetryAfter, "the waiter reserved a slot")
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	<-mt.stopped
	assert.Equal(t, before, lim.Peek(1), "the cancelled wait gave its token back")
}

func TestWaitFailsAtOnce(t *testing.T) {
	// The fake clock runs an hour ahead of the real one, so a deadline in
	// its terms is in the future for the context too.
	clk := &fakeClock{base: time.Now().Add(time.Hour).Round(0)}
	lim := newLimiter(t, gcra.Per(10, time.Second), 2, atomiclimit.WithClock(clk))
	noTimer := func(time.Duration) (<-chan time.Time, func() bool) {
		t.Fatal("no timer may be created")
		return nil, nil
	}

	// Tokens available: no timer at all.
	require.NoError(t, lim.WaitNWithTimer(context.Background(), 2, noTimer))
	before := lim.Peek(1)

	// The wait would pass the deadline: ErrDeadline, nothing consumed. (The
	// fake clock's time is compared with the deadline, as x/time/rate does.)
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(150*time.Millisecond))
	defer cancel()
	err := lim.WaitNWithTimer(ctx, 2, noTimer) // needs 200ms
	assert.ErrorIs(t, err, atomiclimit.ErrDeadline)
	assert.Regexp(t, `^atomiclimit: `, err.Error())
	assert.Equal(t, before, lim.Peek(1))

	// Bad n, and a context already done.
	assert.ErrorIs(t, lim.WaitNWithTimer(context.Background(), -1, noTimer), gcra.ErrInvalidN)
	assert.ErrorIs(t, lim.WaitNWithTimer(context.Background(), 3, noTimer), gcra.ErrExceedsBurst)
	done, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	assert.ErrorIs(t, lim.WaitNWithTimer(done, 1, noTimer), context.Canceled)
	assert.Equal(t, before, lim.Peek(1))
}

// With the real clock and timer: Wait returns no earlier than the delay it
// was given, and a cancelled Wait leaves no goroutine behind.
func TestWaitRealClock(t *testing.T) {
	lim := newLimiter(t, gcra.Every(2*time.Millisecond), 1)
	require.NoError(t, lim.Wait(context.Background()))
	start := time.Now()
	due := lim.Peek(1).RetryAfter // read after start: the slot is due at least this long after start
	require.Positive(t, due)
	require.NoError(t, lim.Wait(context.Background()))
	assert.GreaterOrEqual(t, time.Since(start), due, "the second Wait waited for its slot")

	goroutines := runtime.NumGoroutine()
	slow := newLimiter(t, gcra.Every(time.Hour), 1)
	require.True(t, slow.Allow())
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	err := slow.Wait(ctx)
	assert.True(t, errors.Is(err, atomiclimit.ErrDeadline), "an hour's wait fails at once: %v", err)
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(time.Millisecond); cancel2() }()
	slow2 := newLimiter(t, gcra.Every(time.Second), 1)
	require.True(t, slow2.Allow())
	assert.ErrorIs(t, slow2.Wait(ctx2), context.Canceled)
	assert.LessOrEqual(t, slow2.Peek(1).RetryAfter, time.Second, "the cancelled wait gave its slot back (else ~2s)")
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "Wait leaks no goroutine")
}

// A context whose deadline has passed on the limiter's clock (or is now)
// fails at once with DeadlineExceeded and consumes nothing, whether the
// bucket has spare tokens, exactly one, or none: before the fix, spare
// tokens were taken and nil returned, while exactly one failed with
// ErrDeadline. The same for the keyed WaitN.
func TestWaitPastDeadlineConsumesNothing(t *testing.T) {
	ms := time.Millisecond
	noTimer := func(time.Duration) (<-chan time.Time, func() bool) {
		t.Fatal("no timer may be created")
		return nil, nil
	}
	for _, tc := range []struct {
		name     string
		used     int           // tokens taken at t0, of a burst of 3
		deadline time.Duration // relative to t1 = t0 + 10ms, on the fake clock
	}{
		{"spare tokens, deadline passed", 0, -ms},
		{"two tokens, deadline passed", 1, -ms},
		{"one token, deadline passed", 2, -ms},
		{"no token, deadline passed", 3, -ms},
		{"spare tokens, deadline now", 0, 0},
		{"one token, deadline now", 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// An hour ahead of the real clock: the context itself is not yet
			// done, only the limiter's clock has passed its deadline.
			clk := &fakeClock{base: time.Now().Add(time.Hour).Round(0)}
			lim := newLimiter(t, gcra.Per(10, time.Second), 3, atomiclimit.WithClock(clk))
			k := newKeyed[string](t, gcra.Per(10, time.Second), 3, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
			if tc.used > 0 { // t0
				require.True(t, lim.AllowN(clk.Now(), tc.used))
				require.True(t, k.AllowN("a", clk.Now(), tc.used))
			}
			clk.Advance(10 * ms) // t1
			ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(tc.deadline))
			defer cancel()
			require.NoError(t, ctx.Err(), "the context has not noticed its deadline")

			before, keyedBefore := lim.PeekN(clk.Now(), 1), k.PeekN("a", clk.Now(), 1)
			assert.ErrorIs(t, lim.WaitNWithTimer(ctx, 1, noTimer), context.DeadlineExceeded)
			assert.Equal(t, before, lim.PeekN(clk.Now(), 1), "nothing consumed")
			assert.ErrorIs(t, k.WaitNWithTimer(ctx, "a", 1, noTimer), context.DeadlineExceeded)
			assert.Equal(t, keyedBefore, k.PeekN("a", clk.Now(), 1), "nothing consumed (keyed)")
		})
	}
}

// dueAt is one live reservation: n tokens due at an instant.
type dueAt struct {
	at time.Duration
	n  int
}

// assertConforms checks a schedule of reservations against GCRA's bound:
// no window [a, b] holds more than burst + (b − a)/interval tokens due, so
// no instant has more than burst.
func assertConforms(t *testing.T, dues []dueAt, burst int, interval time.Duration) {
	t.Helper()
	sort.Slice(dues, func(i, j int) bool { return dues[i].at < dues[j].at })
	for i := range dues {
		tokens := 0
		for j := i; j < len(dues); j++ {
			tokens += dues[j].n
			if j+1 < len(dues) && dues[j+1].at == dues[j].at {
				continue // a window ends after every reservation due at its end
			}
			if bound := burst + int((dues[j].at-dues[i].at)/interval); tokens > bound {
				t.Fatalf("%d tokens due in [%v, %v], over burst + window/T = %d", tokens, dues[i].at, dues[j].at, bound)
			}
		}
	}
}

// Issue 28: with burst 4 and T = 1ms, all at one instant, reserve 4, then
// m, then 4; cancel the m and reserve m again. Before the fix the new
// reservation was promised the third one's instant: 5 tokens due at once
// (8 with m = 4). A cancelled reservation gives back only what no later one
// depends on, so every instant has at most 4 due; here nothing, as the
// third depends on all of it: the new one is due where the schedule
// without the cancelled one ends, T after the third (m = 1) or when the
// third's 4 have refilled (m = 4).
func TestCancelRespectsLaterReservations(t *testing.T) {
	type reserver interface {
		ReserveN(now time.Time, n int) (*atomiclimit.Reservation, error)
	}
	for m, wantDue := range map[int]time.Duration{1: 6 * time.Millisecond, 4: 12 * time.Millisecond} {
		for name, make := range map[string]func(atomiclimit.Clock) reserver{
			"limiter": func(c atomiclimit.Clock) reserver {
				return newLimiter(t, gcra.Every(time.Millisecond), 4, atomiclimit.WithClock(c))
			},
			"keyed": func(c atomiclimit.Clock) reserver {
				k := newKeyed[string](t, gcra.Every(time.Millisecond), 4, atomiclimit.WithClock(c), atomiclimit.WithSweepInterval(0))
				return keyedReserver{k, "k"}
			},
		} {
			t.Run(fmt.Sprintf("%s/m=%d", name, m), func(t *testing.T) {
				clk := newFakeClock()
				lim := make(clk)
				now := clk.Now()
				var rs []*atomiclimit.Reservation
				for _, n := range []int{4, m, 4} {
					r, err := lim.ReserveN(now, n)
					require.NoError(t, err)
					rs = append(rs, r)
				}
				rs[1].CancelAt(now)
				again, err := lim.ReserveN(now, m)
				require.NoError(t, err)
				assert.Equal(t, wantDue, again.DelayFrom(now))
				assertConforms(t, []dueAt{{rs[0].DelayFrom(now), 4}, {rs[2].DelayFrom(now), 4}, {again.DelayFrom(now), m}}, 4, time.Millisecond)
			})
		}
	}
}

// keyedReserver reserves on one key of a Keyed limiter.
type keyedReserver struct {
	k   *atomiclimit.Keyed[string]
	key string
}

func (r keyedReserver) ReserveN(now time.Time, n int) (*atomiclimit.Reservation, error) {
	return r.k.ReserveN(r.key, now, n)
}

// Many goroutines reserve, cancel and sweep on a few keys while the clock
// moves on; at the end the reservations not cancelled (they acted when due)
// conform to each key's bound: no instant with more than the burst due, no
// window over burst + window/T. Before the fix, 8 to 16 goroutines exceeded
// it by 1 or 2 tokens.
func TestCancelRespectsLaterReservationsConcurrently(t *testing.T) {
	const (
		burst      = 4
		interval   = time.Millisecond
		goroutines = 16
		keys       = 3
	)
	rounds := 400
	if testing.Short() || raceEnabled {
		rounds = 100
	}
	clk := newFakeClock()
	k := newKeyed[int](t, gcra.Every(interval), burst, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	var (
		mu   sync.Mutex
		live [keys][]dueAt
		wg   sync.WaitGroup
		// ticking: the clock moves only while no cancel is between its
		// check of the clock and its give-back, so that each cancel's
		// outcome (given back, or due and used) is known.
		ticking sync.RWMutex
	)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 28))
			var mine []struct {
				r   *atomiclimit.Reservation
				key int
				due time.Duration
				n   int
			}
			for i := range rounds {
				if g == 0 && i%8 == 0 {
					ticking.Lock()
					clk.Advance(time.Duration(rng.Int64N(int64(2 * interval))))
					ticking.Unlock()
					k.Sweep()
				}
				key, n := rng.IntN(keys), 1+rng.IntN(burst)
				now := clk.Now()
				r, err := k.ReserveN(key, now, n)
				if err != nil {
					continue // beyond MaxWait: none here, but harmless
				}
				mine = append(mine, struct {
					r   *atomiclimit.Reservation
					key int
					due time.Duration
					n   int
				}{r, key, now.Sub(clk.At(0)) + r.DelayFrom(now), n})
				if j := rng.IntN(len(mine)); rng.IntN(2) == 0 {
					// Cancel one of ours: if it is not due yet, it never acts.
					ticking.RLock()
					c := mine[j]
					c.r.Cancel()
					if clk.Now().Sub(clk.At(0)) <= c.due {
						mine = append(mine[:j], mine[j+1:]...)
					}
					ticking.RUnlock()
				}
			}
			mu.Lock()
			for _, c := range mine {
				live[c.key] = append(live[c.key], dueAt{c.due, c.n})
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("stats %+v", k.Stats())
	for key := range keys {
		assertConforms(t, live[key], burst, interval)
	}
}
