// Package atomiclimit rate-limits work per key (user, API key, client IP,
// tenant) with lock-free limiters whose state per key is one atomic word (a
// ring of them for the exact sliding log and the rolling window): one import
// for the common case, errors included.
//
//	lim, err := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(10), 20)
//	…
//	if !lim.Allow(userID) {
//		http.Error(w, "slow down", http.StatusTooManyRequests)
//	}
//
// NewKeyed and New take a GCRA limit (a token bucket: a rate, and a burst
// admitted at once). NewKeyedRule and NewRule take any Rule: GCRA, a fixed
// window (aligned to the limiter, to UTC, or anchored at each key's first
// request), a sliding-window counter, an exact sliding log, a rolling window
// kept in slices, or several of them at once (Bands). Keyed limits each key;
// Limiter is one limit, as x/time/rate's.
//
// # One grammar
//
//	Allow(key)              one event now: admitted?
//	Take(ctx, key, n)       n events now: the whole Decision, and a Receipt
//	Peek(ctx, key, n)       what Take would decide, taking nothing
//	Refund(ctx, key, n, r)  gives back what Take took (another limit denied)
//	Reserve, Wait           pacing: tokens due later, or block until due
//
// A name ending in N takes the time and the count, as x/time/rate's
// AllowN(t, n) (AllowN, TakeN, PeekN, ReserveN; WaitN takes the count); one
// ending in At takes only the time (SweepAt, CancelAt). The others read the
// limiter's clock. Every limiter and door speaks it: Limiter without the
// key, httplimit and grpclimit through KeyedLimiter (Take, Peek, Refund),
// redislimit in Redis.
//
// # Choosing a rule
//
//	rule             most admitted in any window of W       state words per key
//	GCRA             B at once, then the rate: B + W/T       8 B
//	FixedWindow      N per window; 2N across a boundary      8 B
//	AnchoredWindow   N per window from the key's first       8 B
//	                 request; 2N across a boundary
//	SlidingCounter   N per fixed window; 2N−1 rolling        8 B
//	SlidingLog       N in every rolling W, exactly           8·(N + 1) B
//	Rolling          Q in every run of W/P aligned slices    8·(W/P + 1) B
//	Bands            every band's own bound                  the bands' sum
//
// What each costs in ns per decision and bytes per key, beside the other Go
// limiters, is in bench/BENCHMARKS.md, with the commands that measured it.
//
// # Time
//
// Times are nanoseconds since the limiter's epoch on the monotonic clock by
// default, so wall-clock steps change nothing; WithClock injects a clock
// (ManualClock for tests), WithCoarseClock a cheaper cached one. A stale or
// backward time can only make a decision stricter: no state ever moves
// back, but for a give-back, which gives back no more than the admission
// took as long as the clock it reads does not go back (see Keyed.Refund).
package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

type (
	// Limit is a rate: a count per period (see gcra.Limit).
	Limit = gcra.Limit
	// Decision is the whole outcome of one request (see gcra.Decision).
	Decision = gcra.Decision
)

// NewKeyed returns a limiter that gives every key a GCRA bucket of limit and
// burst. It is shorthand for NewKeyedRule(GCRA(limit, burst), opts...).
func NewKeyed[K comparable](limit Limit, burst int, opts ...Option) (*Keyed[K], error) {
	return NewKeyedRule[K](GCRA(limit, burst), opts...)
}

// New returns a single-key GCRA limiter. It is shorthand for
// NewRule(GCRA(limit, burst), opts...).
func New(limit Limit, burst int, opts ...Option) (*Limiter, error) {
	return NewRule(GCRA(limit, burst), opts...)
}

// Per returns n events per period.
func Per(n int, period time.Duration) Limit { return gcra.Per(n, period) }

// PerSecond returns n events per second.
func PerSecond(n int) Limit { return gcra.Per(n, time.Second) }

// PerMinute returns n events per minute.
func PerMinute(n int) Limit { return gcra.Per(n, time.Minute) }

// PerHour returns n events per hour.
func PerHour(n int) Limit { return gcra.Per(n, time.Hour) }

// PerDay returns n events per 24 hours.
func PerDay(n int) Limit { return gcra.Per(n, 24*time.Hour) }

// Every returns one event per d.
func Every(d time.Duration) Limit { return gcra.Every(d) }

var (
	// Unlimited admits every request and stores nothing.
	Unlimited = gcra.Unlimited
	// DenyAll admits nothing.
	DenyAll = gcra.DenyAll
)

// Never is the RetryAfter of a request that can never be admitted (n above
// the burst or the window's count, or DenyAll).
const Never = gcra.Never
