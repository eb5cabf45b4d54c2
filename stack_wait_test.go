package atomiclimit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// A sched runs goroutines on a fake clock as a discrete-event simulation:
// each goroutine runs until it sleeps on one of sched's timers or ends;
// once every one has, sched moves the clock to the earliest timer (the
// first made, of timers due at one instant) and fires it. An interleaving
// is forced, not hoped for, and the time a goroutine reads right after a
// Wait returns is the instant every policy admitted it at.
type sched struct {
	clk     *fakeClock
	mu      sync.Mutex
	cond    *sync.Cond
	timers  []*stimer // made and not fired
	seq     int
	running int // goroutines neither asleep on a timer nor done
}

type stimer struct {
	at  time.Duration
	seq int
	c   chan time.Time
}

func newSched(clk *fakeClock) *sched {
	s := &sched{clk: clk}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// timer is a newTimer for Wait: the goroutine that makes one sleeps on it.
func (s *sched) timer(d time.Duration) (<-chan time.Time, func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &stimer{at: time.Duration(s.clk.ns.Load()) + d, seq: s.seq, c: make(chan time.Time, 1)}
	s.seq++
	s.timers = append(s.timers, t)
	s.running--
	s.cond.Broadcast()
	return t.c, func() bool { return true }
}

// goN runs f in n goroutines, each given its index.
func (s *sched) goN(n int, f func(i int)) {
	s.mu.Lock()
	s.running += n
	s.mu.Unlock()
	for i := range n {
		go func() {
			defer func() {
				s.mu.Lock()
				s.running--
				s.cond.Broadcast()
				s.mu.Unlock()
			}()
			f(i)
		}()
	}
}

// run fires the timers in order until every goroutine is done.
func (s *sched) run(t *testing.T) {
	for {
		s.mu.Lock()
		for s.running > 0 {
			s.cond.Wait()
		}
		if len(s.timers) == 0 {
			s.mu.Unlock()
			return
		}
		i := 0
		for j, tm := range s.timers {
			if tm.at < s.timers[i].at || tm.at == s.timers[i].at && tm.seq < s.timers[i].seq {
				i = j
			}
		}
		tm := s.timers[i]
		s.timers = slices.Delete(s.timers, i, i+1)
		if now := time.Duration(s.clk.ns.Load()); tm.at < now {
			t.Fatalf("a timer due at %v fires at %v", tm.at, now)
		}
		s.clk.Set(tm.at)
		s.running++
		s.mu.Unlock()
		tm.c <- time.Time{}
	}
}

// firstBreak returns the index of the first instant at which the instants
// (sorted) break GCRA with interval T and burst B (more than B at once,
// or closer than a bucket that refills one token per T allows), or -1.
func firstBreak(instants []time.Duration, T time.Duration, B int) int {
	ts := slices.Sorted(slices.Values(instants))
	tat := time.Duration(math.MinInt64 / 2)
	for i, t := range ts {
		if t < tat-time.Duration(B-1)*T {
			return i
		}
		tat = max(tat, t) + T
	}
	return -1
}

// sends records the instants at which requests were admitted.
type sends struct {
	mu sync.Mutex
	at []time.Duration
}

func (s *sends) add(d time.Duration) {
	s.mu.Lock()
	s.at = append(s.at, d)
	s.mu.Unlock()
}

// The hazard of waiting on several policies, forced: A admits 1 per second
// (burst 1), B one per 250ms but owes its first second. Four goroutines
// send three requests each. Reserving on each policy and acting when the
// last is due (the naive way) sends two requests within A's second as soon
// as B lets the first go: firstBreak finds it. Stack.Wait holds nothing
// while it waits, so every send keeps both bounds, at the instants they
// happen, and every request is served.
func TestStackWaitKeepsEveryBoundOnTheSends(t *testing.T) {
	const goroutines, each = 4, 3
	setup := func() (*fakeClock, *atomiclimit.Keyed[string], *atomiclimit.Keyed[string], *atomiclimit.Stack[string], []time.Duration) {
		clk := newFakeClock()
		a := stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(time.Second), 1))
		b := stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(250*time.Millisecond), 1))
		var owed []time.Duration // B's first second, reserved before the run
		for range 4 {
			r, err := b.ReserveN("k", clk.Now(), 1)
			if err != nil {
				t.Fatal(err)
			}
			owed = append(owed, r.DelayFrom(clk.Now()))
		}
		return clk, a, b, newStack(t, pol("a", a), pol("b", b)), owed
	}

	// The naive way: a reservation on each policy, then the latest wait.
	clk, a, b, _, _ := setup()
	s := newSched(clk)
	var naive sends
	s.goN(goroutines, func(int) {
		for range each {
			ra, _ := a.ReserveN("k", clk.Now(), 1)
			rb, _ := b.ReserveN("k", clk.Now(), 1)
			if d := max(ra.DelayFrom(clk.Now()), rb.DelayFrom(clk.Now())); d > 0 {
				c, _ := s.timer(d)
				<-c
			}
			naive.add(time.Duration(clk.ns.Load()))
		}
	})
	s.run(t)
	if i := firstBreak(naive.at, time.Second, 1); i < 0 {
		t.Fatalf("the naive sends %v keep A's bound: the test cannot see the hazard", naive.at)
	}

	// Stack.Wait, with a jitter of half its range.
	clk, _, _, st, owed := setup()
	s = newSched(clk)
	var sent sends
	errs := make(chan error, goroutines*each)
	s.goN(goroutines, func(int) {
		for range each {
			var out [2]atomiclimit.Outcome
			res, _, err := st.WaitWithKit(context.Background(), "k", 1, 0, out[:], s.timer, func(j int64) int64 { return j / 2 })
			if res != atomiclimit.Pass {
				errs <- fmt.Errorf("Wait: %v, %v", res, err)
				return
			}
			sent.add(time.Duration(clk.ns.Load()))
		}
	})
	s.run(t)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(sent.at) != goroutines*each {
		t.Fatalf("%d requests served, want %d", len(sent.at), goroutines*each)
	}
	if i := firstBreak(sent.at, time.Second, 1); i >= 0 {
		t.Errorf("A's bound (1/s, burst 1) broken by the sends %v", slices.Sorted(slices.Values(sent.at)))
	}
	if i := firstBreak(append(owed, sent.at...), 250*time.Millisecond, 1); i >= 0 {
		t.Errorf("B's bound broken by the sends %v after %v", sent.at, owed)
	}
	if last := slices.Max(sent.at); last > time.Duration(goroutines*each+1)*time.Second {
		t.Errorf("the last request went at %v: the waiters lost more than a second each", last)
	}
}

// A lone GCRA policy is waited for in order: eight goroutines of four
// requests each, all from t0, go exactly at the times a bucket of burst 2
// that refills one per 100ms allows, none later: the schedule is full.
func TestStackWaitLonePolicyInOrder(t *testing.T) {
	const goroutines, each, B = 8, 4, 2
	T := 100 * time.Millisecond
	clk := newFakeClock()
	k := stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(T), B))
	st := newStack(t, pol("a", k))
	s := newSched(clk)
	var sent sends
	var waited sync.Map
	s.goN(goroutines, func(g int) {
		for i := range each {
			var out [1]atomiclimit.Outcome
			res, _, err := st.WaitWithKit(context.Background(), "k", 1, 0, out[:], s.timer, nil)
			if res != atomiclimit.Pass {
				t.Errorf("Wait: %v, %v", res, err)
				return
			}
			waited.Store([2]int{g, i}, out[0].Waited)
			sent.add(time.Duration(clk.ns.Load()))
		}
	})
	s.run(t)
	got := slices.Sorted(slices.Values(sent.at))
	for i, at := range got {
		if want := time.Duration(max(i-B+1, 0)) * T; at != want {
			t.Fatalf("send %d at %v, want %v: sends %v", i, at, want, got)
		}
	}
	// Outcome.Waited is the wait each one had: the sum is the schedule's.
	var sum, want time.Duration
	waited.Range(func(_, v any) bool { sum += v.(time.Duration); return true })
	for i := range goroutines * each {
		want += time.Duration(max(i-B+1, 0)) * T
	}
	if sum > want {
		t.Errorf("the requests waited %v in all, more than the schedule's %v", sum, want)
	}
}

// noTimer fails the test if a wait makes a timer: it was to fail at once.
func noTimer(t *testing.T) func(time.Duration) (<-chan time.Time, func() bool) {
	return func(d time.Duration) (<-chan time.Time, func() bool) {
		t.Fatalf("a timer of %v: the wait was to fail at once", d)
		return nil, nil
	}
}

// A wait that cannot end by the deadline, the given one or ctx's, fails at
// once, taking nothing, with ErrDeadline and the wait needed in out; one
// that no wait ends fails with ErrExceedsBurst; a ctx past its deadline
// is Gone. The same on both ways of waiting.
func TestStackWaitFailsAtOnce(t *testing.T) {
	clk := newFakeClock()
	hour := stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(time.Hour), 1))
	other := stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(time.Second), 5))
	for _, st := range []*atomiclimit.Stack[string]{newStack(t, pol("hour", hour)), newStack(t, pol("second", other), pol("hour", hour))} {
		name := fmt.Sprintf("%d policies", st.Len())
		out := make([]atomiclimit.Outcome, st.Len())
		res, _, err := st.WaitWithKit(context.Background(), "k", 1, 0, out, noTimer(t), nil)
		if res != atomiclimit.Pass || err != nil {
			t.Fatalf("%s: first request: %v %v", name, res, err)
		}
		before := peek(hour, "k", 1)
		beforeOther := peek(other, "k", 1)

		clear(out)
		res, at, err := st.WaitWithKit(context.Background(), "k", 1, time.Minute, out, noTimer(t), nil)
		if res != atomiclimit.Deny || !errors.Is(err, atomiclimit.ErrDeadline) {
			t.Errorf("%s: an hour's wait with a minute left: %v %v, want Deny and ErrDeadline", name, res, err)
		}
		if d := st.Denied(out); d.RetryAfter != time.Hour || st.Policy(at).Name != "hour" {
			t.Errorf("%s: the denial says %+v at %d, want the hour's wait", name, d, at)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		clear(out)
		res, _, err = st.WaitWithKit(ctx, "k", 1, 0, out, noTimer(t), nil)
		cancel()
		if res != atomiclimit.Deny || !errors.Is(err, atomiclimit.ErrDeadline) {
			t.Errorf("%s: with ctx's minute: %v %v", name, res, err)
		}
		clear(out)
		if res, _, err = st.WaitWithKit(context.Background(), "k", 2, 0, out, noTimer(t), nil); res != atomiclimit.Deny || !errors.Is(err, atomiclimit.ErrExceedsBurst) {
			t.Errorf("%s: n above the burst: %v %v", name, res, err)
		}
		past, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		clear(out)
		res, _, err = st.WaitWithKit(past, "k", 1, 0, out, noTimer(t), nil)
		cancel()
		if res != atomiclimit.Gone || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: ctx past its deadline: %v %v", name, res, err)
		}
		if peek(hour, "k", 1) != before || peek(other, "k", 1) != beforeOther {
			t.Errorf("%s: a failed wait took tokens", name)
		}
		clk.Advance(2 * time.Hour)
	}
}

// A ctx that ends while Wait sleeps returns Gone, and what the request
// held comes back: a lone policy's reservation is cancelled, and the other
// way holds nothing while it sleeps.
func TestStackWaitCancelled(t *testing.T) {
	clk := newFakeClock()
	a := stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(time.Second), 1))
	b := stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(time.Second), 2))
	for _, st := range []*atomiclimit.Stack[string]{newStack(t, pol("a", a)), newStack(t, pol("b", b), pol("a", a))} {
		out := make([]atomiclimit.Outcome, st.Len())
		if res, _, _ := st.Wait(context.Background(), "k", 1, 0, out); res != atomiclimit.Pass {
			t.Fatal(res)
		}
		beforeA, beforeB := peek(a, "k", 1), peek(b, "k", 1)
		timers := make(chan time.Duration, 1)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			out := make([]atomiclimit.Outcome, st.Len())
			res, _, err := st.WaitWithKit(ctx, "k", 1, 0, out, func(d time.Duration) (<-chan time.Time, func() bool) {
				timers <- d
				return nil, func() bool { return true }
			}, func(int64) int64 { return 0 })
			if res != atomiclimit.Gone {
				err = fmt.Errorf("%v, %w", res, err)
			}
			done <- err
		}()
		if d := <-timers; d != time.Second {
			t.Errorf("%d policies: sleeps %v, want the second a's bucket needs", st.Len(), d)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("%d policies: %v, want Gone and context.Canceled", st.Len(), err)
		}
		if peek(a, "k", 1) != beforeA || peek(b, "k", 1) != beforeB {
			t.Errorf("%d policies: a cancelled wait kept tokens", st.Len())
		}
		clk.Advance(time.Hour)
	}
}

// The retry way sleeps the longest wait, plus a jitter within [0,
// min(wait/4, T, 1s)) of that policy; the waiters told the same instant
// are spread, none comes back before its wait; Waited says whose it was.
func TestStackWaitJitter(t *testing.T) {
	clk := newFakeClock()
	a := stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(time.Millisecond), 10))
	b := stackKeyed(t, clk, atomiclimit.FixedWindow(4, time.Second))
	st := newStack(t, pol("a", a), pol("b", b))
	var out [2]atomiclimit.Outcome
	for range 4 {
		clear(out[:])
		if res, _, _ := st.Wait(context.Background(), "k", 1, 0, out[:]); res != atomiclimit.Pass {
			t.Fatal(res)
		}
		clk.Advance(50 * time.Millisecond)
	}
	const waiters = 5
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sleeps := make(chan time.Duration, 2*waiters)
	release := make(chan time.Time)
	var round atomic.Int32
	results := make(chan [2]atomiclimit.Outcome, waiters)
	for range waiters {
		go func() {
			var out [2]atomiclimit.Outcome
			res, _, _ := st.WaitWithKit(ctx, "k", 1, 0, out[:], func(d time.Duration) (<-chan time.Time, func() bool) {
				sleeps <- d
				if round.Load() == 0 {
					return release, func() bool { return true }
				}
				return nil, func() bool { return true } // until ctx ends
			}, nil)
			if res == atomiclimit.Pass {
				results <- out
			}
		}()
	}
	seen := map[time.Duration]bool{}
	for range waiters {
		d := <-sleeps
		// b's window ends in 800ms, and its quota gives a token per 250ms:
		// the jitter is below min(800ms/4, 250ms, 1s) = 200ms.
		if d < 800*time.Millisecond || d >= time.Second {
			t.Errorf("a sleep of %v, want [800ms, 1s)", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Errorf("the %d waiters sleep alike: %v", waiters, seen)
	}
	clk.Advance(time.Second) // b's next window, 200ms old
	round.Store(1)
	close(release) // all wake: four are admitted, the fifth meets b again
	for range 4 {
		out := <-results
		if out[1].Waited < 800*time.Millisecond || out[0].Waited != 0 {
			t.Errorf("Waited %v, %v: want b's wait, none for a", out[0].Waited, out[1].Waited)
		}
	}
	if d := <-sleeps; d < 800*time.Millisecond || d >= time.Second {
		t.Errorf("a second sleep of %v, want b's 800ms and its jitter", d)
	}
}

// waitingLimiter is a limiter that waits itself (as redislimit.Limiter
// does), with the error told, recording the deadlines it is handed.
type waitingLimiter struct {
	*atomiclimit.Keyed[string]
	err       error
	deadlines []time.Time
}

func (w *waitingLimiter) WaitN(ctx context.Context, key string, n int) error {
	dl, _ := ctx.Deadline()
	w.deadlines = append(w.deadlines, dl)
	if w.err != nil {
		return w.err
	}
	_, _, err := w.Keyed.Take(ctx, key, n)
	return err
}

// A lone policy whose limiter waits itself is handed the wait, with the
// earlier deadline; its errors become Wait's results.
func TestStackWaitHandsTheWait(t *testing.T) {
	clk := newFakeClock()
	w := &waitingLimiter{Keyed: stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(time.Minute), 1))}
	st := newStack(t, pol("remote", w))
	var out [1]atomiclimit.Outcome
	before := time.Now()
	if res, _, err := st.Wait(context.Background(), "k", 1, time.Minute, out[:]); res != atomiclimit.Pass || err != nil || out[0].Kind != atomiclimit.Admitted {
		t.Fatalf("%v %v %+v", res, err, out[0])
	}
	after := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ctxDL, _ := ctx.Deadline()
	st.Wait(ctx, "k", 1, time.Minute, out[:])
	if dl := w.deadlines[0]; dl.Before(before.Add(time.Minute)) || dl.After(after.Add(time.Minute)) || !w.deadlines[1].Equal(ctxDL) {
		t.Errorf("deadlines handed %v, want a minute from the call, then ctx's %v", w.deadlines, ctxDL)
	}
	for _, c := range []struct {
		err  error
		want atomiclimit.Result
		is   error
	}{
		{fmt.Errorf("remote: %w", atomiclimit.ErrDeadline), atomiclimit.Deny, atomiclimit.ErrDeadline},
		{fmt.Errorf("remote: %w", atomiclimit.ErrExceedsBurst), atomiclimit.Deny, atomiclimit.ErrExceedsBurst},
		{fmt.Errorf("remote: %w", atomiclimit.ErrTooManyKeys), atomiclimit.Overloaded, atomiclimit.ErrTooManyKeys},
		{fmt.Errorf("remote: %w: %w", errDown, atomiclimit.ErrFallback), atomiclimit.Deny, atomiclimit.ErrFallback},
		{errDown, atomiclimit.Unavailable, errDown},
	} {
		w.err = c.err
		clear(out[:])
		res, _, err := st.Wait(context.Background(), "k", 1, 0, out[:])
		if res != c.want || !errors.Is(err, c.is) {
			t.Errorf("WaitN's %v: %v %v, want %v", c.err, res, err, c.want)
		}
		if res == atomiclimit.Deny && c.is == atomiclimit.ErrDeadline && out[0].Decision.RetryAfter != time.Minute {
			t.Errorf("the denial's wait %v, want the minute Peek finds", out[0].Decision.RetryAfter)
		}
	}
	w.err = context.Canceled
	done, stop := context.WithCancel(context.Background())
	stop()
	if res, _, err := st.Wait(done, "k", 1, 0, out[:]); res != atomiclimit.Gone || !errors.Is(err, context.Canceled) {
		t.Errorf("a caller gone: %v %v", res, err)
	}
}

// Report hears a wait as a Waited event of the policy that made it, before
// its Allowed.
func TestStackWaitReported(t *testing.T) {
	clk := newFakeClock()
	k := stackKeyed(t, clk, atomiclimit.GCRA(gcra.Every(time.Second), 1))
	st := newStack(t, pol("a", k))
	var events []string
	h := &atomiclimit.Hook{
		Allowed: func(p string, n int) { events = append(events, fmt.Sprintf("allowed %s %d", p, n)) },
		Waited: func(p string, n int, d time.Duration) {
			events = append(events, fmt.Sprintf("waited %s %d %v", p, n, d))
		},
	}
	for range 2 {
		var out [1]atomiclimit.Outcome
		res, _, _ := st.WaitWithKit(context.Background(), "k", 1, 0, out[:], func(d time.Duration) (<-chan time.Time, func() bool) {
			c := make(chan time.Time, 1)
			clk.Advance(d)
			c <- time.Time{}
			return c, func() bool { return true }
		}, nil)
		st.Report(h, res, out[:], 1)
	}
	if want := []string{"allowed a 1", "waited a 1 1s", "allowed a 1"}; !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
}

// Wait allocates nothing with in-process limiters: admitted at once, and
// after a wait, either way (the real timers are reused).
func TestStackWaitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	at := func(T time.Duration, B int) *atomiclimit.Keyed[string] {
		k, err := atomiclimit.NewKeyed[string](gcra.Every(T), B, atomiclimit.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, c := range []struct {
		name string
		st   *atomiclimit.Stack[string]
	}{
		{"lone, at once", newStack(t, pol("a", at(time.Nanosecond, 1000)))},
		{"two, at once", newStack(t, pol("a", at(time.Nanosecond, 1000)), pol("b", at(time.Nanosecond, 1000)))},
		{"lone, waits", newStack(t, pol("a", at(20*time.Microsecond, 1)))},
		{"two, wait", newStack(t, pol("a", at(20*time.Microsecond, 1)), pol("b", at(10*time.Microsecond, 1)))},
	} {
		var out [2]atomiclimit.Outcome
		allocs := testing.AllocsPerRun(200, func() {
			clear(out[:])
			if res, _, err := c.st.Wait(context.Background(), "k", 1, 0, out[:c.st.Len()]); res != atomiclimit.Pass {
				t.Fatal(res, err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per Wait, want 0", c.name, allocs)
		}
	}
}

// Sixteen goroutines wait on two policies with the real clock and timers:
// every request is served, and no policy admitted more than its bound over
// the run (B + elapsed/T).
func TestStackWaitConcurrent(t *testing.T) {
	const goroutines, each = 16, 25
	T, B := 200*time.Microsecond, 4
	a, err := atomiclimit.NewKeyed[string](gcra.Every(T), B, atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := atomiclimit.NewKeyedRule[string](atomiclimit.FixedWindow(10, 5*time.Millisecond), atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	st := newStack(t, pol("a", a), pol("b", b))
	var served atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				var out [2]atomiclimit.Outcome
				if res, _, err := st.Wait(context.Background(), "k", 1, 0, out[:]); res != atomiclimit.Pass {
					t.Error(res, err)
					return
				}
				served.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := served.Load(); n != goroutines*each {
		t.Fatalf("%d served, want %d", n, goroutines*each)
	}
	if max := int64(B) + int64(elapsed/T); served.Load() > max {
		t.Errorf("a admitted %d in %v, over its bound %d", served.Load(), elapsed, max)
	}
	if max := 10 * (int64(elapsed/(5*time.Millisecond)) + 1); served.Load() > max {
		t.Errorf("b admitted %d in %v, over its bound %d", served.Load(), elapsed, max)
	}
}
