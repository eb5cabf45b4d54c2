package redislimit

import (
	"fmt"
	"time"
)

// The options for failures and for observing them: WithBreaker, WithHook
// and WithOverLimitCacheMaxAge.

// robustConfig is the part of config these options set.
type robustConfig struct {
	breakerFailures int
	breakerWindow   time.Duration
	breakerSet      bool
	hook            *Hook
	hookPolicy      string
	cacheMaxAge     time.Duration
	cacheMaxAgeSet  bool
}

// defaultCacheMaxAge is how long an over-limit cache entry answers after
// the Redis denial that last refreshed it, unless WithOverLimitCacheMaxAge
// says otherwise.
const defaultCacheMaxAge = time.Second

var (
	// errInvalidBreaker: WithBreaker with failures < 1 or a window ≤ 0.
	errInvalidBreaker = configErr("invalid breaker")
	// errInvalidCacheMaxAge: WithOverLimitCacheMaxAge with d ≤ 0.
	errInvalidCacheMaxAge = configErr("invalid over-limit cache max age")
)

// WithBreaker adds a circuit breaker: after failures outages in a row (in
// the order the calls end, with no answer from Redis between them), the
// Limiter stops calling Redis for window. Meanwhile every call fails at
// once with an error wrapping ErrUnavailable and ErrCircuitOpen, and the
// Outage policy decides, as for any outage. The first call after the
// window probes Redis (the only call that does): an answer closes the
// breaker, another outage opens it for another window. Rejections
// (ErrRejected) and corrupt states are answers: they never open it.
//
// Without a breaker, every call during an outage waits for its own
// failure: against a host that does not answer, the whole WithTimeout. The
// breaker covers every call of the Limiter (all keys, Refund and Reset
// too); a Redis Cluster with one node down opens it for the keys of the
// others as well.
func WithBreaker(failures int, window time.Duration) Option {
	return optionFunc(func(c *config) {
		c.robust.breakerFailures, c.robust.breakerWindow, c.robust.breakerSet = failures, window, true
	})
}

// WithHook makes the Limiter report its decisions and errors to h, under
// the name policy (see Hook). New copies h: later changes to it are not
// heard. Without a hook (nil, or one whose fields are all nil), a decision
// pays one predictable branch.
func WithHook(policy string, h *Hook) Option {
	return optionFunc(func(c *config) { c.robust.hook, c.robust.hookPolicy = h, policy })
}

// WithOverLimitCacheMaxAge bounds how long an over-limit cache entry
// (WithOverLimitCache) answers: d after the Redis denial that last
// refreshed it (1s otherwise). After that the next
// request for the key goes to Redis. It is the bound on what the cache can
// miss: a reset from elsewhere (DEL, Reset in another process, FLUSHALL, a
// restart without persistence, a failover to a replica that lacked the
// key) or a refund in another process lowers a key's state without this
// process knowing; its cache may deny the key for up to d more. A flood
// of requests for a denied key costs one round trip per d per process.
func WithOverLimitCacheMaxAge(d time.Duration) Option {
	return optionFunc(func(c *config) { c.robust.cacheMaxAge, c.robust.cacheMaxAgeSet = d, true })
}

// applyRobust validates rc and applies it to c, after the rest of New; it
// returns the over-limit cache's max age, in ns, for the cache (if any).
func (c *core) applyRobust(rc *robustConfig) (maxAge int64, err error) {
	if rc.breakerSet {
		if rc.breakerFailures < 1 || rc.breakerWindow <= 0 {
			return 0, fmt.Errorf("%w: %d failures, window %v", errInvalidBreaker, rc.breakerFailures, rc.breakerWindow)
		}
		if !c.static { // the static limits make no call
			c.breaker = &breaker{threshold: int64(rc.breakerFailures), window: int64(rc.breakerWindow)}
		}
	}
	maxAge = int64(defaultCacheMaxAge)
	if rc.cacheMaxAgeSet {
		if rc.cacheMaxAge <= 0 {
			return 0, fmt.Errorf("%w: %v", errInvalidCacheMaxAge, rc.cacheMaxAge)
		}
		maxAge = int64(rc.cacheMaxAge)
	}
	c.hook, c.hookPolicy = rc.hook.heard(), rc.hookPolicy
	return maxAge, nil
}
