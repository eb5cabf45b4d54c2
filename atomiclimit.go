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
//
// # Clocks that jump
//
// Each rule bounds how long after a decision its state becomes idle: B·T
// for GCRA (plus the wait of a reservation), a window, two for the sliding
// counter. A limiter's reach is twice the longest of those over every rule
// it has held, or B·T + the longest wait it granted a reservation, if
// longer. A state idle more than reach after the limiter's clock cannot
// come from a decision at any time the clock has read: it came from a time
// stamped in the future (AllowN at a time years ahead) or from a clock that
// went back (WithClock). Such a state would deny its key until the clock
// caught up, and keep it from being removed as idle. Instead, a request at
// a time within reach of the clock that meets it, or a sweep, starts the
// key again as a new key (Stats counts it in EvictedActive); the floors new
// keys start from are not raised to it. Within reach, a stale or backward
// time is decided as above, stricter, never looser. A caller that stamps
// its own times more than reach ahead of the clock (a simulation over a
// clock it never reads) is decided as it says, and forgets nothing. A
// clock that goes back to before the limiter was created reads as its
// creation time (times before the epoch count as the epoch) until it has
// passed it again: meanwhile no state refills.
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
