package gcra

import (
	"math"
	"time"
)

// A Decision is the full outcome of one request for n tokens at time now.
// All durations are relative to now and exact to the nanosecond; convert
// them to coarser units by rounding up (a client that waits what it was told
// is admitted).
type Decision struct {
	// Allowed reports whether the n tokens were admitted.
	Allowed bool
	// Remaining is the number of tokens a request at the same instant could
	// still take: floor((B·T − (TAT' − now)) / T), TAT' the state after the
	// call. math.MaxInt for Unlimited.
	Remaining int
	// RetryAfter is 0 when allowed. When denied it is the exact wait after
	// which the same request is admitted (if nothing else consumes tokens
	// meanwhile): max(TAT, now) + n·T − B·T − now. Never when n < 0, n > B or
	// the limit is DenyAll (n ≥ 1).
	RetryAfter time.Duration
	// ResetAfter is the time until the bucket is full again: max(0, TAT' − now).
	ResetAfter time.Duration
	// TokenAfter is the time until at least one token is available:
	// max(0, TAT' − now − (B−1)·T). It is 0 whenever Remaining ≥ 1, and Never
	// for DenyAll.
	TokenAfter time.Duration
}

// Admit decides a request for n tokens at now against the stored state tat.
// It returns the state to store and whether the request is admitted. When it
// is denied, next == tat: a denial writes nothing. n = 0 is a peek: admitted
// under every limit (DenyAll and a retired bucket included) with next == tat, which
// the caller must not store either. For Unlimited, next is
// max(tat, now); the buckets do not store it, so Unlimited writes nothing.
//
// now must be a value from Nanos. next never precedes tat, whatever now is:
// a stale or backward now can only make the decision stricter.
//
// Admit is Reserve with maxWait 0, written out so that it inlines into the
// buckets' hot paths; the tests check the two agree on every step.
func (p *Params) Admit(tat, now int64, n int) (next int64, ok bool) {
	if uint64(int64(n)-1) >= uint64(p.burst) { // n < 1 or n > B (see Reserve)
		return tat, n == 0 // n = 0: a peek, admitted, consumes nothing
	}
	// Unlimited has T = 0: next = max(tat, now) always passes.
	next = max(tat, now) + int64(n)*p.interval
	if next-now > p.span {
		return tat, false
	}
	return next, true
}

// Reserve decides a request for n tokens at now that is willing to wait up
// to maxWait ns for its turn. It admits when the wait is at most maxWait and
// returns the state to store and the wait (0 if the tokens are there now).
// When it denies, next == tat and wait is the wait the request would need:
// Never when n < 0, n > B or DenyAll (n ≥ 1). n = 0 is admitted with wait 0
// and next == tat: nothing to store. Admit is Reserve with maxWait 0.
// maxWait is capped at MaxWait: a reservation is never due further ahead.
//
//	base   = max(TAT, now)
//	next   = base + n·T
//	wait   = next − now − B·T      (≤ 0: the tokens are available now)
//	admit ⇔ n = 0, or 1 ≤ n ≤ B and wait ≤ maxWait
func (p *Params) Reserve(tat, now int64, n int, maxWait int64) (next, wait int64, ok bool) {
	// One unsigned compare rejects both n < 1 (n-1 wraps to a huge value)
	// and n > B. It also keeps n·T ≤ B·T ≤ maxSpan: no overflow below.
	// n = 0 takes the same rare branch: a peek, admitted at once.
	if uint64(int64(n)-1) >= uint64(p.burst) {
		if n == 0 {
			return tat, 0, true
		}
		return tat, math.MaxInt64, false
	}
	// Unlimited has T = 0 and an unbounded span: next = max(tat, now), wait < 0.
	next = max(tat, now) + int64(n)*p.interval
	wait = next - now - p.span
	if wait > min(maxWait, int64(MaxWait)) {
		return tat, wait, false
	}
	return next, max(wait, 0), true
}

// Decide is Admit with the whole Decision. It returns the state to store
// (tat itself when denied, and for n = 0, which is allowed and describes
// the state as it is) and the decision. Peek is Decide without storing.
// For Unlimited, Remaining is math.MaxInt and every duration is 0.
func (p *Params) Decide(tat, now int64, n int) (next int64, d Decision) {
	next, wait, ok := p.Reserve(tat, now, n, 0)
	d = p.State(next, now)
	d.Allowed = ok
	if !ok {
		d.RetryAfter = time.Duration(wait)
	}
	return next, d
}

// State describes a bucket whose stored state is tat, at now, without a
// request: Remaining, ResetAfter and TokenAfter. Allowed and RetryAfter are
// zero.
func (p *Params) State(tat, now int64) Decision {
	if p.IsUnlimited() {
		return Decision{Remaining: math.MaxInt}
	}
	if p.burst == 0 { // DenyAll or the zero Params: no token, ever
		return Decision{TokenAfter: Never}
	}
	debt := max(tat-now, 0) // time until full; > span only if now went back
	d := Decision{ResetAfter: time.Duration(debt)}
	if debt < p.span {
		d.Remaining = int((p.span - debt) / p.interval)
	}
	d.TokenAfter = time.Duration(max(debt-p.span+p.interval, 0))
	return d
}
