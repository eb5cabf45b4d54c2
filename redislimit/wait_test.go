package redislimit_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// manualTimer stands for time.NewTimer in WaitN (SetTimer): the test
// hears each timer's duration, fires it, and hears it stopped.
type manualTimer struct {
	created chan time.Duration
	fire    chan time.Time
	stopped chan struct{}
}

func newManualTimer() *manualTimer {
	return &manualTimer{created: make(chan time.Duration, 16), fire: make(chan time.Time), stopped: make(chan struct{}, 16)}
}

func (m *manualTimer) new(d time.Duration) (<-chan time.Time, func() bool) {
	m.created <- d
	return m.fire, func() bool { m.stopped <- struct{}{}; return true }
}

// recv receives from c, or fails the test after 10s: a WaitN that never
// makes its timer, or never returns, fails instead of hanging the run.
func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received in 10s")
	}
	panic("unreachable")
}

// noTimer fails the test if WaitN creates a timer.
func noTimer(t *testing.T) func(time.Duration) (<-chan time.Time, func() bool) {
	return func(d time.Duration) (<-chan time.Time, func() bool) {
		t.Errorf("a timer of %v: none may be created", d)
		return nil, func() bool { return true }
	}
}

// TestWaitSleepsTheWait: Wait sleeps for the wait the script returned,
// less the time since its reply arrived, once, and stops its timer; the
// waiter's slot is held meanwhile.
func TestWaitSleepsTheWait(t *testing.T) {
	s := sharedServer(t)
	cs := &countingScripter{Client: s.client(t)}
	ctx := context.Background()
	l, err := redislimit.New(cs, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	waits := make(chan time.Duration, 1)
	l.OnReserved(func(_ context.Context, ok bool, wait time.Duration, _, _, _ int64) { waits <- wait })
	mt := newManualTimer()
	l.SetTimer(mt.new)
	require.True(t, l.Allow(ctx, "k"))
	calls := cs.count()

	done := make(chan error)
	go func() { done <- l.Wait(ctx, "k") }()
	d := recv(t, mt.created)
	wait := recv(t, waits)
	assert.InDelta(t, float64(time.Hour), float64(wait), float64(time.Second), "an interval, less the time since the Allow")
	assert.LessOrEqual(t, d, wait, "counted from the reply's arrival")
	assert.Greater(t, d, wait-time.Second)
	p, err := l.Peek(ctx, "k", 1)
	require.NoError(t, err)
	assert.Greater(t, p.RetryAfter, time.Hour+59*time.Minute, "the waiter holds the next slot")
	mt.fire <- time.Time{}
	require.NoError(t, recv(t, done))
	recv(t, mt.stopped)
	assert.Equal(t, calls+2, cs.count(), "one call for the Wait (and the Peek): no polling")
}

// TestWaitCancelled: a Wait whose ctx is cancelled while it sleeps cancels
// its reservation in one more call, made although ctx is done, and returns
// ctx.Err(): alone, it gives the slot back; with a reservation of another
// process queued behind it, it gives nothing back, and that one keeps its
// time.
func TestWaitCancelled(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	for _, behind := range []bool{false, true} {
		t.Run(fmt.Sprint("behind=", behind), func(t *testing.T) {
			c := s.client(t)
			cs := &countingScripter{Client: c}
			prefix := uniq(t)
			h := newRecHook()
			l, err := redislimit.New(cs, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(prefix), redislimit.WithHook("p", h.hook()))
			require.NoError(t, err)
			other, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(prefix))
			require.NoError(t, err)
			mt := newManualTimer()
			l.SetTimer(mt.new)
			require.True(t, l.Allow(ctx, "k"))
			before := stored(t, c, l.Key("k"))

			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error)
			go func() { done <- l.Wait(wctx, "k") }()
			recv(t, mt.created)
			var later *redislimit.Reservation
			if behind {
				later, err = other.Reserve(ctx, "k", 1)
				require.NoError(t, err)
				require.Greater(t, later.Delay(), time.Hour+59*time.Minute)
			}
			reserved := stored(t, c, l.Key("k"))
			calls := cs.count()
			cancel()
			err = recv(t, done)
			assert.Equal(t, context.Canceled, err)
			recv(t, mt.stopped)
			assert.Equal(t, calls+1, cs.count(), "the cancel: one call, with a ctx that is not the cancelled one")
			if behind {
				assert.Equal(t, tatOf(reserved), tatOf(stored(t, c, l.Key("k"))), "the later reservation depends on it: nothing back")
				// Cancelled after it, the later one comes back whole; the
				// first one's slot stays taken (x/time/rate's rule loses
				// it too: the two cannot be told apart any more).
				require.NoError(t, later.Cancel(ctx))
				hour := int64(time.Hour / time.Microsecond)
				assert.Equal(t, fmt.Sprint(atoi(t, tatOf(before))+hour), tatOf(stored(t, c, l.Key("k"))))
			} else {
				assert.Equal(t, tatOf(before), tatOf(stored(t, c, l.Key("k"))), "its slot came back")
			}
			assert.Equal(t, 1, h.total(), "the Allow: a Wait whose ctx ended reports nothing")
		})
	}
}

// TestWaitCancelBounded: the cancel of a Wait whose ctx ended is bounded
// by WithTimeout, though ctx has no bound left: against a paused server
// the Wait returns ctx.Err() after the timeout, and the hook hears the
// cancel's outage, and nothing else.
func TestWaitCancelBounded(t *testing.T) {
	s := startServer(t)
	c := s.client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	ctx := context.Background()
	h := newRecHook()
	l, err := redislimit.New(c, gcra.Every(time.Hour), 1, redislimit.WithTimeout(50*time.Millisecond), redislimit.WithHook("p", h.hook()))
	require.NoError(t, err)
	mt := newManualTimer()
	l.SetTimer(mt.new)
	require.True(t, l.Allow(ctx, "k"))
	require.Equal(t, 1, h.count(redislimit.SourceRedis, "allowed"))
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- l.Wait(wctx, "k") }()
	recv(t, mt.created)
	s.pause(t)
	defer s.resume(t)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		assert.Equal(t, context.Canceled, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the cancel was not bounded by WithTimeout")
	}
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "it tried")
	assert.Equal(t, 1, h.count(redislimit.SourceFailClosed, "error"), "the cancel's outage")
	assert.ErrorIs(t, h.lastErr(), redislimit.ErrUnavailable)
	assert.ErrorIs(t, h.lastErr(), context.DeadlineExceeded)
	assert.Equal(t, 2, h.total(), "the Allow, and the cancel's error: a Wait whose ctx ended reports nothing")
}

// TestWaitFailsAtOnce: what Wait refuses, consuming nothing, with no timer:
// n out of range and a ctx done or past its deadline, with no call; the
// tokens due after ctx's deadline or WithMaxWait, with one call that
// stores nothing. Available tokens are taken with no timer either.
func TestWaitFailsAtOnce(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	cs := &countingScripter{Client: c}
	ctx := context.Background()
	h := newRecHook()
	l, err := redislimit.New(cs, gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithHook("p", h.hook()))
	require.NoError(t, err)
	l.SetTimer(noTimer(t))
	require.NoError(t, l.WaitN(ctx, "k", 2), "available: no timer")
	require.Equal(t, 1, h.count(redislimit.SourceRedis, "allowed"))
	before := stored(t, c, l.Key("k"))
	calls := cs.count()

	for _, tc := range []struct {
		n    int
		want error
	}{{-1, gcra.ErrInvalidN}, {3, gcra.ErrExceedsBurst}} {
		err := l.WaitN(ctx, "k", tc.n)
		assert.ErrorIs(t, err, tc.want)
		assert.Regexp(t, `^redislimit: `, err.Error())
	}
	assert.Equal(t, 2, h.count(redislimit.SourceStatic, "denied"), "no wait satisfies them")
	assert.NoError(t, l.WaitN(ctx, "k", 0), "n = 0: nothing to wait for")
	done, cancel := context.WithCancel(ctx)
	cancel()
	assert.Equal(t, context.Canceled, l.Wait(done, "k"))
	past, cancel := context.WithDeadline(ctx, time.Now())
	defer cancel()
	assert.Equal(t, context.DeadlineExceeded, l.Wait(past, "k"))
	assert.Equal(t, calls, cs.count(), "none of these calls Redis")

	soon, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	err = l.Wait(soon, "k")
	assert.ErrorIs(t, err, atomiclimit.ErrDeadline, "due in an hour")
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "denied"))
	assert.Equal(t, calls+1, cs.count())
	assert.Equal(t, before, stored(t, c, l.Key("k")), "nothing stored")
	short, err := redislimit.New(cs, gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithMaxWait(time.Minute))
	require.NoError(t, err)
	short.SetTimer(noTimer(t))
	require.NoError(t, short.Wait(ctx, "k"), "a fresh key")
	require.NoError(t, short.Wait(ctx, "k"))
	assert.ErrorIs(t, short.Wait(ctx, "k"), atomiclimit.ErrDeadline, "WithMaxWait: a minute")
}

// TestWaitConcurrentInOrder is the founding shape in miniature:
// three Limiters on three clients stand for three processes sharing one
// key, 16 goroutines each, all waiting at once. Each Wait is one EVALSHA;
// the reservations are due in the order Redis made them (the TAT each stored);
// the due times conform (no window over B + (b − a)/T); and no Wait
// returns before its tokens are due on Redis TIME: with at the script's
// TIME, L a local reading taken after the reply (OnReserved, before the
// Wait reads the time it counts from) and R one taken after the Wait
// returned, TIME at R is at least at + ⌊R − L⌋, since the script read TIME
// before L: the check at + ⌊R − L⌋ ≥ due can fail for a Wait that woke
// early, and holds for one that did not, whatever the scheduling (Redis
// TIME and the monotonic clock are the same host's, and tick alike).
func TestWaitConcurrentInOrder(t *testing.T) {
	const (
		processes  = 3
		goroutines = 16
		burst      = 4
		interval   = 2 * time.Millisecond
	)
	s := startServer(t)
	ctx := context.Background()
	type probe struct {
		ok                bool
		stored, at, stamp int64
		replied, returned time.Time
		err               error
	}
	type probeKey struct{}
	var counters []*countingScripter
	var lims []*redislimit.Limiter[string]
	for range processes {
		cs := &countingScripter{Client: s.client(t)}
		l, err := redislimit.New(cs, gcra.Every(interval), burst)
		require.NoError(t, err)
		// The script loaded, as it is but once after a restart (a fleet
		// starting cold may send one NOSCRIPT and EVAL per process and
		// key at once): then only the waits count.
		_, err = l.Peek(ctx, "warm", 1)
		require.NoError(t, err)
		cs.calls = 0
		l.OnReserved(func(ctx context.Context, ok bool, _ time.Duration, stored, at, stamp int64) {
			p := ctx.Value(probeKey{}).(*probe)
			p.ok, p.stored, p.at, p.stamp, p.replied = ok, stored, at, stamp, time.Now()
		})
		counters, lims = append(counters, cs), append(lims, l)
	}
	probes := make([]*probe, processes*goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range probes {
		p := &probe{}
		probes[i] = p
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx := context.WithValue(ctx, probeKey{}, p)
			<-start
			p.err = lims[i%processes].Wait(pctx, "k")
			p.returned = time.Now()
		}()
	}
	close(start)
	wg.Wait()

	calls := 0
	for _, cs := range counters {
		calls += cs.count()
	}
	T := int64(lims[0].Params().Interval() / time.Microsecond)
	span := burst * T
	var dues []dueN
	sort.Slice(probes, func(i, j int) bool { return probes[i].stored < probes[j].stored })
	var lastDue, late int64
	for i, p := range probes {
		require.NoError(t, p.err)
		require.True(t, p.ok)
		due := max(p.stored-span, p.at)
		if i > 0 {
			require.Greater(t, p.stored, probes[i-1].stored, "one reservation per TAT")
			require.GreaterOrEqual(t, due, lastDue, "due in the order Redis reserved")
		}
		lastDue = due
		dues = append(dues, dueN{due * us, 1})
		woke := p.at + int64(p.returned.Sub(p.replied)/time.Microsecond)
		require.GreaterOrEqual(t, woke, due, "reservation %d returned at least %dµs before its tokens were due", i, due-woke)
		late = max(late, woke-due)
	}
	conforms(t, dues, burst, int64(lims[0].Params().Interval()), "the waits")
	perAdmission := float64(calls) / float64(len(probes))
	assert.LessOrEqual(t, perAdmission, 1.2)
	assert.Equal(t, len(probes), calls, "one EVALSHA per Wait")
	t.Logf("%d waits, %d script calls: %.3f per admitted request; the last due %dµs after the first; woken at most %dµs after the due time (scheduling)",
		len(probes), calls, perAdmission, lastDue-max(probes[0].stored-span, probes[0].at), late)
}

// TestWaitOutage: the Outage policies decide a Wait and a Reserve when
// Redis does not: FailOpen admits at once (Wait returns nil, the outage to
// the hook; Reserve a Reservation due now, with the error); FailClosed
// fails; FallbackTo reserves on the local limiter, whose errors wrap
// atomiclimit.ErrFallback, whose wait Wait sleeps, and whose Cancel gives
// back there.
func TestWaitOutage(t *testing.T) {
	ctx := context.Background()
	for _, name := range policyNames {
		t.Run("policy="+name, func(t *testing.T) {
			p := newPolicy(t, name)
			h := newRecHook()
			l, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage), redislimit.WithHook("p", h.hook()))
			require.NoError(t, err)
			mt := newManualTimer()
			l.SetTimer(mt.new)

			err = l.Wait(ctx, "k")
			switch name {
			case "fail-closed":
				assert.ErrorIs(t, err, redislimit.ErrUnavailable)
				assert.Equal(t, 1, h.count(p.source, "denied"))
			default:
				assert.NoError(t, err, "admitted: the outage goes to the hook")
				assert.Equal(t, 1, h.count(p.source, "allowed"))
			}
			assert.Equal(t, 1, h.count(p.source, "error"))
			assert.ErrorIs(t, h.lastErr(), redislimit.ErrUnavailable)

			r, err := l.Reserve(ctx, "k", 1)
			assert.ErrorIs(t, err, redislimit.ErrUnavailable)
			switch name {
			case "fail-closed":
				assert.Nil(t, r)
				return
			case "fail-open":
				require.NotNil(t, r)
				assert.Zero(t, r.Delay())
				assert.NoError(t, r.Cancel(ctx))
				return
			}
			// The fallback: the local limiter (2 an hour) had one taken by
			// the Wait, and this one is its second: due now.
			assert.ErrorIs(t, err, atomiclimit.ErrFallback)
			require.True(t, r.IsLocal())
			assert.Zero(t, r.Delay())
			assert.Zero(t, peekLocal(p.local, "k", 0).Remaining)
			// The third is due in an hour: beyond a minute's deadline it
			// fails, reserving nothing there either; Wait sleeps it, and
			// its cancel gives it back there.
			soon, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, err = l.Reserve(soon, "k", 1)
			assert.ErrorIs(t, err, atomiclimit.ErrDeadline)
			assert.ErrorIs(t, err, atomiclimit.ErrFallback)
			assert.ErrorIs(t, err, redislimit.ErrUnavailable)
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error)
			go func() { done <- l.Wait(wctx, "k") }()
			d := recv(t, mt.created)
			assert.InDelta(t, float64(time.Hour), float64(d), float64(time.Minute), "the local limiter's wait")
			cancel()
			assert.Equal(t, context.Canceled, recv(t, done))
			recv(t, mt.stopped)
			assert.LessOrEqual(t, peekLocal(p.local, "k", 1).RetryAfter, time.Hour, "given back there (else two hours)")
			// A Reserve's Cancel is the local one's: nothing for r, whose
			// tokens were due at once; a queued one's hour back.
			require.NoError(t, r.Cancel(ctx))
			queued, err := l.Reserve(ctx, "k", 1)
			require.True(t, queued.IsLocal())
			assert.ErrorIs(t, err, atomiclimit.ErrFallback)
			assert.InDelta(t, float64(time.Hour), float64(queued.Delay()), float64(time.Minute))
			assert.Greater(t, peekLocal(p.local, "k", 1).RetryAfter, time.Hour)
			require.NoError(t, queued.Cancel(ctx))
			assert.LessOrEqual(t, peekLocal(p.local, "k", 1).RetryAfter, time.Hour, "the Reservation's Cancel is the local one's")
		})
	}
}

// TestWaitWindow: WaitN on a window rule takes, and after a denial sleeps
// at least until the window admits, and no more than a quarter of that or
// a second beyond (manual timers), then takes again: one call per wake-up;
// a ctx cancelled meanwhile returns ctx.Err() with nothing taken. A
// RetryAfter past ctx's deadline fails at once with ErrDeadline.
func TestWaitWindow(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	cs := &countingScripter{Client: c}
	ctx := context.Background()
	h := newRecHook()
	// Hour windows whose current one is half over: it ends in 30 minutes,
	// far from anything the test waits for.
	offset := time.Duration(time.Now().Add(-30*time.Minute).UnixNano() % int64(time.Hour)).Truncate(time.Microsecond)
	l, err := redislimit.NewRule(cs, atomiclimit.FixedWindowUTC(1, time.Hour, offset), redislimit.WithKeyPrefix(uniq(t)), redislimit.WithHook("p", h.hook()))
	require.NoError(t, err)
	l.SetTimer(noTimer(t))
	require.NoError(t, l.Wait(ctx, "k"), "admitted at once: no timer")
	assert.ErrorIs(t, l.WaitN(ctx, "k", 2), gcra.ErrExceedsBurst)
	assert.ErrorIs(t, l.WaitN(ctx, "k", -1), gcra.ErrInvalidN)
	assert.NoError(t, l.WaitN(ctx, "k", 0))
	calls := cs.count()
	soon, cancel := context.WithTimeout(ctx, 29*time.Minute)
	defer cancel()
	err = l.Wait(soon, "k")
	assert.ErrorIs(t, err, atomiclimit.ErrDeadline, "the window opens after the deadline")
	assert.Regexp(t, `^redislimit: `, err.Error())
	assert.Equal(t, calls+1, cs.count())

	mt := newManualTimer()
	l.SetTimer(mt.new)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	before := peekRule(t, l).RetryAfter
	go func() { done <- l.Wait(wctx, "k") }()
	for range 2 {
		d := recv(t, mt.created)
		after := peekRule(t, l).RetryAfter
		assert.GreaterOrEqual(t, d, after, "never before the window admits")
		assert.LessOrEqual(t, d, before+time.Microsecond+min(before/4, time.Second), "the jitter is bounded")
		before = after
		mt.fire <- time.Time{} // a wake-up before the window opens: denied again
	}
	recv(t, mt.created)
	cancel()
	assert.Equal(t, context.Canceled, recv(t, done))
	recv(t, mt.stopped)
	assert.Equal(t, calls+1+1+3+2, cs.count(), "one call per wake-up: three (and four peeks, one refusal)")
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "allowed"))
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "denied"), "the deadline's refusal; the cancelled Wait reports nothing")
	assert.Equal(t, 2, h.count(redislimit.SourceStatic, "denied"))
}

// peekRule is l's Peek of one token of "k".
func peekRule(t *testing.T, l *redislimit.Limiter[string]) gcra.Decision {
	t.Helper()
	d, err := l.Peek(context.Background(), "k", 1)
	require.NoError(t, err)
	return d
}

// TestWaitWindowRealClock: waiters on a window of 2 per 50ms, 3 processes
// of 2 goroutines: every Wait returns, admitted, and the windows admit no
// more than 2 each (Redis's count: every admission is a Take).
func TestWaitWindowRealClock(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	prefix := uniq(t)
	var wg sync.WaitGroup
	var errs [6]error
	for i := range errs {
		l, err := redislimit.NewRule(s.client(t), atomiclimit.FixedWindowUTC(2, 50*time.Millisecond, 0), redislimit.WithKeyPrefix(prefix))
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = l.Wait(ctx, "k") }()
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
}

// TestWindowSleep: the sleep after a window's denial is its RetryAfter
// rounded up to a whole µs, plus a jitter below min(RetryAfter/4, hint),
// all within the longest wait left.
func TestWindowSleep(t *testing.T) {
	top := func(j int64) int64 { return j - 1 }
	zero := func(int64) int64 { return 0 }
	const ms = time.Millisecond
	for _, tc := range []struct {
		retry, hint, room time.Duration
		draw              func(int64) int64
		want              time.Duration
	}{
		{100 * ms, time.Second, time.Hour, zero, 100 * ms},
		{100 * ms, time.Second, time.Hour, top, 125*ms - 1},
		{100 * ms, 10 * ms, time.Hour, top, 110*ms - 1},
		{100*ms + 1, time.Second, time.Hour, zero, 100*ms + time.Microsecond},
		{100 * ms, time.Second, 110 * ms, top, 110*ms - 1},
		{100 * ms, time.Second, 100 * ms, top, 100 * ms},
		{3, time.Second, time.Hour, zero, time.Microsecond},
		{0, time.Second, time.Hour, top, time.Microsecond},
	} {
		assert.Equal(t, tc.want, redislimit.WindowSleep(tc.retry, tc.hint, tc.room, tc.draw), "%+v", tc)
	}
}
