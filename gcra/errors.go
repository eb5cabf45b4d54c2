package gcra

import "errors"

// Configuration errors, returned (wrapped with details) by NewParams and the
// limiters' constructors. Match them with errors.Is.
var (
	// ErrInvalidLimit: the zero Limit, a count or period ≤ 0, or a rate that
	// is NaN, infinite or ≤ 0.
	ErrInvalidLimit = errors.New("gcra: invalid limit")
	// ErrRateTooHigh: faster than one event per nanosecond. The emission
	// interval is an integer number of nanoseconds; rounding such a rate would
	// silently turn it into a different limit.
	ErrRateTooHigh = errors.New("gcra: rate faster than one event per nanosecond")
	// ErrInvalidBurst: a burst < 1.
	ErrInvalidBurst = errors.New("gcra: invalid burst")
	// ErrOverflow: burst × interval exceeds MaxSpan (about 73 years).
	ErrOverflow = errors.New("gcra: burst × interval overflows")
)

// Request errors, returned by the calls that return errors (Reserve, Wait).
// The boolean calls (Allow, AllowN) report the same cases as a denial whose
// RetryAfter is Never.
var (
	// ErrInvalidN: a request for n < 0 tokens. (n = 0 is a peek, admitted.)
	ErrInvalidN = errors.New("gcra: n must be at least 0")
	// ErrExceedsBurst: n is larger than the burst (or the limit is DenyAll),
	// so the request can never be admitted.
	ErrExceedsBurst = errors.New("gcra: n exceeds burst, never admitted")
)
