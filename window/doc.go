// Package window has the window algorithms: fixed window (with interval
// refill and UTC-aligned periods), sliding-window counter and exact sliding
// log. Each has pure decision functions on its state (FixedParams,
// CounterParams, LogParams: no atomics, no clock, table- and fuzz-tested
// against plain reference models), an atomic cell (FixedCell, CounterCell,
// LogRing) and a single-key limiter with atomicbucket's vocabulary (Fixed,
// Counter, Log: Allow, AllowN, Decide, DecideAt, Peek, PeekAt; WithClock,
// WithCoarseClock). Decisions are gcra.Decision values, so the window
// limiters report Remaining, RetryAfter, ResetAfter and TokenAfter as the
// GCRA ones do. Several limits on one key: package bands.
//
// # Choosing
//
//	algorithm     state per key   most admitted in any     burst                          ns/decision, serial allow
//	                              rolling window of W                                     (explicit time / monotonic)
//	GCRA          8 B             B + W/T                  B at once, then the rate       see atomicbucket
//	Fixed         8 B             2N (N per window,        the whole quota at each        14 / 41
//	                              N each side of a         boundary, nothing carried
//	                              boundary)                over (interval refill)
//	Counter       8 B             2N − 1 (N per fixed      up to N at once after an idle  33 / 64
//	                              window)                  window, less after a busy one
//	Log           8·N B + 64 B    N, exactly               up to N at once after W idle   21 / 45
//
// The nanoseconds are medians of -count=5 on a shared, noisy 2-vCPU
// virtual machine (Go 1.26, amd64), measured with
//
//	go test ./window -run='^$' -bench=. -count=5
//
// and are comparable with each other, not across machines. Every hot path
// allocates nothing (tests assert testing.AllocsPerRun == 0) and a denial
// writes nothing.
//
// # Time
//
// Times are nanoseconds since the limiter's epoch on the monotonic clock by
// default (internal/timebase, shared with atomicbucket), so wall-clock steps
// change nothing, except where AlignUTC asks for wall-clock boundaries (see
// Align.Start for how they are derived from the monotonic base). A stale or
// backward now, from a caller preempted between reading the clock and
// deciding, can only make a decision stricter, and no state ever moves back
// in time.
//
// # Limits on counts
//
// The fixed window and the counter pack a window index beside their counts
// in one 64-bit word; the constructors reject a limit whose index could wrap
// within the 73 years the time base covers (ErrOverflow). Fixed: N < 2^32
// for windows of 1 s or more. Counter (two counts): N < 2^16 per second,
// < 2^19 per minute, < 2^22 per hour, < 2^24 per day. Log: N ≤ MaxLogLimit.
//
// # Not here
//
// Keyed forms (one limiter per key on a shared map, with idle eviction) are
// not part of this package yet. Calendar months (periods of varying length)
// are not provided by AlignUTC. The log admits one event per call.
package window
