package window

import (
	"fmt"
	"time"
)

// An Align places the boundaries of fixed windows.
//
// The zero Align, AlignStart, starts the first window when the limiter is
// created, and a new one every period after that: interval refill, counted
// from creation. AlignUTC starts windows at fixed instants of UTC instead:
// AlignUTC(0) with a 24h period gives days starting at 00:00 UTC, with a 1h
// period hours on the hour.
type Align struct {
	utc    bool
	offset time.Duration
}

// AlignStart starts the windows at the limiter's creation.
var AlignStart = Align{}

// AlignUTC starts the windows at 1970-01-01T00:00:00Z + offset + k·period,
// for every integer k: calendar-aligned periods of fixed length in UTC. UTC
// days are 86 400 s long for this purpose (Unix time ignores leap seconds),
// so a 24h period with offset 0 starts every window at 00:00 UTC. 1970-01-01
// was a Thursday: weeks starting on Monday 00:00 UTC take offset 4·24h.
// Calendar months and years, whose length varies, are not provided.
func AlignUTC(offset time.Duration) Align { return Align{utc: true, offset: offset} }

// String describes the alignment, e.g. "start", "utc+4h0m0s".
func (a Align) String() string {
	if !a.utc {
		return "start"
	}
	return fmt.Sprintf("utc+%v", a.offset)
}

// Start returns the start of the window that contains now, on a time base
// of nanoseconds since epoch. For AlignStart that is now itself (the window
// opens at creation); for AlignUTC it is the latest boundary at or before
// now, possibly before the epoch (but never more than one period before).
//
// How the UTC boundaries are found on a monotonic time base: epoch is a
// time.Time that carries both a wall-clock and a monotonic reading (the
// process epoch of the default clock, or an injected clock's first reading).
// The wall-clock instant of the time base's t is epoch's wall reading + t,
// and the boundaries are computed on that. The wall clock is read once, at
// the epoch: a later step of the system clock (NTP, an operator) does not
// move the boundaries, which then stay where the wall clock at the epoch put
// them, in step with elapsed (monotonic) time.
func (a Align) Start(epoch time.Time, now int64, period time.Duration) int64 {
	if !a.utc || period <= 0 {
		return now
	}
	w := int64(period)
	wall := epoch.UnixNano() + now - int64(a.offset)%w // < 2^63: both < 2^61
	r := wall % w
	if r < 0 {
		r += w
	}
	return now - r
}
