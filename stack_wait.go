package atomiclimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A waiter is a limiter that waits for a key's tokens itself: Stack.Wait
// hands it the wait of a lone policy. redislimit.Limiter is one: for GCRA
// each waiter reserves its place in one script call, in the order Redis
// runs them, and sleeps until it is due; for a window it takes, and
// retries with a jitter of its own. (*Keyed has the method too, but
// Stack.Wait reserves on it directly, for GCRA only.)
type waiter[K comparable] interface {
	WaitN(ctx context.Context, key K, n int) error
}

// Wait is Take that waits: it blocks until every policy of s admits a
// request for n at key, all or nothing, takes it and returns Pass, with out
// filled as Take fills it (zero on entry), each policy's Outcome.Waited
// saying how long it made the request wait. It waits no longer than
// maxWait (0: no bound of its own; Take is the request that does not
// wait), counted from the first denial (for a limiter that waits itself,
// from the call), and never past ctx's deadline, both on the monotonic
// clock (time.Now), whatever clock the limiters read. A request whose wait
// cannot end by then fails at once, having taken nothing, with Deny and an
// error wrapping ErrDeadline that names the policy and its wait; out holds
// the denial (Denied names the policies and the longest wait). A request
// no wait admits (n above a policy's burst, DenyAll) fails at once with
// Deny and an error wrapping ErrExceedsBurst (ErrInvalidN for n < 0). If
// ctx ends first, Wait gives back what it held and returns Gone and
// ctx.Err() (at is -1 if it ended while Wait slept; for a limiter that
// waits itself, at is 0 and the error is its WaitN's, which wraps
// ctx.Err()). Unavailable and
// Overloaded return as Take returns them, with the limiter's error.
//
// How it waits:
//
//   - A lone policy whose limiter can queue is waited for in order: a
//     *Keyed of a GCRA rule, or any limiter with a method WaitN(ctx, key
//     K, n int) error (redislimit.Limiter). The request reserves its
//     tokens (on a *Keyed, ReserveN's reservation, once Take has denied
//     it) and sleeps until they are due, so that concurrent waiters go in
//     the order they reserved; if ctx ends first, a *Keyed's reservation
//     is cancelled (Reservation.Cancel's rule), and a *Keyed with a hook
//     (WithHook) reports the denial and then the reservation. A WaitN is
//     handed ctx, or a context with maxWait's earlier deadline, and waits
//     by its limiter's rules: redislimit's GCRA reserves in Redis, one
//     call per request; its windows take and retry with a jitter of their
//     own.
//   - Every other stack (several policies, a window rule in process, a
//     limiter that does not wait) takes, and after a denial sleeps the
//     longest wait a violated policy named, then takes again, until
//     admitted. Waiters are not queued. A wait longer than the time T that
//     policy's quota gives one token (Quota.Window / Quota.Limit: a window
//     that opens at an instant, for many at once) gets a jitter drawn
//     uniformly from [0, min(wait/4, T, 1s)), within the deadline, so that
//     those told that instant do not all come back at it; a wait of one
//     token or less (a GCRA bucket's next token) gets none: the first to
//     come back takes the token, the others are told the next one's
//     instant. None comes back before its policies can admit it.
//
// Nothing is held while a request waits: the second way takes from every
// policy at one instant or gives back; the first reserves on its one
// policy alone. So the request Wait admits is admitted by every policy at
// the time Wait returns it (the first way: at the time its tokens are
// due), and a caller that acts at once keeps each policy's bound on the
// times it acts, as the limiters keep it on the times they admit.
// Reserving on one policy while another makes the request wait would not:
// with burst 1, a token reserved at 0 and the next one at 1s could both be
// used at 1s, when another policy lets the first go.
//
// It starts no goroutine. It allocates nothing with in-process limiters,
// waits included (its timers are reused); a remote limiter's calls
// allocate what its client allocates, and handing WaitN a deadline earlier
// than ctx's costs a derived context. A request admitted at once costs
// what Take costs: Wait reads no clock of its own then (but for a limiter
// that waits itself, whose wait it times from the call). Report reports
// what Wait returns as it reports Take's, with the Waited events.
func (s *Stack[K]) Wait(ctx context.Context, key K, n int, maxWait time.Duration, out []Outcome) (res Result, at int, err error) {
	return s.wait(ctx, key, n, maxWait, out, nil)
}

// A waitKit replaces, in tests, what Wait sleeps with and draws its
// jitter with.
type waitKit struct {
	timer newTimer          // nil: a real timer, reused (sleep)
	draw  func(int64) int64 // nil: rand.Int64N
}

func (s *Stack[K]) wait(ctx context.Context, key K, n int, maxWait time.Duration, out []Outcome, kit *waitKit) (Result, int, error) {
	out = out[:len(s.pols)]
	if len(s.pols) == 1 {
		switch p := &s.pols[0]; {
		case p.keyed != nil && p.keyed.fast:
			return s.waitReserve(ctx, p.keyed, key, n, maxWait, out, kit)
		case p.waiter != nil:
			return s.waitRemote(ctx, p, key, n, maxWait, out)
		}
	}
	return s.waitRetry(ctx, key, n, maxWait, out, kit)
}

// waitReserve is Wait for a lone *Keyed policy of a GCRA rule: Take, which
// admits at once when it can, with the whole decision; after a denial,
// reserve and sleep until the reservation is due.
func (s *Stack[K]) waitReserve(ctx context.Context, k *Keyed[K], key K, n int, maxWait time.Duration, out []Outcome, kit *waitKit) (Result, int, error) {
	res, at := s.Take(ctx, key, n, out)
	if res != Deny {
		return res, at, failure(ctx, res, at, out)
	}
	o := &out[0]
	if o.Decision.RetryAfter == Never {
		return Deny, 0, never(s.pols[0].Name, n)
	}
	room, byCtx, res, err := budget(ctx, time.Now(), maxWait)
	if err != nil {
		return res, 0, err
	}
	// A denial wrote nothing; the reservation decides again, on the state
	// as it is now, and queues behind the reservations made before it.
	now := k.src.Precise()
	r, wait, err := k.reserve(key, now, n, int64(room))
	if k.hook != nil {
		k.reportReserved(n, wait, err)
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrTooManyKeys): // the key was removed, and the limiter is full
		o.Kind, o.Err, o.Decision = Full, err, gcra.Decision{RetryAfter: time.Duration(wait), TokenAfter: time.Duration(wait)}
		return Overloaded, 0, err
	case errors.Is(err, ErrDeadline):
		o.Decision.RetryAfter = time.Duration(wait)
		return Deny, 0, tooLong(s.pols[0].Name, n, time.Duration(wait), byCtx, maxWait)
	default: // what Take would have called Never: the rule changed meanwhile
		o.Decision.RetryAfter = Never
		return Deny, 0, err
	}
	delay := time.Duration(r.actAt - now)
	if delay > 0 && !sleep(ctx, delay, kit) {
		r.Cancel()
		return Gone, -1, ctxErr(ctx)
	}
	*o = Outcome{Kind: Admitted, Decision: gcra.Decision{Allowed: true}, Quota: k.Quota(key), Waited: max(delay, 0)}
	return Pass, -1, nil
}

// waitRemote is Wait for a lone policy whose limiter waits itself.
func (s *Stack[K]) waitRemote(ctx context.Context, p *stacked[K], key K, n int, maxWait time.Duration, out []Outcome) (Result, int, error) {
	wctx := ctx
	start := time.Now()
	if maxWait > 0 {
		deadline := start.Add(maxWait)
		if d, ok := ctx.Deadline(); !ok || deadline.Before(d) {
			var cancel context.CancelFunc
			wctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
	}
	err := p.waiter.WaitN(wctx, key, n)
	o := &out[0]
	o.Quota = p.Limiter.Quota(key)
	switch {
	case err == nil:
		o.Kind, o.Decision, o.Waited = Admitted, gcra.Decision{Allowed: true}, time.Since(start)
		return Pass, -1, nil
	case callerDone(ctx):
		return Gone, 0, err
	case errors.Is(err, ErrTooManyKeys):
		o.Kind, o.Err = Full, err
		return Overloaded, 0, err
	case errors.Is(err, ErrDeadline), errors.Is(err, context.DeadlineExceeded):
		// The wait would pass the deadline (or did, during a call): the
		// policy's wait as a Peek finds it, for the caller to say.
		o.Kind = Violated
		o.Decision, _ = p.Limiter.Peek(ctx, key, n)
		o.Decision.Allowed = false
		if !errors.Is(err, ErrDeadline) {
			err = fmt.Errorf("%w: %w", ErrDeadline, err)
		}
		return Deny, 0, err
	case errors.Is(err, ErrExceedsBurst), errors.Is(err, ErrInvalidN):
		o.Kind, o.Decision = Violated, gcra.Decision{RetryAfter: Never, TokenAfter: Never}
		return Deny, 0, err
	case errors.Is(err, ErrFallback): // a local fallback refused: the policy's denial
		o.Kind, o.Err = Violated, err
		o.Decision, _ = p.Limiter.Peek(ctx, key, n)
		o.Decision.Allowed = false
		return Deny, 0, err
	default: // an outage its outage policy did not admit
		o.Kind, o.Err = Unknown, err
		return Unavailable, 0, err
	}
}

// waitRetry is Wait for any stack: take, and after a denial sleep for the
// longest wait a violated policy named, plus the jitter, then take again.
func (s *Stack[K]) waitRetry(ctx context.Context, key K, n int, maxWait time.Duration, out []Outcome, kit *waitKit) (Result, int, error) {
	var waited [MaxPolicies]time.Duration
	var start time.Time // the first denial's: maxWait counts from there
	for {
		res, at := s.Take(ctx, key, n, out)
		switch res {
		case Pass:
			for j := range out {
				out[j].Waited = waited[j]
			}
			return Pass, -1, nil
		case Deny:
		default:
			return res, at, failure(ctx, res, at, out)
		}
		j, ra := longestWait(out)
		if ra == Never {
			return Deny, at, never(s.pols[j].Name, n)
		}
		if start.IsZero() {
			start = time.Now()
		}
		room, byCtx, res, err := budget(ctx, start, maxWait)
		if err != nil {
			return res, at, err
		}
		if ra > room {
			return Deny, at, tooLong(s.pols[j].Name, n, ra, byCtx, maxWait)
		}
		d := ra + jitter(ra, out[j].Quota, room-ra, kit)
		if !sleep(ctx, d, kit) {
			return Gone, -1, ctxErr(ctx)
		}
		waited[j] += d
		clear(out) // Take wants them zero
	}
}

// longestWait returns the violated policy with the longest wait (Never is
// longest) and its wait, as Denied does, without naming them.
func longestWait(out []Outcome) (j int, wait time.Duration) {
	j = -1
	for i := range out {
		if o := &out[i]; o.Kind == Violated && (j < 0 || longer(o.Decision.RetryAfter, wait)) {
			j, wait = i, o.Decision.RetryAfter
		}
	}
	return j, wait
}

// jitter is what a retry adds to a wait of ra under quota q, within room:
// none for a wait of at most one token's time T = q.Window/q.Limit (a
// GCRA denial of one token, which frees one token at that instant: the
// first to come back takes it, and the others are told the next one's);
// otherwise a draw uniform in [0, min(ra/4, T, 1s, room)), as redislimit's
// window waits draw it: a window that opens at an instant frees many
// tokens at once, and those told that instant are spread over one
// token's time.
func jitter(ra time.Duration, q Quota, room time.Duration, kit *waitKit) time.Duration {
	j := min(ra/4, time.Second, room)
	if q.Limit > 0 && q.Limit != math.MaxInt && q.Window > 0 {
		T := q.Window / time.Duration(q.Limit)
		if ra <= T {
			return 0
		}
		j = min(j, T)
	}
	if j <= 0 {
		return 0
	}
	if kit != nil && kit.draw != nil {
		return time.Duration(kit.draw(int64(j)))
	}
	return time.Duration(rand.Int64N(int64(j)))
}

// budget returns how long a wait may last from now: until the earlier of
// ctx's deadline and start + maxWait (math.MaxInt64 without either), and
// whether ctx's is the earlier. A deadline that has passed fails: ctx's
// with Gone (the caller's context is over, as Take reports it), maxWait's
// with Deny.
func budget(ctx context.Context, start time.Time, maxWait time.Duration) (room time.Duration, byCtx bool, res Result, err error) {
	room = time.Duration(math.MaxInt64)
	now := time.Now()
	if d, ok := ctx.Deadline(); ok {
		if room, byCtx = d.Sub(now), true; room <= 0 {
			return 0, true, Gone, ctxErr(ctx)
		}
	}
	if maxWait > 0 {
		if own := start.Add(maxWait).Sub(now); own < room {
			if room, byCtx = own, false; room <= 0 {
				return 0, false, Deny, fmt.Errorf("%w: the longest wait, %v, has passed", ErrDeadline, maxWait)
			}
		}
	}
	return room, byCtx, Pass, nil
}

// tooLong is the error of a wait for policy that would end past the
// context's deadline (byCtx) or the longest wait.
func tooLong(policy string, n int, wait time.Duration, byCtx bool, maxWait time.Duration) error {
	if byCtx {
		return fmt.Errorf("%w: policy %q admits %d in %v, after the context's deadline", ErrDeadline, policy, n, wait)
	}
	return fmt.Errorf("%w: policy %q admits %d in %v, beyond the longest wait %v", ErrDeadline, policy, n, wait, maxWait)
}

// failure is the error Wait returns with a Result of Take's that is
// neither Pass nor Deny.
func failure(ctx context.Context, res Result, at int, out []Outcome) error {
	switch res {
	case Pass:
		return nil
	case Gone:
		return ctxErr(ctx)
	}
	return out[at].Err
}

// ctxErr is ctx's error, or context.DeadlineExceeded for a ctx past its
// deadline that has not noticed yet (callerDone).
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// never is the error of a request no wait lets the policy admit.
func never(policy string, n int) error {
	if n < 0 {
		return fmt.Errorf("%w: n=%d", ErrInvalidN, n)
	}
	return fmt.Errorf("%w: policy %q never admits %d", ErrExceedsBurst, policy, n)
}

// timers are stopped timers that sleep reuses: a wait allocates none.
var timers sync.Pool

// sleep waits d, or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration, kit *waitKit) bool {
	if kit != nil && kit.timer != nil {
		c, stop := kit.timer(d)
		defer stop()
		select {
		case <-c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	t, _ := timers.Get().(*time.Timer)
	if t == nil {
		t = time.NewTimer(d)
	} else {
		t.Reset(d)
	}
	select {
	case <-t.C:
		timers.Put(t)
		return true
	case <-ctx.Done():
		if !t.Stop() {
			// It fired meanwhile: under the timer semantics before Go 1.23
			// (a main module that asks for them) the channel holds the
			// tick; take it, or the next sleep would wake on it.
			select {
			case <-t.C:
			default:
			}
		}
		timers.Put(t)
		return false
	}
}
