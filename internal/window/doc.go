// Package window has the engines of the window algorithms: fixed window
// (with interval refill and UTC-aligned periods), sliding-window counter and
// exact sliding log. It holds no limiters and no options: the root package
// (atomiclimit.FixedWindow, FixedWindowUTC, SlidingCounter, SlidingLog) and
// internal/core build single-key and keyed limiters on these engines through
// the one algorithm contract (internal/algo; see rules.go: FixedAlgorithm,
// CounterAlgorithm, LogAlgorithm).
//
// Each algorithm has pure decision functions on its state (FixedParams,
// CounterParams, LogParams: no clock, no maps, table- and fuzz-tested
// against plain reference models) and an atomic cell (FixedCell,
// CounterCell; LogRing, a view on a state's words: its head and its N
// slots). Decisions are gcra.Decision values, so the window algorithms
// report Remaining, RetryAfter, ResetAfter and TokenAfter as GCRA does. The
// root package's doc compares the algorithms (most admitted in any window,
// state per key).
//
// What each one bounds, on the times the decisions are made at: the fixed
// window at most N per window, so 2N across a boundary; the sliding counter
// at most N per fixed window and 2N − 1 in any rolling window; the sliding
// log at most N in every rolling window, exactly (the proof is at
// LogParams, the lock-free protocol's at LogRing). A denial writes nothing
// on any cell.
//
// # Time
//
// Times are nanoseconds on the owner's time base (the limiter's epoch on the
// monotonic clock, internal/timebase), so wall-clock steps change nothing,
// except where AlignUTC asks for wall-clock boundaries (see Align.Start for
// how they are derived from the monotonic base). A stale or backward now,
// from a caller preempted between reading the clock and deciding, can only
// make a decision stricter, and no state ever moves back in time.
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
// Calendar months (periods of varying length) are not provided by AlignUTC.
// The log admits one event per request (n = 0 is a peek).
package window
