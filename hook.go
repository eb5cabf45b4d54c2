package atomiclimit

import "time"

// A Hook observes rate-limiting events, for metrics and logs: the Keyed
// limiter's decisions and evictions (WithHook), and the HTTP middleware's
// (httplimit.Config.Hook, the same interface). Its methods are called
// synchronously, from many goroutines at once: they must be safe for
// concurrent use and quick (increment a counter; do not block). Without a
// hook a limiter pays one predictable branch per event.
//
// The methods take the policy name and plain values, never a key, so that
// metrics labelled by policy keep a bounded cardinality.
type Hook interface {
	// Allowed reports a request of cost tokens that the policy admitted.
	Allowed(policy string, cost int)
	// Denied reports a request the policy denied and the exact wait after
	// which it would be admitted (gcra.Never if never).
	Denied(policy string, cost int, retryAfter time.Duration)
	// Evicted reports that keys keys were removed from the policy's limiter:
	// idle ones, or with EvictStalest active ones.
	Evicted(policy string, keys int)
	// Overloaded reports a request of cost tokens for a new key that the
	// policy's full limiter had no room for (WithMaxKeys with RejectNew): the
	// server's capacity, not the key's quota.
	Overloaded(policy string, cost int)
	// Error reports a request that could not be decided.
	Error(policy string, err error)
}

// NopHook implements Hook and does nothing; embed it to implement only some
// of the methods.
type NopHook struct{}

func (NopHook) Allowed(string, int)               {}
func (NopHook) Denied(string, int, time.Duration) {}
func (NopHook) Evicted(string, int)               {}
func (NopHook) Overloaded(string, int)            {}
func (NopHook) Error(string, error)               {}

// WithHook makes a Keyed limiter report its decisions (Allow, AllowN, Decide,
// DecideAt) and its evictions to h under the name policy. Do not give the
// same hook to a Keyed limiter and to an httplimit middleware over it: both
// would report each request.
func WithHook(policy string, h Hook) Option {
	return optionFunc(func(cfg *config) {
		cfg.hook, cfg.keyed.Hook, cfg.keyed.HookName = h, h, policy
		cfg.keyedOnlyOption("WithHook")
	})
}
