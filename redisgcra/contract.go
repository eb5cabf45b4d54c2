package redisgcra

import (
	"context"

	"github.com/atomiclimit/atomiclimit"
)

// A Limiter is a KeyedLimiter: the doors (httplimit) take it as they take
// the in-process limiters, with no adapter.
var _ atomiclimit.KeyedLimiter[string] = (*Limiter)(nil)

// Take decides a request for n at key exactly as Decide does, and returns
// the receipt that Refund needs to give the admission back: the TAT the
// script stored, in µs on Redis TIME (never 0). The receipt is 0 when
// nothing was stored in Redis: a denial, a peek (n = 0), n out of range,
// Unlimited and DenyAll, a denial by the over-limit cache, and FailOpen's
// admissions. An admission FallbackTo's local limiter made during an outage
// has that limiter's receipt, tagged: Refund gives it back there, so a door
// that refunds it (another policy denied) leaves the local limiter as if
// the request had never come.
//
// The error is nil when Redis, the cache or the static limit decided, but
// for a corrupt state that Redis repaired and decided on (ErrCorrupt: a
// denial). When Redis failed or WithTimeout passed, it wraps ErrUnavailable
// and the cause, with the Outage policy's decision (Decide's
// SourceFailOpen, SourceFailClosed or SourceFallback). When Redis rejected
// the call it wraps ErrRejected, with FallbackTo's decision or a denial.
// When ctx ended first it wraps ctx.Err() and neither sentinel, and the
// decision is the zero one (Decide's SourceCaller).
func (l *Limiter) Take(ctx context.Context, key string, n int) (atomiclimit.Decision, atomiclimit.Receipt, error) {
	r, stored := l.decide(ctx, key, n, opReceipt, -1)
	if r.local != (atomiclimit.Receipt{}) {
		return r.Decision, r.local, r.Err // FallbackTo's admission: Refund gives it back there
	}
	return r.Decision, receiptOf(stored), r.Err
}

// receiptOf is the receipt of a TAT stored in Redis (0: none).
func receiptOf(stored uint64) atomiclimit.Receipt {
	if stored == 0 {
		return atomiclimit.Receipt{}
	}
	return atomiclimit.RemoteReceipt([3]uint64{stored})
}

// Check returns the decision Take(ctx, key, n) would make now, taking
// nothing: Peek in the contract's form, with Take's errors.
func (l *Limiter) Check(ctx context.Context, key string, n int) (atomiclimit.Decision, error) {
	r, _ := l.decide(ctx, key, n, opPeek, -1)
	return r.Decision, r.Err
}

// Refund gives back the n that the admission of key which returned receipt
// r took, if key's state in Redis still counts it, and reports whether it
// did: atomically, in one script call on key alone (cluster-safe). If the
// stored TAT is exactly r, it stores max(r − n·T, now), or deletes the key
// when that is now (the bucket is full); otherwise it writes nothing. It
// never creates quota: once anything else has been admitted on key (by any
// process), or the admission's tokens are already due, it gives back
// nothing. Refund several admissions in the reverse order of Take to give
// back all of them. n must be the n given to Take.
//
// A receipt of 0, n < 1 and n > B give back nothing and make no call. The
// errors are Take's: an outage wraps ErrUnavailable, a rejection
// ErrRejected (and either gives back nothing; no Outage policy applies), a
// ctx that ended first wraps ctx.Err().
//
// With the over-limit cache, a refund lowers a TAT that caches may hold a
// bound of: this process forgets key's entry; another process's cache may
// deny key, for at most the refunded n·T, what Redis would admit (cache.go).
func (l *Limiter) Refund(ctx context.Context, key string, n int, r atomiclimit.Receipt) (bool, error) {
	return l.refund(ctx, key, n, r, -1)
}

// refund is Refund; nowMicros ≥ 0 replaces Redis TIME (tests only).
func (l *Limiter) refund(ctx context.Context, key string, n int, r atomiclimit.Receipt, nowMicros int64) (bool, error) {
	v, remote := r.Remote()
	if !remote {
		// An admission FallbackTo's limiter made during an outage, or the
		// zero Receipt.
		if l.outage.kind != outageFallback || r == (atomiclimit.Receipt{}) {
			return false, nil
		}
		return l.outage.local.Refund(ctx, key, n, r)
	}
	receipt := v[0]
	if receipt == 0 || receipt >= maxReceipt || l.static || uint64(int64(n)-1) >= uint64(l.maxN) {
		return false, nil // not a receipt of this limiter's, or never admitted
	}
	ok, err := l.remote.refund(ctx, l, l.Key(key), n, receipt, nowMicros)
	if err != nil {
		l.observeErr(err)
		return false, err
	}
	if ok && l.cache != nil {
		// First Redis lowered TAT, then the bound goes: a denial that read
		// Redis before the refund may still record a bound above the new
		// TAT, by at most n·T (cache.go).
		l.cache.forget(key)
	}
	return ok, nil
}

// Quota describes the limit every key is held to, as Redis decides it:
// kind "gcra", Limit the burst, Window and IdleAfter B·T with T rounded
// up to whole microseconds (Params().Span()), and String the limiter's
// String. Unlimited has Limit math.MaxInt and Window 0, DenyAll Limit 0, as
// in process. It makes no call and does not allocate.
func (l *Limiter) Quota(string) atomiclimit.Quota { return l.quota }
