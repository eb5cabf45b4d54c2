package redisgcra

import (
	"context"

	"github.com/atomiclimit/atomiclimit"
)

// Take decides a request for n at key exactly as Decide does, and returns
// the receipt that Refund needs to give the admission back: the TAT the
// script stored, in µs on Redis TIME (never 0). The receipt is 0 when
// nothing was stored in Redis: a denial, a peek (n = 0), n out of range,
// Unlimited and DenyAll, a denial by the over-limit cache, and a decision
// of the Outage policy (FailOpen's admissions, and FallbackTo's, which
// therefore cannot be given back; the local limiter keeps them).
//
// The error is nil when Redis, the cache or the static limit decided. When
// Redis failed or WithTimeout passed, it wraps ErrUnavailable and the cause,
// with the Outage policy's decision (Decide's SourceFailOpen,
// SourceFailClosed or SourceFallback). When ctx ended first it wraps
// ctx.Err() and not ErrUnavailable, and the decision is the zero one
// (Decide's SourceCaller).
func (l *Limiter) Take(ctx context.Context, key string, n int) (atomiclimit.Decision, atomiclimit.Receipt, error) {
	r, stored := l.decide(ctx, key, n, opReceipt, -1)
	return r.Decision, atomiclimit.Receipt(stored), r.Err
}

// Check returns the decision Take(ctx, key, n) would make now, taking
// nothing: Peek in the contract's form, with Take's errors.
func (l *Limiter) Check(ctx context.Context, key string, n int) (atomiclimit.Decision, error) {
	r, _ := l.decide(ctx, key, n, opPeek, -1)
	return r.Decision, r.Err
}

// Quota describes the limit every key is held to, as Redis decides it:
// kind "gcra", Limit the burst, Window and IdleAfter B·T with T rounded
// up to whole microseconds (Params().Span()), and String the limiter's
// String. Unlimited has Limit math.MaxInt and Window 0, DenyAll Limit 0, as
// in process. It makes no call and does not allocate.
func (l *Limiter) Quota(string) atomiclimit.Quota { return l.quota }
