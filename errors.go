package atomiclimit

import (
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/core"
)

// The errors of this module, for errors.Is. The constructors and SetRule
// return configuration errors wrapped with details; the hot-path methods
// never return errors and never panic: a request they can never admit is a
// denial whose RetryAfter is Never.
var (
	// ErrInvalidLimit: a limit that cannot be enforced as stated: the zero
	// Limit, a rate, count, burst or window ≤ 0, NaN or infinite, a rate
	// faster than one event per nanosecond, or a limit that does not fit the
	// state (burst × interval beyond 73 years, a count too large for a
	// window's state word, a log beyond its largest ring). The message says
	// which; package gcra has a sentinel for each of its own.
	ErrInvalidLimit = gcra.ErrInvalidLimit
	// ErrInvalidRule: the zero Rule, or Bands that nest, hold an Unlimited
	// band, or put a SlidingLog band anywhere but last.
	ErrInvalidRule = core.ErrInvalidRule
	// ErrIncompatible: a tier's or a key's rule of another algorithm or
	// window than the limiter's.
	ErrIncompatible = core.ErrIncompatible
	// ErrCoarseTick: a GCRA rule whose (burst−1)·interval is shorter than
	// the coarse clock's tick (WithCoarseClock).
	ErrCoarseTick = core.ErrCoarseTick
	// ErrOption: a keyed option given to a single-key limiter, or an option
	// with a value that makes no sense (a negative key bound, an unknown
	// FullPolicy).
	ErrOption = core.ErrOption
	// ErrInvalidN: Reserve or Wait for n < 0 tokens.
	ErrInvalidN = gcra.ErrInvalidN
	// ErrExceedsBurst: Reserve or Wait for more than the burst: never
	// admitted.
	ErrExceedsBurst = gcra.ErrExceedsBurst
	// ErrDeadline: Wait's tokens would come after the context's deadline.
	ErrDeadline = core.ErrDeadline
	// ErrTooManyKeys: Take, Reserve or Wait for a new key that a full
	// limiter with RejectNew refuses: the limiter's capacity, not the key's
	// quota.
	ErrTooManyKeys = core.ErrTooManyKeys
	// ErrFallback: wrapped by the error of a limiter whose decision another
	// limiter made, on a state of its own (a remote limiter's local fallback
	// during an outage); a door takes the decision as the policy's.
	ErrFallback = core.ErrFallback
)
