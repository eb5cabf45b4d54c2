package atomiclimit

import "time"

// A Hook observes rate-limiting events, for metrics and logs: a Keyed
// limiter's decisions and evictions (WithHook), and the doors' (httplimit's
// and grpclimit's Config.Hook). Set the fields of the events you want; a
// nil field is an event nobody hears. The functions are called
// synchronously, from many goroutines at once: they must be safe for
// concurrent use and quick (increment a counter; do not block). Without a
// hook a limiter pays one predictable branch per event.
//
// The functions take the policy name and plain values, never a key, so
// that metrics labelled by policy keep a bounded cardinality.
type Hook struct {
	// Allowed hears a request of cost tokens that the policy admitted.
	Allowed func(policy string, cost int)
	// Denied hears a request the policy denied and the exact wait after
	// which it would be admitted (gcra.Never if never).
	Denied func(policy string, cost int, retryAfter time.Duration)
	// Overloaded hears a request of cost tokens for a new key that the
	// policy's full limiter had no room for (WithMaxKeys with RejectNew):
	// the server's capacity, not the key's quota.
	Overloaded func(policy string, cost int)
	// Evicted hears that keys keys were removed from the policy's limiter:
	// idle ones, or with EvictStalest active ones.
	Evicted func(policy string, keys int)
	// Error hears a request that could not be decided: a remote store's
	// outage, a door's key or cost that failed.
	Error func(policy string, err error)

	// The events of waiting, which the client doors report (httplimit's
	// Transport, grpclimit's Pacer).

	// Waited hears a request that waited for the policy before the policy
	// admitted it (Stack.Wait), and how long; a request admitted at once
	// is not heard here. A client door reports the time a request waited
	// for the provider's hold under the door's own name.
	Waited func(policy string, cost int, waited time.Duration)
	// Held hears a client door holding a key's requests because the
	// provider said so (a 429 or 503 with Retry-After, a RateLimit field
	// with r=0; a RetryInfo), under the door's own name, and for how long.
	Held func(policy string, hold time.Duration)
	// Retried hears a request a client door sent again after the provider
	// refused it, under the door's own name: attempt 1 is the first retry.
	Retried func(policy string, attempt int)
}

// WithHook makes a Keyed limiter report its decisions (Allow, AllowN, Take,
// TakeN, Reserve, ReserveN, Wait, WaitN: one event per call that decided,
// the one it decided, in the caller's goroutine before the call returns)
// and its evictions to h under the name policy. Do not give the
// same hook to a Keyed limiter and to a door over it: both would report
// each request.
func WithHook(policy string, h *Hook) Option {
	return optionFunc(func(cfg *config) {
		cfg.hook, cfg.keyed.HookName = h, policy
		if h != nil && h.Evicted != nil {
			cfg.keyed.Hook = evictHook{h.Evicted}
		}
		cfg.keyedOnlyOption("WithHook")
	})
}

// evictHook is a Hook's Evicted as the key store's eviction hook.
type evictHook struct{ f func(policy string, keys int) }

func (e evictHook) Evicted(policy string, keys int) { e.f(policy, keys) }
