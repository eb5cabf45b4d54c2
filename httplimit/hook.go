package httplimit

import "github.com/atomiclimit/atomiclimit/atomicbucket"

// A Hook observes rate-limiting events, for metrics and logs: it is
// atomicbucket.Hook, so one implementation observes both the middleware
// (Config.Hook) and the core Keyed limiters (atomicbucket.WithHook). Give it
// to one of the two for a given limiter, not both.
type Hook = atomicbucket.Hook

// NopHook implements Hook and does nothing; embed it to implement only some
// of the methods.
type NopHook = atomicbucket.NopHook

// statser is implemented by *atomicbucket.Keyed.
type statser interface {
	Stats() atomicbucket.KeyedStats
}
