package redislimit

import (
	"context"
	"net/netip"

	"github.com/atomiclimit/atomiclimit"
)

// A Limiter[K] is a KeyedLimiter[K]: the doors (httplimit, grpclimit) take
// it as they take the in-process limiters of the same key type, with no
// adapter: keyed by a string (a header, an API key) or by httplimit's
// client address, a netip.Prefix.
var (
	_ atomiclimit.KeyedLimiter[string]       = (*Limiter[string])(nil)
	_ atomiclimit.KeyedLimiter[netip.Prefix] = (*Limiter[netip.Prefix])(nil)
)

// Take decides a request for n at key and takes n if it is admitted, with
// the whole decision: remaining, retry-after, reset-after and time to the
// next token, each exactly as the in-process limiter of the same rule
// defines them (for New's, gcra with Params), on Redis's clock. n = 0 is an
// admitted peek that takes nothing (as in x/time/rate and gcra); n < 0, and
// n above what the rule can ever admit, are denied with RetryAfter
// gcra.Never and take nothing. It is one round trip (one EVALSHA), or none
// when the over-limit cache or a static limit (Unlimited, DenyAll) answers.
//
// The receipt is what Refund needs to give the admission back: for New's
// limiter, the TAT the script stored, the script's TIME and the key's
// give-back epoch it read (µs on Redis TIME; refundLua); for NewRule's, the
// window (slice) the admission was counted in, and an anchored window's
// anchor and count. It is the zero Receipt when nothing was stored in
// Redis: a denial, a peek (n = 0), n out of range, Unlimited and DenyAll, a
// denial by the over-limit cache, FailOpen's admissions, and the rules
// whose admissions are not given back (Quota().Refunds()). An admission
// FallbackTo's local limiter made during an outage has that limiter's
// receipt: Refund gives it back there, so a door that refunds it (another
// policy denied) leaves the local limiter as if the request had never come.
//
// The error is nil when Redis, the cache or the static limit decided, but
// for a corrupt state that Redis repaired and decided on (ErrCorrupt: a
// denial). When Redis failed or WithTimeout passed (an outage), it wraps
// ErrUnavailable and the cause, with the Outage policy's decision: FailOpen
// admits, FailClosed denies, FallbackTo's limiter decides. When Redis
// rejected the call it wraps ErrRejected, with FallbackTo's decision or a
// denial (FailOpen never admits on a rejection). A decision of FallbackTo's
// limiter, on an outage or a rejection, wraps atomiclimit.ErrFallback as
// well: it is that limiter's decision on a state of its own, which the
// doors take as the policy's (its denial is a 429 or ResourceExhausted,
// with its wait, not a 503), reporting the outage beside it; if the local
// limiter was full and refused the key, the error wraps its
// atomiclimit.ErrTooManyKeys too. When ctx ended first (the
// caller gave up: not an outage) it wraps ctx.Err() and neither sentinel,
// and the decision is the zero one, which denies and describes no state:
// no policy decided. A ctx already done makes no call; the static limits
// and the over-limit cache, which need none, answer regardless of ctx. The
// Hook hears which of these decided (Source).
func (l *Limiter[K]) Take(ctx context.Context, key K, n int) (atomiclimit.Decision, atomiclimit.Receipt, error) {
	r := l.decide(ctx, key, n, opReceipt, -1)
	return r.Decision, r.receipt, r.Err
}

// remote is the atomiclimit.Receipt that carries rc (the zero Receipt for
// the zero rc).
func (rc receipt) remote() atomiclimit.Receipt {
	if rc == (receipt{}) {
		return atomiclimit.Receipt{}
	}
	return atomiclimit.RemoteReceipt(rc)
}

// Peek returns the decision Take(ctx, key, n) would make now, taking
// nothing, with Take's errors. It is one round trip too (or a cache hit),
// and the Outage policy answers it as it answers Take, FallbackTo's limiter
// with its own Peek (the error wrapping atomiclimit.ErrFallback). A door
// asks it of the policies after one that denied.
func (l *Limiter[K]) Peek(ctx context.Context, key K, n int) (atomiclimit.Decision, error) {
	r := l.decide(ctx, key, n, opPeek, -1)
	return r.Decision, r.Err
}

// Refund gives back the n that the admission of key which returned receipt
// r took, as far as key's state in Redis still holds it, and reports
// whether it gave anything back: atomically, in one script call on key
// alone (cluster-safe). n must be the n given to Take, and each receipt is
// given back once. Admissions may be given back in any order, by any
// process.
//
// It never creates quota: the key's state ends as it would be had the
// admission never been made, or stricter, whatever was admitted, reserved
// or given back on key meanwhile, by any process. For New's limiter (GCRA,
// exactly gcra.Params.Refund, on Redis TIME): when no give-back that moved
// other admissions was made on key since the admission (refundLua), it
// gives back everything of the admission still ahead of now that no later
// reservation depends on, so that a give-back with nothing else in between
// leaves the state the admission found (a full bucket is deleted);
// otherwise, with no reservation queued since, the part certainly its own,
// which is stricter than that by at most the time between Take and Refund,
// and nothing if the bucket was full when it admitted; and with one, only
// what no later admission can depend on (gcra.Anything), often nothing. A window gives back its
// count exactly, while the state counts the window it was admitted in (an
// anchored window's first admission given back with others after it moves
// the window to now, as in process). It gives nothing back once the
// admission's tokens are due or its window has passed, and nothing to a
// state created after key's state expired. A Reset (or a DEL, FLUSHALL,
// eviction) in between already gave the whole bucket back: a receipt from
// before it, until its tokens are due, may give back up to its n·T to a
// new state that holds at least that much from the receipt's time (the
// package doc, "A receipt from before a Reset", says why this is not
// closed).
//
// The zero Receipt, n < 1, n > the most one request takes, and a receipt
// Take cannot have returned give back nothing and make no call. A receipt
// of FallbackTo's local limiter is given back to it. The errors are Take's:
// an outage wraps ErrUnavailable, a rejection ErrRejected (and either gives
// back nothing; no Outage policy applies), a ctx that ended first wraps
// ctx.Err().
//
// With the over-limit cache, a give-back lowers a TAT that caches may hold a
// bound of, by at most the n·T given back: this process forgets key's entry;
// another process's cache may deny key, for at most that long, what Redis
// would admit (cache.go).
func (l *Limiter[K]) Refund(ctx context.Context, key K, n int, r atomiclimit.Receipt) (bool, error) {
	return l.refund(ctx, key, n, r, -1)
}

// refund is Refund; nowMicros ≥ 0 replaces Redis TIME (tests only).
func (l *Limiter[K]) refund(ctx context.Context, key K, n int, r atomiclimit.Receipt, nowMicros int64) (bool, error) {
	v, remote := r.Remote()
	if !remote {
		// An admission FallbackTo's limiter made during an outage, or the
		// zero Receipt.
		if l.local == nil || r == (atomiclimit.Receipt{}) {
			return false, nil
		}
		return l.local.Refund(ctx, key, n, r)
	}
	rc := receipt(v)
	if rc[0] == 0 || rc[0] >= maxReceipt || rc[1] >= maxReceipt || rc[2] >= maxReceipt ||
		l.static || uint64(int64(n)-1) >= uint64(l.maxN) {
		return false, nil // not a receipt of this limiter's, or never admitted
	}
	ok, err := l.remote.refund(ctx, &l.core, l.Key(key), n, rc, nowMicros)
	if err != nil {
		l.observeErr(err)
		return false, err
	}
	if ok && l.cache != nil {
		// First Redis lowered TAT, then the bound goes: a denial that read
		// Redis before the give-back may still record a bound above the
		// new TAT, by at most n·T (cache.go).
		l.cache.forget(key)
	}
	return ok, nil
}

// Quota describes the limit every key is held to, as Redis decides it:
// kind "gcra", Limit the burst, Window and IdleAfter B·T with T rounded
// up to whole microseconds (Params().Span()), and String the limiter's
// String. Unlimited has Limit math.MaxInt and Window 0, DenyAll Limit 0, as
// in process. It makes no call and does not allocate.
func (l *Limiter[K]) Quota(K) atomiclimit.Quota { return l.quota }
