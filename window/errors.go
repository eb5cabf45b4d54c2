package window

import "errors"

// Configuration errors, returned (wrapped with details) by the constructors.
// Match them with errors.Is. The hot-path methods never return errors and
// never panic: a request they can never admit is a denial whose RetryAfter is
// gcra.Never.
var (
	// ErrInvalidLimit: a count limit below 1.
	ErrInvalidLimit = errors.New("window: invalid limit")
	// ErrInvalidPeriod: a window length ≤ 0 or longer than gcra.MaxSpan.
	ErrInvalidPeriod = errors.New("window: invalid window length")
	// ErrOverflow: the count limit needs so many bits of the packed state
	// word that the window index left beside it would wrap within the time
	// range the limiter accepts (gcra.MaxNow); or a sliding log longer than
	// MaxLogLimit slots.
	ErrOverflow = errors.New("window: limit does not fit the state word")
	// ErrOption: an option given to a limiter it does not apply to
	// (WithAlign applies only to fixed windows; WithMaxKeys,
	// WithSweepInterval and WithShards only to keyed limiters).
	ErrOption = errors.New("window: option does not apply")
	// ErrInvalidMaxKeys: a negative key bound or an unknown FullPolicy.
	ErrInvalidMaxKeys = errors.New("window: invalid key bound")
)
