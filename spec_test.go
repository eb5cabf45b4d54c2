package atomiclimit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// algo.SpecOf hands back exactly what each constructor was given.
func TestSpecOf(t *testing.T) {
	g := algo.Spec{Kind: algo.KindGCRA, Limit: gcra.Per(10, time.Second), Burst: 3}
	fixed := algo.Spec{Kind: algo.KindFixed, N: 5, Period: time.Minute}
	utc := algo.Spec{Kind: algo.KindFixed, N: 7, Period: time.Hour, UTC: true, Offset: 15 * time.Minute}
	anchored := algo.Spec{Kind: algo.KindAnchored, N: 4, Period: time.Second}
	counter := algo.Spec{Kind: algo.KindCounter, N: 100, Period: time.Minute}
	log := algo.Spec{Kind: algo.KindLog, N: 60, Period: time.Minute}
	rolling := algo.Spec{Kind: algo.KindRolling, N: 1000, Period: 24 * time.Hour, Slice: time.Hour, PerSlice: 100}
	for _, c := range []struct {
		rule atomiclimit.Rule
		want algo.Spec
	}{
		{atomiclimit.GCRA(gcra.Per(10, time.Second), 3), g},
		{atomiclimit.FixedWindow(5, time.Minute), fixed},
		{atomiclimit.FixedWindowUTC(7, time.Hour, 15*time.Minute), utc},
		{atomiclimit.AnchoredWindow(4, time.Second), anchored},
		{atomiclimit.SlidingCounter(100, time.Minute), counter},
		{atomiclimit.SlidingLog(60, time.Minute), log},
		{atomiclimit.Rolling(1000, 24*time.Hour, time.Hour, 100), rolling},
		{atomiclimit.Bands(atomiclimit.GCRA(gcra.Per(10, time.Second), 3), atomiclimit.SlidingLog(60, time.Minute)),
			algo.Spec{Kind: algo.KindBands, Bands: []algo.Spec{g, log}}},
		{atomiclimit.Rule{}, algo.Spec{}},
	} {
		assert.Equal(t, c.want, specOf(c.rule), "%v", c.rule)
	}
}

func specOf(r atomiclimit.Rule) algo.Spec {
	s, _ := algo.SpecOf(r)
	return s
}
