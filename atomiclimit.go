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
// kept in slices, or several of them at once (Bands).
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
// Figures per algorithm (ns per decision, heap per key) are in the README
// and bench/BENCHMARKS.md, with the commands that measured them.
//
// # Time
//
// Every decision method has a form that takes the time (AllowN, DecideAt,
// PeekAt, SweepAt); the plain form is shorthand for it at the limiter's
// clock. Times are nanoseconds since the limiter's epoch on the monotonic
// clock by default, so wall-clock steps change nothing. A stale or backward
// time can only make a decision stricter: no state ever moves back.
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
func PerSecond(n int) Limit { return gcra.PerSecond(n) }

// PerMinute returns n events per minute.
func PerMinute(n int) Limit { return gcra.PerMinute(n) }

// PerHour returns n events per hour.
func PerHour(n int) Limit { return gcra.PerHour(n) }

// PerDay returns n events per 24 hours.
func PerDay(n int) Limit { return gcra.PerDay(n) }

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
