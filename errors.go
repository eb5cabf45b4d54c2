package atomiclimit

import (
	"errors"

	"github.com/atomiclimit/atomiclimit/gcra"
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
	// band, or put a SlidingLog band anywhere but last; a band's own error
	// is wrapped too.
	ErrInvalidRule = errors.New("atomiclimit: invalid rule")
	// ErrIncompatible: a rule that would replace another on states the
	// other wrote but reads them differently: a tier's or a key's rule of
	// another algorithm or window than the limiter's (a tier or a key may
	// change a window's count, not its length).
	ErrIncompatible = errors.New("atomiclimit: rule incompatible with the limiter's")
	// ErrOption: a keyed option given to a single-key limiter, an option
	// with a value that makes no sense (a negative key bound, an unknown
	// FullPolicy), or the coarse clock with a GCRA rule whose
	// (burst−1)·interval is shorter than its tick: the bucket would hold
	// less than a tick of tokens, and most admissions would pay a precise
	// clock read (see WithCoarseClock).
	ErrOption = errors.New("atomiclimit: invalid option")
	// ErrInvalidN: Reserve or Wait for n < 0 tokens.
	ErrInvalidN = gcra.ErrInvalidN
	// ErrExceedsBurst: Reserve or Wait for more than the burst: never
	// admitted.
	ErrExceedsBurst = gcra.ErrExceedsBurst
	// ErrDeadline: Wait's tokens would come after the context's deadline
	// (Stack.Wait: or after its own deadline); it consumed nothing.
	ErrDeadline = errors.New("atomiclimit: wait would exceed the deadline")
	// ErrTooManyKeys: Take, Reserve or Wait for a new key that a full
	// limiter with RejectNew refuses (Take returns the refusal's decision,
	// whose RetryAfter is when the limiter may have room): the limiter's
	// capacity, not the key's quota. A door answers it 503 Service
	// Unavailable, gRPC Unavailable.
	ErrTooManyKeys = errors.New("atomiclimit: too many keys")
	// ErrFallback is wrapped by the error of a limiter that could not
	// decide on a key's own state but had another limiter decide instead (a
	// remote limiter's local fallback during an outage), beside the cause
	// (redislimit.ErrUnavailable): the decision is that limiter's, on a
	// state of its own. A door reports the error and takes the decision, of
	// Take and of Peek alike, as the policy's: a denial is the policy's 429
	// (ResourceExhausted), with the fallback's wait, not a 503; an
	// admission is served, and heard as Allowed. A fallback that was full
	// (the error wraps ErrTooManyKeys too) refused the key as any full
	// limiter does: 503.
	ErrFallback = errors.New("atomiclimit: decided by a fallback limiter")
)
