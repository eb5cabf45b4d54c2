package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// GCRA is the token bucket as GCRA: limit's rate, up to burst at once.
func GCRA(limit gcra.Limit, burst int) Rule {
	return Rule{algo.Spec{Kind: algo.KindGCRA, Limit: limit, Burst: burst}}
}

// FixedWindow is n per window of length period, the windows starting when
// the limiter is created.
func FixedWindow(n int, period time.Duration) Rule {
	return Rule{algo.Spec{Kind: algo.KindFixed, N: n, Period: period}}
}

// FixedWindowUTC is n per window of length period, the windows starting at
// 1970-01-01T00:00:00Z + offset + k·period.
func FixedWindowUTC(n int, period, offset time.Duration) Rule {
	return Rule{algo.Spec{Kind: algo.KindFixed, N: n, Period: period, UTC: true, Offset: offset}}
}

// AnchoredWindow is n per window of length period, each key's window
// opening at its first admitted request (see atomiclimit.AnchoredWindow).
func AnchoredWindow(n int, period time.Duration) Rule {
	return Rule{algo.Spec{Kind: algo.KindAnchored, N: n, Period: period}}
}

// SlidingCounter is about n per rolling window of length period, estimated
// from two fixed windows.
func SlidingCounter(n int, period time.Duration) Rule {
	return Rule{algo.Spec{Kind: algo.KindCounter, N: n, Period: period}}
}

// SlidingLog is exactly at most n per rolling window of length period.
func SlidingLog(n int, period time.Duration) Rule {
	return Rule{algo.Spec{Kind: algo.KindLog, N: n, Period: period}}
}

// Rolling is at most q per rolling window, counted in slices of length
// slice, and, when perSlice > 0, at most perSlice in any one slice.
func Rolling(q int, window, slice time.Duration, perSlice int) Rule {
	return Rule{algo.Spec{Kind: algo.KindRolling, N: q, Period: window, Slice: slice, PerSlice: perSlice}}
}

// Bands holds each key to every rule at once.
func Bands(rules ...Rule) Rule {
	specs := make([]algo.Spec, len(rules))
	for i, r := range rules {
		specs[i] = r.s
	}
	return Rule{algo.Spec{Kind: algo.KindBands, Bands: specs}}
}
