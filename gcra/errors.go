package gcra

import "errors"

// Configuration errors, returned (wrapped with details) by NewParams and the
// limiters' constructors. Match them with errors.Is. ErrInvalidLimit
// matches every one of them: ErrRateTooHigh, ErrInvalidBurst and
// ErrOverflow each say more precisely why the limit cannot be enforced as
// stated.
var (
	// ErrInvalidLimit: the zero Limit, a count or period ≤ 0, or a rate that
	// is NaN, infinite or ≤ 0; and every error below.
	ErrInvalidLimit = errors.New("gcra: invalid limit")
	// ErrRateTooHigh: faster than one event per nanosecond. The emission
	// interval is an integer number of nanoseconds; rounding such a rate would
	// silently turn it into a different limit.
	ErrRateTooHigh error = kindOf("gcra: rate faster than one event per nanosecond", ErrInvalidLimit)
	// ErrInvalidBurst: a burst < 1.
	ErrInvalidBurst error = kindOf("gcra: invalid burst", ErrInvalidLimit)
	// ErrOverflow: burst × interval exceeds MaxSpan (about 73 years).
	ErrOverflow error = kindOf("gcra: burst × interval overflows", ErrInvalidLimit)
)

// kindOf returns a sentinel error with message msg that errors.Is also
// matches to parent: a more precise kind of parent.
func kindOf(msg string, parent error) error { return &kind{msg, parent} }

type kind struct {
	msg    string
	parent error
}

func (e *kind) Error() string        { return e.msg }
func (e *kind) Is(target error) bool { return target == e.parent }

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
