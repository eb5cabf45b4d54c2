package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// Wait is shorthand for WaitN(ctx, key, 1).
func (l *Limiter[K]) Wait(ctx context.Context, key K) error { return l.WaitN(ctx, key, 1) }

// WaitN blocks until key has n tokens and takes them. It returns nil when
// the caller may go ahead, and an error otherwise.
//
// For New's GCRA limit it reserves them, as Reserve does, in one script
// call, and sleeps for the wait Redis returned: no polling, so concurrent
// waiters of every process are served in the order Redis reserved for
// them, each woken on this process's clock no earlier than its tokens are
// due on Redis TIME. If ctx is done while it sleeps, it cancels the
// reservation (Reservation.Cancel: the tokens come back if no later
// reservation depends on them), in one more call made with a context that
// ctx's cancellation does not reach, bounded by WithTimeout (without it,
// by the client's own timeouts), and returns ctx.Err().
//
// For NewRule's windows, which have no queue to reserve a place in, it
// takes the tokens (Take), and when they are denied sleeps until the
// decision's RetryAfter, the instant the window can admit them, rounded up
// to a whole µs, plus a jitter drawn uniformly from [0, min(RetryAfter/4,
// Window/Limit, 1s)) (less where that would pass the longest wait), then
// takes again, until admitted. The waiters of a fleet whose window opens
// at one instant are told that instant alike: the jitter spreads their
// calls over a quarter of their wait, and over at most one token's time
// (Window/Limit), so that no call comes before the window can admit and
// none comes more than a token's time after. It is a call per wake-up,
// and the waiters are served in the order their calls reach Redis once the
// window admits, not in the order they came.
//
// It fails at once, consuming nothing, as Reserve fails: ctx already done
// (ctx.Err()) or its deadline passed (context.DeadlineExceeded); n < 0
// (gcra.ErrInvalidN) or above what the rule can ever admit
// (gcra.ErrExceedsBurst); the tokens due after the longest wait, ctx's
// deadline or WithMaxWait (atomiclimit.ErrDeadline; for a window, when a
// denial's RetryAfter is beyond it, with nothing taken). n = 0 returns nil
// without a call. It starts no goroutine, and stops its timer before
// returning.
//
// When Redis does not decide, the Outage policy does, as for Allow: it
// returns nil when the policy admits (FailOpen at once; FallbackTo once
// its local limiter's reservation is due, or for a window once a take
// admits, Redis's or the local limiter's, which it waits for as for
// Redis's), the outage going to the Hook only, and otherwise the error
// (ErrUnavailable, ErrRejected; with atomiclimit.ErrFallback too when the
// local limiter refused). A state Redis repaired (ErrCorrupt) is waited on
// as any other, and its error goes to the Hook. A ctx that ends during a
// call returns that call's error, which wraps ctx.Err(): a reservation
// Redis may have made then is used as if acted on.
//
// With a hook (WithHook), it reports when it returns, once: allowed when it
// took the tokens, denied with the wait it needed when no wait allowed
// could satisfy the request (and FailClosed's denial), each after the
// errors of its calls; nothing when ctx ended first (the caller gave up:
// its tokens, if reserved, were given back as far as no later reservation
// depends on them).
func (l *Limiter[K]) WaitN(ctx context.Context, key K, n int) error {
	if l.rule != nil {
		return l.waitWindow(ctx, key, n)
	}
	rv := l.reserve(ctx, key, n, -1, -1)
	if rv.res == nil {
		if l.hook != nil && rv.decided {
			l.observeReserve(rv, n)
		}
		return rv.err
	}
	// Reserved, by Redis or the Outage policy: rv.err, if any, is the
	// outage or the repair, which the hook alone hears.
	if delay := rv.res.Delay(); delay > 0 {
		c, stop := l.timer(delay)
		defer stop()
		select {
		case <-c:
		case <-ctx.Done():
			// Not the caller's ctx, which is done: its values only, and
			// WithTimeout's bound (call).
			rv.res.Cancel(context.WithoutCancel(ctx))
			if l.hook != nil && rv.callErr != nil && l.hook.Error != nil {
				l.hook.Error(l.hookPolicy, rv.source, rv.callErr)
			}
			return ctx.Err()
		}
	}
	if l.hook != nil {
		l.observeReserve(rv, n)
	}
	return nil
}

// timer is time.NewTimer's channel and Stop, or the test's.
func (l *core) timer(d time.Duration) (<-chan time.Time, func() bool) {
	if l.newTimer != nil {
		return l.newTimer(d)
	}
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// waitWindow is WaitN on a rule other than GCRA: take, and after a denial
// sleep until the window can admit (plus the jitter), then take again.
func (l *Limiter[K]) waitWindow(ctx context.Context, key K, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := l.longestWait(ctx); err != nil {
		return err
	}
	if n == 0 {
		l.reportWait(SourceStatic, 0, true, 0) // as GCRA's: a peek, admitted
		return nil
	}
	if n < 0 || n > l.maxN {
		// No window admits it: decided by the rule alone, with no call.
		var err error
		if n < 0 {
			err = fmt.Errorf("redislimit: %w: n=%d", gcra.ErrInvalidN, n)
		} else {
			err = fmt.Errorf("redislimit: %w: n=%d, at most %d", gcra.ErrExceedsBurst, n, l.maxN)
		}
		if l.hook != nil {
			l.observe(result{Decision: gcra.Decision{RetryAfter: gcra.Never}, Source: SourceStatic, Err: err}, n, true)
		}
		return err
	}
	for {
		r := l.decideUnobserved(ctx, key, n, opTake, -1)
		if l.hook != nil && r.Err != nil && l.hook.Error != nil {
			l.hook.Error(l.hookPolicy, r.Source, r.Err)
		}
		switch {
		case r.Allowed:
			l.reportWait(r.Source, n, true, 0)
			return nil
		case r.Source == SourceCaller:
			return r.Err
		case r.Source == SourceFailClosed:
			l.reportWait(r.Source, n, false, r.RetryAfter)
			return r.Err
		}
		// Denied by Redis, or by FallbackTo's local limiter: wait.
		maxWait, err := l.longestWait(ctx)
		if err != nil {
			return err // passed while the call was made
		}
		retry := r.RetryAfter
		if int64(retry) > maxWait {
			l.reportWait(r.Source, n, false, retry)
			derr := fmt.Errorf("redislimit: %d tokens admitted in %v, beyond the longest wait %v: %w", n, retry, time.Duration(maxWait), atomiclimit.ErrDeadline)
			if r.Source == SourceFallback {
				return fallbackErr(r.Err, derr)
			}
			return derr
		}
		sleep := windowSleep(retry, l.hint, time.Duration(maxWait), rand.Int64N)
		c, stop := l.timer(sleep)
		select {
		case <-c:
		case <-ctx.Done():
			stop()
			return ctx.Err() // nothing taken: nothing to give back
		}
	}
}

// reportWait reports the outcome of a window's WaitN to the hook, if any.
func (l *core) reportWait(source Source, n int, ok bool, retry time.Duration) {
	if l.hook != nil {
		l.observe(result{Decision: gcra.Decision{Allowed: ok, RetryAfter: retry}, Source: source}, n, true)
	}
}

// windowSleep is how long a WaitN on a window rule sleeps after a denial
// whose RetryAfter is retry (at most room, the longest wait left): retry
// rounded up to a whole µs, and at least 1µs, so that the next call's TIME
// is at or after the instant (TIME is whole µs) and no call follows
// another at once, plus a jitter of draw(j) ns with j = min(retry/4, hint)
// (hint: Window/Limit, at most 1s), all within room. draw(j) is uniform in
// [0, j).
func windowSleep(retry, hint, room time.Duration, draw func(int64) int64) time.Duration {
	d := max((retry+time.Microsecond-1)/time.Microsecond*time.Microsecond, time.Microsecond)
	if j := min(retry/4, hint, room-d); j > 0 {
		d += time.Duration(draw(int64(j)))
	}
	return min(d, max(room, retry, time.Microsecond))
}
