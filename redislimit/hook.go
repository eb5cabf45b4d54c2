package redislimit

import "time"

// A Hook observes a Limiter's decisions and errors, for metrics and logs
// (WithHook). It is atomiclimit.Hook's form, a struct of functions: set the
// fields of the events you want; a nil field is an event nobody hears. The
// functions are called synchronously, from many goroutines at once: they
// must be safe for concurrent use and quick (increment a counter; do not
// block). They take the policy name given to WithHook and plain values,
// never a key, so that metrics keep a bounded cardinality.
//
// It has atomiclimit.Hook's events that a Limiter has (not Overloaded nor
// Evicted: it keeps no keys), each with the Source that decided: what a
// door's hook over the Limiter cannot hear, which tells the decisions of
// Redis, of the over-limit cache, of a static limit and of each Outage
// policy apart. Each call of Allow and Take reports exactly one of Allowed
// or Denied, after Error when the decision has an error; except that a
// caller who gave up (SourceCaller) is reported by Error alone, since
// nothing was decided. Peek reports only its errors. Refund and Reset
// report theirs with SourceCaller when the caller gave up, else with
// SourceFailClosed: nothing was given back, nothing removed. Reserve
// reports as Take does, Allowed when it made a reservation and Denied with
// the wait it needed when none allowed fits (SourceStatic, gcra.Never, for
// n out of range, which makes no call); WaitN once, when it returns, after
// the errors of its calls; nothing for a WaitN whose ctx ended while it
// slept (the caller gave up), nor for a Reserve or WaitN whose ctx was done
// before any call, nor for Reserve's error on a window rule.
// Reservation.Cancel reports its errors as Refund does.
//
// Do not give Allowed and Denied to a Limiter and an httplimit middleware
// over it that count the same thing: both would report each request.
type Hook struct {
	// Allowed hears a request for cost tokens that source admitted.
	Allowed func(policy string, source Source, cost int)
	// Denied hears a request for cost tokens that source denied, and the
	// wait after which it would be admitted (gcra.Never if never).
	Denied func(policy string, source Source, cost int, retryAfter time.Duration)
	// Error hears a call's error, with the Source of its decision:
	// errors.Is tells an outage (ErrUnavailable; ErrCircuitOpen when the
	// breaker skipped Redis) from a rejection (ErrRejected), a repaired
	// corrupt state (ErrCorrupt, SourceRedis) and a caller who gave up
	// (SourceCaller, the caller's ctx.Err()). A decision of FallbackTo's
	// limiter (SourceFallback) is the outage or rejection, wrapping
	// atomiclimit.ErrFallback too, and then the Allowed or Denied of that
	// limiter's decision, as any decision's.
	Error func(policy string, source Source, err error)
}

// heard returns a copy of h, or nil if it hears nothing (nil, or every
// field nil): the Limiter then pays one branch per decision.
func (h *Hook) heard() *Hook {
	if h == nil || (h.Allowed == nil && h.Denied == nil && h.Error == nil) {
		return nil
	}
	c := *h
	return &c
}

// observe reports the result r of a decision for n to the hook, which is
// set. take is false for Peek.
func (l *core) observe(r result, n int, take bool) {
	h := l.hook
	if r.Err != nil && h.Error != nil {
		h.Error(l.hookPolicy, r.Source, r.Err)
	}
	switch {
	case !take || r.Source == SourceCaller:
	case r.Allowed:
		if h.Allowed != nil {
			h.Allowed(l.hookPolicy, r.Source, n)
		}
	default:
		if h.Denied != nil {
			h.Denied(l.hookPolicy, r.Source, n, r.RetryAfter)
		}
	}
}

// observeErr reports the error of a Refund or a Reset to the hook, if any.
func (l *core) observeErr(err error) {
	if l.hook == nil || l.hook.Error == nil || err == nil {
		return
	}
	src := SourceFailClosed
	if !isRejected(err) && !isUnavailable(err) {
		src = SourceCaller
	}
	l.hook.Error(l.hookPolicy, src, err)
}
