package window

import (
	"github.com/atomiclimit/atomiclimit/gcra"
)

// Configuration errors, returned (wrapped with details) by the parameter
// constructors. The hot-path functions never return errors and never panic:
// a request they can never admit is a denial whose RetryAfter is
// gcra.Never. ErrInvalidLimit and ErrOverflow are gcra's, so that one list
// of sentinels (re-exported by package atomiclimit) matches every
// algorithm's errors.
var (
	// ErrInvalidLimit: a count limit below 1.
	ErrInvalidLimit = gcra.ErrInvalidLimit
	// ErrInvalidPeriod: a window length ≤ 0 or longer than gcra.MaxSpan. It
	// is an ErrInvalidLimit too.
	ErrInvalidPeriod error = &periodError{}
	// ErrOverflow: the count limit needs so many bits of the packed state
	// word that the window index left beside it would wrap within the time
	// range the limiter accepts (gcra.MaxNow); or a sliding log longer than
	// MaxLogLimit slots.
	ErrOverflow = gcra.ErrOverflow
)

// periodError is ErrInvalidPeriod: a kind of gcra.ErrInvalidLimit.
type periodError struct{}

func (*periodError) Error() string        { return "atomiclimit: invalid window length" }
func (*periodError) Is(target error) bool { return target == gcra.ErrInvalidLimit }
