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

// String describes the spec as configured, e.g. "gcra 100/1s burst 10",
// "log 100/1m0s", "bands(gcra 20/1s burst 20, fixed 1000/1h0m0s)".
func (s Spec) String() string {
	switch s.Kind {
	case KindGCRA:
		return fmt.Sprintf("gcra %v burst %d", s.Limit, s.Burst)
	case KindFixed:
		if s.UTC {
			return fmt.Sprintf("fixed %d/%v utc+%v", s.N, s.Period, s.Offset)
		}
		return fmt.Sprintf("fixed %d/%v", s.N, s.Period)
	case KindAnchored:
		return fmt.Sprintf("anchored %d/%v", s.N, s.Period)
	case KindCounter:
		return fmt.Sprintf("counter %d/%v", s.N, s.Period)
	case KindLog:
		return fmt.Sprintf("log %d/%v", s.N, s.Period)
	case KindRolling:
		if s.PerSlice > 0 {
			return fmt.Sprintf("rolling %d/%v by %v, %d per slice", s.N, s.Period, s.Slice, s.PerSlice)
		}
		return fmt.Sprintf("rolling %d/%v by %v", s.N, s.Period, s.Slice)
	case KindBands:
		parts := make([]string, len(s.Bands))
		for i, b := range s.Bands {
			parts[i] = b.String()
		}
		return "bands(" + strings.Join(parts, ", ") + ")"
	}
	return "invalid"
}
