package window

import iw "github.com/atomiclimit/atomiclimit/internal/window"

// Configuration errors, returned (wrapped with details) by the
// constructors. Each is also a kind of gcra.ErrInvalidLimit (and
// ErrOverflow of gcra.ErrOverflow too), as the errors of atomiclimit's
// window rules are.
var (
	// ErrInvalidLimit: a count below 1.
	ErrInvalidLimit = iw.ErrInvalidLimit
	// ErrInvalidPeriod: a window or slice length ≤ 0 or longer than
	// gcra.MaxSpan.
	ErrInvalidPeriod = iw.ErrInvalidPeriod
	// ErrOverflow: a count that needs so many bits of the state word that
	// the window index beside it would wrap within gcra.MaxNow.
	ErrOverflow = iw.ErrOverflow
)
