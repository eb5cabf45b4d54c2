package redislimit

import "time"

// A Hook observes a Limiter's decisions and errors, for metrics and logs
// (WithHook). Its methods are called synchronously, from many goroutines at
// once: they must be safe for concurrent use and quick (increment a
// counter; do not block). They take the policy name given to WithHook and
// plain values, never a key, so that metrics keep a bounded cardinality.
//
// It is atomiclimit.Hook's shape with the Source added (and no evictions:
// the Limiter keeps no keys). Each call of Allow and Take
// reports exactly one of Allowed or Denied, with the Source that decided,
// after Error when the decision has an error; except that a caller who gave up
// (SourceCaller) is reported by Error alone, since nothing was decided.
// Peek reports only its errors. Refund and Reset report theirs
// with SourceCaller when the caller gave up, else with SourceFailClosed:
// nothing was given back, nothing removed.
//
// Do not give the same hook to a Limiter and to an httplimit middleware
// over it: both would report each request.
type Hook interface {
	// Allowed reports a request for n tokens that source admitted.
	Allowed(policy string, source Source, n int)
	// Denied reports a request for n tokens that source denied, and the
	// wait after which it would be admitted (gcra.Never if never).
	Denied(policy string, source Source, n int, retryAfter time.Duration)
	// Error reports a call's error, with the Source of its decision:
	// errors.Is tells an outage (ErrUnavailable; ErrCircuitOpen when the
	// breaker skipped Redis) from a rejection (ErrRejected), a repaired
	// corrupt state (ErrCorrupt, SourceRedis) and a caller who gave up
	// (SourceCaller, the caller's ctx.Err()).
	Error(policy string, source Source, err error)
}

// observe reports the result r of a decision for n to the hook, which is
// set. take is false for Peek.
func (l *Limiter) observe(r result, n int, take bool) {
	h := l.hook
	if r.Err != nil {
		h.Error(l.hookPolicy, r.Source, r.Err)
	}
	switch {
	case !take || r.Source == SourceCaller:
	case r.Allowed:
		h.Allowed(l.hookPolicy, r.Source, n)
	default:
		h.Denied(l.hookPolicy, r.Source, n, r.RetryAfter)
	}
}

// observeErr reports the error of a Refund or a Reset to the hook, if any.
func (l *Limiter) observeErr(err error) {
	if l.hook == nil || err == nil {
		return
	}
	src := SourceFailClosed
	if !isRejected(err) && !isUnavailable(err) {
		src = SourceCaller
	}
	l.hook.Error(l.hookPolicy, src, err)
}
