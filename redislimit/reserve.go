package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// A Reservation holds n tokens of a key that Redis has promised for a time
// that may lie in the future: the leaky-bucket pacing form of a Limiter,
// shared by every process that reserves on the key. Act after Delay, or
// Cancel to give back what no later reservation depends on. It is
// atomiclimit.Reservation kept in Redis: Cancel takes a context, since it
// is a round trip, and returns its error.
//
// A Reservation belongs to one goroutine and must not be copied: a second
// Cancel does nothing, and a copy would give back twice.
type Reservation struct {
	c     *core  // the limiter that holds its tokens in Redis; nil: nothing there
	rkey  string // the Redis key
	n     int
	tk    taken     // what its Cancel needs (refundLua)
	due   time.Time // when its tokens are due, on this process's monotonic clock
	local *atomiclimit.Reservation
	// forget drops the key from the over-limit cache after a give-back;
	// nil without a cache.
	forget func()
	done   bool // cancelled, or nothing to cancel
}

// Reserve reserves n tokens of key, however long they take to become
// available up to the longest wait (ctx's deadline, WithMaxWait, and
// gcra.MaxWait, whichever is nearest), and returns a Reservation whose
// Delay says how long to wait: gcra.Params.Reserve, in one script call on
// Redis TIME. It pushes key's state ahead atomically, so concurrent
// reservations, from any process, are due in the order Redis ran them,
// each after the one before it, as the in-process Limiter.ReserveN orders
// them in one process.
//
// It fails, consuming nothing and making no call, with an error wrapping
// gcra.ErrInvalidN for n < 0 and gcra.ErrExceedsBurst for n above the
// burst (or DenyAll), which no wait can satisfy; with ctx.Err() when ctx
// is already done, and context.DeadlineExceeded when its deadline has
// passed. It fails, consuming nothing, with an error wrapping
// atomiclimit.ErrDeadline when the tokens would be due after the longest
// wait (measured from when the call is sent; a deadline is read on this
// process's clock); and with an error wrapping errors.ErrUnsupported for a
// rule other than GCRA (NewRule's windows: pacing is the leaky bucket's;
// WaitN waits on them). n = 0, and Unlimited, reserve at once without a
// call.
//
// When Redis does not decide, the Outage policy does, as for Take, and the
// error says why (ErrUnavailable, ErrRejected): FailOpen returns a
// Reservation due at once, with nothing to cancel; FallbackTo reserves on
// its local limiter (ReserveN), as far ahead as the longest wait allows,
// and returns that reservation, whose Cancel is the local one's, with an
// error that also wraps atomiclimit.ErrFallback (as do its refusals:
// ErrDeadline beyond the longest wait, and the local limiter's own
// errors); FailClosed (and a rejection under any other policy) returns no
// Reservation. A Reservation returned with an error is one to act on, as
// Take's admission with an error is. A ctx that ends during the call
// wraps ctx.Err(): Redis may then have reserved tokens that no one holds,
// which are used as if acted on. A state Redis repaired (ErrCorrupt) is
// reserved on, behind the repair, and the Reservation (or the refusal)
// returned with an error wrapping ErrCorrupt.
//
// With a hook (WithHook), a reservation is reported as allowed when it is
// made (a Cancel is not an event), and a request no wait can satisfy
// (n out of range, or beyond the longest wait) as denied, with the wait
// it needed (gcra.Never for n out of range); errors as Take reports them.
func (l *Limiter[K]) Reserve(ctx context.Context, key K, n int) (*Reservation, error) {
	rv := l.reserve(ctx, key, n, -1, -1)
	if l.hook != nil && rv.decided {
		l.observeReserve(rv, n)
	}
	return rv.res, rv.err
}

// A reserved is the outcome of one reservation: what Reserve returns, who
// decided (the Source the hook hears), and the wait a refused one needed.
type reserved struct {
	res *Reservation // nil when it failed
	err error
	// callErr is the error of the call that the hook hears (an outage, a
	// rejection, a repair, a caller who gave up), nil when there is none:
	// a refusal is a decision, not an error.
	callErr error
	source  Source
	// wait is the wait a refused reservation needed (ErrDeadline), or
	// gcra.Never (n out of range); FailClosed's hint.
	wait time.Duration
	// decided: not a rule's error or a ctx done before the call, which are
	// not decisions, and are not reported.
	decided bool
}

// reserve is Reserve without the hook. maxWait ≥ 0 (ns) replaces the
// longest wait of ctx and the limiter, and nowMicros ≥ 0 Redis TIME (tests
// only).
func (l *Limiter[K]) reserve(ctx context.Context, key K, n int, maxWait, nowMicros int64) reserved {
	if l.rule != nil {
		return reserved{err: l.errPacing()}
	}
	if err := ctx.Err(); err != nil {
		return reserved{err: err}
	}
	if n < 0 {
		return reserved{err: fmt.Errorf("redislimit: %w: n=%d", gcra.ErrInvalidN, n), source: SourceStatic, wait: gcra.Never, decided: true}
	}
	if n > l.maxN {
		return reserved{err: fmt.Errorf("redislimit: %w: n=%d, burst=%d", gcra.ErrExceedsBurst, n, l.maxN), source: SourceStatic, wait: gcra.Never, decided: true}
	}
	if maxWait < 0 {
		var err error
		if maxWait, err = l.longestWait(ctx); err != nil {
			return reserved{err: err}
		}
	}
	if n == 0 || l.static {
		// A peek, or Unlimited (DenyAll's burst is 0: n > maxN above):
		// due now, nothing reserved, nothing to cancel.
		return reserved{res: &Reservation{due: time.Now(), done: true}, source: SourceStatic, decided: true}
	}
	rkey := l.Key(key)
	ok, wait, tk, err := l.evalReserve(ctx, rkey, n, maxWait, nowMicros)
	if l.onReserved != nil {
		l.onReserved(ctx, ok, wait, tk) // tests: before replied is read
	}
	replied := time.Now()
	if err != nil && !errors.Is(err, ErrCorrupt) {
		rv := l.failReserve(key, n, maxWait, err)
		rv.callErr = rv.err
		return rv
	}
	if !ok {
		derr := fmt.Errorf("redislimit: %d tokens due in %v, beyond the longest wait %v: %w", n, wait, time.Duration(maxWait), atomiclimit.ErrDeadline)
		if err != nil {
			derr = fmt.Errorf("%w, on a repaired state (%w)", derr, err)
		}
		return reserved{err: derr, callErr: err, source: SourceRedis, wait: wait, decided: true}
	}
	// The tokens are due wait after the script's TIME, which Redis read
	// before it replied: the reply's arrival plus wait is never earlier.
	r := &Reservation{c: &l.core, rkey: rkey, n: n, tk: tk, due: replied.Add(wait)}
	if l.cache != nil {
		r.forget = func() { l.cache.forget(key) }
	}
	return reserved{res: r, err: err, callErr: err, source: SourceRedis, decided: true}
}

// failReserve is the Outage policy's reservation for a call Redis did not
// decide (err, classified), as fail is Take's.
func (l *Limiter[K]) failReserve(key K, n int, maxWait int64, err error) reserved {
	kind := l.outage
	switch {
	case isUnavailable(err):
	case isRejected(err):
		if kind != outageFallback {
			kind = outageClosed
		}
	default: // the caller gave up
		return reserved{err: err, source: SourceCaller, decided: true}
	}
	switch kind {
	case outageOpen:
		return reserved{res: &Reservation{due: time.Now(), done: true}, err: err, source: SourceFailOpen, decided: true}
	case outageFallback:
		lr, lerr := l.local.ReserveN(key, time.Now(), n)
		if lerr != nil {
			return reserved{err: fallbackErr(err, lerr), source: SourceFallback, wait: gcra.Never, decided: true}
		}
		if d := lr.Delay(); int64(d) > maxWait {
			lr.Cancel() // nothing was reserved after it: it comes back whole
			derr := fmt.Errorf("redislimit: %d tokens due in %v, beyond the longest wait %v: %w", n, d, time.Duration(maxWait), atomiclimit.ErrDeadline)
			return reserved{err: fallbackErr(err, derr), source: SourceFallback, wait: d, decided: true}
		}
		return reserved{res: &Reservation{local: lr}, err: fallbackErr(err, nil), source: SourceFallback, decided: true}
	}
	return reserved{err: err, source: SourceFailClosed, wait: l.hint, decided: true}
}

// observeReserve reports a reservation's outcome to the hook, which is set:
// its error first, then allowed (made) or denied (refused, with the wait it
// needed); a caller who gave up is reported by its error alone.
func (l *core) observeReserve(rv reserved, n int) {
	r := result{Source: rv.source, Err: rv.callErr}
	if rv.res != nil {
		r.Allowed = true
	} else {
		r.RetryAfter = rv.wait
	}
	l.observe(r, n, true)
}

// errPacing is the error of Reserve on a rule other than GCRA, as in
// process (atomiclimit.Keyed.ReserveN).
func (l *core) errPacing() error {
	return fmt.Errorf("redislimit: Reserve paces a GCRA rule, not %v: %w", *l.rule, errors.ErrUnsupported)
}

// longestWait returns the longest a reservation may wait, in ns: the
// limiter's (WithMaxWait, gcra.MaxWait by default), or less before ctx's
// deadline; context.DeadlineExceeded if that has passed (whether or not
// ctx has noticed yet: a done ctx consumes nothing).
func (l *core) longestWait(ctx context.Context) (int64, error) {
	m := l.maxWait
	if dl, ok := ctx.Deadline(); ok {
		left := int64(time.Until(dl))
		if left <= 0 {
			return 0, context.DeadlineExceeded
		}
		m = min(m, left)
	}
	return m, nil
}

// evalReserve runs decideLua's op '4' for n (1 ≤ n ≤ B) on rkey, waiting
// up to maxWait ns (through call: ctx is the caller's), and returns whether
// it reserved, the wait, and what the reservation's Cancel needs: as
// gcra.Params.Reserve, a reservation's wait is 0 when its tokens are there
// now, and a refusal's the wait it needed. An error is call's, or wraps
// ErrCorrupt: then the script repaired the key and reserved behind the
// repair. nowMicros < 0 means "read TIME" (always, outside tests).
func (l *core) evalReserve(ctx context.Context, rkey string, n int, maxWait, nowMicros int64) (ok bool, wait time.Duration, tk taken, err error) {
	now := ""
	if nowMicros >= 0 {
		now = strconv.FormatInt(nowMicros, 10)
	}
	// Whole µs at most maxWait: wait·1µs ≤ maxWait ⇔ wait ≤ ⌊maxWait/1µs⌋.
	mw := min(maxWait, int64(gcra.MaxWait)) / int64(time.Microsecond)
	reply, err := l.call(ctx, &decideScript, []string{rkey}, l.argT, l.argSpan, n, opArgs[opReserve], now, strconv.FormatInt(mw, 10))
	if err != nil {
		return false, 0, taken{}, err
	}
	r, _ := reply.([]any)
	var v [5]int64
	switch {
	case len(r) == 5 && ints(r, v[:]):
	case len(r) == 6 && ints(r[:5], v[:]):
		err = corrupt(rkey, r[5]) // a repair, and the reservation behind it
	default:
		return false, 0, taken{}, rejectedReply(&decideScript, reply)
	}
	// {admitted, wait, stored or 0, now, stamp}: an admission stores a TAT
	// (> now), a refusal nothing and needed a wait beyond maxWait.
	admitted, stored, at, stamp := v[0] == 1, v[2], v[3], v[4]
	switch {
	case v[0] != 0 && v[0] != 1, admitted != (stored > 0), !admitted && v[1] <= mw,
		uint64(stored) >= maxReceipt, at < 0 || uint64(at) >= maxReceipt, stamp < 0 || uint64(stamp) >= maxReceipt:
		return false, 0, taken{}, rejectedReply(&decideScript, reply)
	}
	wait = time.Duration(min(v[1], maxDebtMicros)) * time.Microsecond
	if !admitted {
		return false, wait, taken{}, err
	}
	return true, max(wait, 0), taken{tat: uint64(stored), at: uint64(at), stamp: uint64(stamp)}, err
}

// Delay returns how long to wait before acting on the reservation: 0 if
// its tokens were available at once. It is measured on this process's
// monotonic clock from when Redis's reply arrived, which is never before
// the tokens are due on Redis TIME (a FallbackTo reservation's, as its
// local limiter measures it).
func (r *Reservation) Delay() time.Duration {
	return r.DelayFrom(time.Now())
}

// DelayFrom returns how long after now the reservation's tokens are due.
func (r *Reservation) DelayFrom(now time.Time) time.Duration {
	switch {
	case r == nil:
		return 0
	case r.local != nil:
		return r.local.DelayFrom(now)
	}
	return max(r.due.Sub(now), 0)
}

// Cancel gives back the reservation's tokens if they are not yet due, as
// far as no later reservation depends on them (x/time/rate's rule, as
// atomiclimit.Reservation.Cancel): the later reservations, of any
// process, keep the times they were promised, so that no instant ever has
// more than the burst due, and the tokens they depend on stay taken. A
// reservation with nothing reserved after it comes back whole: the key is
// as if it had never been made. It is one script call on the key (Redis
// decides at its TIME whether the tokens are due), made with ctx (and
// WithTimeout); none once Delay has run out, on this process's clock,
// which never reads them due before Redis does: the tokens are then taken
// to be used, and nothing comes back. A second Cancel does nothing. A
// reservation FallbackTo's limiter made is cancelled there; one FailOpen
// made, or of n = 0 or Unlimited, has nothing to give back.
//
// Its error is Refund's: an outage wraps ErrUnavailable, a rejection
// ErrRejected, a ctx that ended first ctx.Err(); nothing is given back
// then, and the Cancel is spent all the same.
func (r *Reservation) Cancel(ctx context.Context) error {
	if r == nil || r.done {
		return nil
	}
	r.done = true
	if r.local != nil {
		r.local.Cancel()
		return nil
	}
	if time.Now().After(r.due) {
		return nil // due on Redis TIME too: nothing to give back
	}
	_, err := r.cancel(ctx, -1)
	return err
}

// cancel runs the give-back of a reservation not yet given back, at
// Redis TIME (nowMicros < 0) or at an explicit time (tests only).
func (r *Reservation) cancel(ctx context.Context, nowMicros int64) (bool, error) {
	ok, err := r.c.evalRefund(ctx, r.rkey, r.n, r.tk, true, nowMicros)
	if err != nil {
		r.c.observeErr(err)
		return false, err
	}
	if ok && r.forget != nil {
		// First Redis lowered TAT, then the bound goes (Refund).
		r.forget()
	}
	return ok, nil
}
