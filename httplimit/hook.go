package httplimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/atomicbucket"
)

// A Hook observes rate-limiting events, for metrics and logs. Its methods
// are called synchronously on the request's goroutine, concurrently from many
// goroutines: they must be safe for concurrent use and quick (increment a
// counter; do not block). A nil Hook costs one predictable branch per event.
//
// The interface uses only the policy name and plain values, never a request
// or a key, so that the same implementation can observe the core limiters
// (which know nothing of HTTP) once they accept one, and so that metrics
// labelled by policy keep a bounded cardinality.
type Hook interface {
	// Allowed reports a request of cost tokens that the policy admitted.
	Allowed(policy string, cost int)
	// Denied reports a request the policy denied (in DryRun, one it would
	// have denied) and the exact wait after which it would be admitted
	// (gcra.Never if never).
	Denied(policy string, cost int, retryAfter time.Duration)
	// Evicted reports that keys idle keys (or, with EvictStalest, active
	// ones) were removed from the policy's limiter.
	Evicted(policy string, keys int)
	// Error reports a request that could not be decided: its key function
	// or cost failed.
	Error(policy string, err error)
}

// NopHook implements Hook and does nothing; embed it to implement only some
// of the methods.
type NopHook struct{}

func (NopHook) Allowed(string, int)               {}
func (NopHook) Denied(string, int, time.Duration) {}
func (NopHook) Evicted(string, int)               {}
func (NopHook) Error(string, error)               {}

// statser is implemented by *atomicbucket.Keyed.
type statser interface {
	Stats() atomicbucket.KeyedStats
}
