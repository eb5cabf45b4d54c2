// Package atomiclimit rate-limits work per key (user, API key, client IP,
// tenant) with lock-free GCRA buckets: one import for the common case.
//
//	lim, err := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(10), 20)
//	…
//	if !lim.Allow(userID) {
//		http.Error(w, "slow down", http.StatusTooManyRequests)
//	}
//
// The names here are aliases of the packages that implement them: gcra (the
// arithmetic: limits, parameters, decisions) and atomicbucket (the single-key
// Limiter and the Keyed limiter). Their documentation has the details.
package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/gcra"
)

type (
	// Limit is a rate: a count per period (see gcra.Limit).
	Limit = gcra.Limit
	// Decision is the whole outcome of one request (see gcra.Decision).
	Decision = gcra.Decision
	// Keyed is a limiter with one bucket per key (see atomicbucket.Keyed).
	Keyed[K comparable] = atomicbucket.Keyed[K]
	// Limiter is a single-key limiter (see atomicbucket.Limiter).
	Limiter = atomicbucket.Limiter
	// Reservation holds tokens promised for later (see atomicbucket.Reservation).
	Reservation = atomicbucket.Reservation
	// Tier is a limit shared by some keys of a Keyed limiter.
	Tier = atomicbucket.Tier
	// KeyedStats counts what a Keyed limiter has done.
	KeyedStats = atomicbucket.KeyedStats
	// FullPolicy says what a full Keyed limiter does with a new key.
	FullPolicy = atomicbucket.FullPolicy
	// Option configures a limiter.
	Option = atomicbucket.Option
	// Clock tells the time (for WithClock).
	Clock = atomicbucket.Clock
)

// The policies of WithMaxKeys.
const (
	RejectNew    = atomicbucket.RejectNew
	EvictStalest = atomicbucket.EvictStalest
)

var (
	// Unlimited admits every request and stores nothing.
	Unlimited = gcra.Unlimited
	// DenyAll admits nothing.
	DenyAll = gcra.DenyAll
)

// NewKeyed returns a limiter that gives every key limit and burst; see
// atomicbucket.NewKeyed.
func NewKeyed[K comparable](limit Limit, burst int, opts ...Option) (*Keyed[K], error) {
	return atomicbucket.NewKeyed[K](limit, burst, opts...)
}

// New returns a single-key limiter; see atomicbucket.New.
func New(limit Limit, burst int, opts ...Option) (*Limiter, error) {
	return atomicbucket.New(limit, burst, opts...)
}

// Per returns n events per period.
func Per(n int, period time.Duration) Limit { return gcra.Per(n, period) }

// PerSecond returns n events per second.
func PerSecond(n int) Limit { return gcra.PerSecond(n) }

// PerMinute returns n events per minute.
func PerMinute(n int) Limit { return gcra.PerMinute(n) }

// PerHour returns n events per hour.
func PerHour(n int) Limit { return gcra.PerHour(n) }

// PerDay returns n events per 24 hours.
func PerDay(n int) Limit { return gcra.PerDay(n) }

// Every returns one event per d.
func Every(d time.Duration) Limit { return gcra.Every(d) }

// WithClock makes a limiter read c; see atomicbucket.WithClock.
func WithClock(c Clock) Option { return atomicbucket.WithClock(c) }

// WithCoarseClock makes a limiter read the 1 ms coarse clock; see
// atomicbucket.WithCoarseClock.
func WithCoarseClock() Option { return atomicbucket.WithCoarseClock() }

// WithMaxKeys bounds a Keyed limiter; see atomicbucket.WithMaxKeys.
func WithMaxKeys(n int, policy FullPolicy) Option { return atomicbucket.WithMaxKeys(n, policy) }

// WithSweepInterval sets the idle-key sweeper's pass; see
// atomicbucket.WithSweepInterval.
func WithSweepInterval(d time.Duration) Option { return atomicbucket.WithSweepInterval(d) }
