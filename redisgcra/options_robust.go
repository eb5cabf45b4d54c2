package redisgcra

import (
	"errors"
	"fmt"
	"time"
)

// The options for failures and for observing them: WithHook and
// WithOverLimitCacheMaxAge.

// robustConfig is the part of config these options set.
type robustConfig struct {
	hook           Hook
	hookPolicy     string
	cacheMaxAge    time.Duration
	cacheMaxAgeSet bool
}

// DefaultCacheMaxAge is how long an over-limit cache entry answers after
// the Redis denial that last refreshed it, unless WithOverLimitCacheMaxAge
// says otherwise.
const DefaultCacheMaxAge = time.Second

var (
	// ErrInvalidCacheMaxAge: WithOverLimitCacheMaxAge with d ≤ 0.
	ErrInvalidCacheMaxAge = errors.New("redisgcra: invalid over-limit cache max age")
)

// WithHook makes the Limiter report its decisions and errors to h, under
// the name policy (see Hook). Without it, a decision pays one predictable
// branch.
func WithHook(policy string, h Hook) Option {
	return optionFunc(func(c *config) { c.robust.hook, c.robust.hookPolicy = h, policy })
}

// WithOverLimitCacheMaxAge bounds how long an over-limit cache entry
// (WithOverLimitCache) answers: d after the Redis denial that last
// refreshed it (DefaultCacheMaxAge, 1s, otherwise). After that the next
// request for the key goes to Redis. It is the bound on what the cache can
// miss: a reset from elsewhere (DEL, Reset in another process, FLUSHALL, a
// restart without persistence, a failover to a replica that lacked the
// key) or a refund in another process lowers a key's state without this
// process knowing; its cache may deny the key for up to d more. A flood
// of requests for a denied key costs one round trip per d per process.
func WithOverLimitCacheMaxAge(d time.Duration) Option {
	return optionFunc(func(c *config) { c.robust.cacheMaxAge, c.robust.cacheMaxAgeSet = d, true })
}

// applyRobust validates rc and applies it to l, after the rest of New.
func (l *Limiter) applyRobust(rc *robustConfig) error {
	maxAge := DefaultCacheMaxAge
	if rc.cacheMaxAgeSet {
		if rc.cacheMaxAge <= 0 {
			return fmt.Errorf("%w: %v", ErrInvalidCacheMaxAge, rc.cacheMaxAge)
		}
		maxAge = rc.cacheMaxAge
	}
	if l.cache != nil {
		l.cache.maxAge = int64(maxAge)
	}
	l.hook, l.hookPolicy = rc.hook, rc.hookPolicy
	return nil
}
