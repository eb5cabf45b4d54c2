package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/internal/core"
)

// GCRA is a token bucket, as the generic cell rate algorithm: limit's rate,
// and up to burst at once from a full bucket (burst 1: no burst, a hard
// limit). Reserve and Wait pace it.
func GCRA(limit Limit, burst int) Rule { return core.GCRA(limit, burst) }

// FixedWindow is at most n per window of length period, the whole quota back
// at each boundary (interval refill). The windows start when the limiter is
// created; every key shares them.
func FixedWindow(n int, period time.Duration) Rule { return core.FixedWindow(n, period) }

// FixedWindowUTC is FixedWindow with the windows starting at
// 1970-01-01T00:00:00Z + offset + k·period: a 24h period with offset 0 gives
// days starting at 00:00 UTC; 1970-01-01 was a Thursday, so weeks starting
// on Monday take offset 4·24h. Boundaries are placed once, from the wall
// clock at the limiter's epoch, and then follow the monotonic clock.
func FixedWindowUTC(n int, period, offset time.Duration) Rule {
	return core.FixedWindowUTC(n, period, offset)
}

// AnchoredWindow is at most n per window of length period, where each key's
// window opens at its first admitted request and the whole quota comes back
// period later (a hard limit per key). The window's end is kept to a
// resolution of 2^(bits.Len(n)−2) ns at most, rounded up (32 ns for n up to
// 127, 16 µs below 65,536): stricter, never looser. A tier of such a limiter
// may change n only within the same power of two (the resolution depends on
// it: ErrIncompatible otherwise).
func AnchoredWindow(n int, period time.Duration) Rule { return core.AnchoredWindow(n, period) }

// SlidingCounter is about n per rolling window of length period, estimated
// from the counts of two fixed windows: one word per key, at most 2n−1 in a
// rolling window in the worst case.
func SlidingCounter(n int, period time.Duration) Rule { return core.SlidingCounter(n, period) }

// SlidingLog is at most n in every rolling window of length period, exactly,
// under any interleaving; each key costs a ring of n words, and a request
// takes one event.
func SlidingLog(n int, period time.Duration) Rule { return core.SlidingLog(n, period) }

// Rolling is at most q in every rolling window of length window, counted in
// slices of length slice ("10,000 per rolling 24 hours, recalculated every
// hour"): exact at slice granularity, with window/slice + 1 words per key.
// With perSlice > 0, at most perSlice in any one slice as well ("and at most
// 1,000 per hour").
func Rolling(q int, window, slice time.Duration, perSlice int) Rule {
	return core.Rolling(q, window, slice, perSlice)
}

// Bands holds each key to every rule at once (60 per minute and 10,000 per
// rolling day): a request is admitted only if every band admits it, and
// taken from all of them. A SlidingLog band must be the last.
func Bands(rules ...Rule) Rule { return core.Bands(rules...) }
