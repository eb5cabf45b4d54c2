package window

import "github.com/atomiclimit/atomiclimit/gcra"

// Configuration errors, returned (wrapped with details) by the parameter
// constructors. The hot-path functions never return errors and never panic:
// a request they can never admit is a denial whose RetryAfter is
// gcra.Never. Each is a kind of gcra.ErrInvalidLimit (and ErrOverflow of
// gcra.ErrOverflow too), so that the one list of sentinels package
// atomiclimit re-exports matches every algorithm's errors, while the
// messages speak of windows.
var (
	// ErrInvalidLimit: a count limit below 1.
	ErrInvalidLimit error = &kind{"atomiclimit: invalid count", nil}
	// ErrInvalidPeriod: a window or slice length ≤ 0 or longer than
	// gcra.MaxSpan.
	ErrInvalidPeriod error = &kind{"atomiclimit: invalid window length", nil}
	// ErrOverflow: the count limit needs so many bits of the packed state
	// word that the window index left beside it would wrap within the time
	// range the limiter accepts (gcra.MaxNow); or a sliding log longer than
	// MaxLogLimit slots.
	ErrOverflow error = &kind{"atomiclimit: count does not fit the state word", gcra.ErrOverflow}
)

// A kind is a sentinel error that errors.Is also matches to
// gcra.ErrInvalidLimit and, if set, to also.
type kind struct {
	msg  string
	also error
}

func (e *kind) Error() string { return e.msg }

func (e *kind) Is(target error) bool {
	return target == gcra.ErrInvalidLimit || (e.also != nil && target == e.also)
}
