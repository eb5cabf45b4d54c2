package algo

import (
	"fmt"
	"strings"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A Spec names an algorithm and its parameters, as the user states them;
// the limiters validate it against their clock (a window's boundaries
// depend on the limiter's epoch) and build its Algorithm. The zero Spec is
// invalid.
type Spec struct {
	Kind     SpecKind
	Limit    gcra.Limit    // GCRA
	Burst    int           // GCRA
	N        int           // the windows' count, the rolling window's quota
	Period   time.Duration // the window
	Slice    time.Duration // Rolling: the slice length
	PerSlice int           // Rolling: the cap per slice (0: none)
	UTC      bool          // FixedUTC
	Offset   time.Duration // FixedUTC
	Bands    []Spec        // Bands
}

// SpecKind says which algorithm a Spec names.
type SpecKind uint8

// The kinds of Spec.
const (
	KindInvalid SpecKind = iota
	KindGCRA
	KindFixed
	KindAnchored
	KindCounter
	KindLog
	KindRolling
	KindBands
)

// String describes the spec as the user wrote it, e.g. "20/s, burst 5",
// "100/h fixed window", "60/min sliding log", "10000/d rolling by 1h",
// "20/s, burst 20 and 1000/h fixed window".
func (s Spec) String() string {
	switch s.Kind {
	case KindGCRA:
		return DescribeGCRA(s.Limit, s.Burst)
	case KindFixed:
		if s.UTC {
			if s.Offset == 0 {
				return DescribeWindow(s.N, s.Period, "fixed window, UTC")
			}
			return DescribeWindow(s.N, s.Period, "fixed window, UTC+"+Period(s.Offset))
		}
		return DescribeWindow(s.N, s.Period, "fixed window")
	case KindAnchored:
		return DescribeWindow(s.N, s.Period, "anchored window")
	case KindCounter:
		return DescribeWindow(s.N, s.Period, "sliding counter")
	case KindLog:
		return DescribeWindow(s.N, s.Period, "sliding log")
	case KindRolling:
		return DescribeRolling(s.N, s.Period, s.Slice, s.PerSlice)
	case KindBands:
		parts := make([]string, len(s.Bands))
		for i, b := range s.Bands {
			parts[i] = b.String()
		}
		return strings.Join(parts, " and ")
	}
	return "invalid"
}

// DescribeGCRA describes a token bucket, e.g. "20/s, burst 5".
func DescribeGCRA(l gcra.Limit, burst int) string {
	switch l {
	case gcra.Unlimited, gcra.DenyAll:
		return l.String()
	}
	return fmt.Sprintf("%v, burst %d", l, burst)
}

// DescribeWindow describes n per window of length period, e.g.
// "100/h fixed window".
func DescribeWindow(n int, period time.Duration, kind string) string {
	return fmt.Sprintf("%d/%s %s", n, Period(period), kind)
}

// DescribeRolling describes a rolling window, e.g. "10000/d rolling by 1h,
// at most 1000 per slice".
func DescribeRolling(q int, window, slice time.Duration, perSlice int) string {
	s := DescribeWindow(q, window, "rolling by "+Period(slice))
	if perSlice > 0 {
		s += fmt.Sprintf(", at most %d per slice", perSlice)
	}
	return s
}

// Period writes a period as a rate's unit: "s", "min", "h" or "d" for one
// of them, else the shortest duration ("2s", "15m", "1h30m").
func Period(d time.Duration) string { return gcra.Per(1, d).String()[2:] }

// SpecOf returns the spec of an atomiclimit.Rule (false for anything else),
// for the remote limiters of the nested modules. Package atomiclimit sets it
// when it is initialised; the Spec's Bands, if any, is the rule's own slice:
// read it, do not modify it.
var SpecOf func(rule any) (Spec, bool)
