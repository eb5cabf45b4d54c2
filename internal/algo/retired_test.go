package algo

import (
	"github.com/atomiclimit/atomiclimit/gcra"
	"math"
	"testing"
	"time"
)

// TestRetiredDeniesEverything checks the two facts RetiredTAT rests on: every
// finite limit denies every request against it without storing, from any
// time the clock can report, and no admitted state ever reaches it.
// The bounds of gcra's arithmetic (gcra.MaxSpan, MaxNow, MaxWait) in ns.
const (
	maxSpan = int64(gcra.MaxSpan)
	maxNow  = int64(gcra.MaxNow)
	maxWait = int64(gcra.MaxWait)
)

func TestRetiredDeniesEverything(t *testing.T) {
	limits := []struct {
		limit gcra.Limit
		burst int
	}{
		{gcra.Every(time.Nanosecond), 1},
		{gcra.Every(time.Nanosecond), 1 << 30},
		{gcra.Per(10, time.Second), 1},
		{gcra.Per(10, time.Second), 100},
		{gcra.Every(gcra.MaxSpan), 1},
		{gcra.Every(time.Hour), int(maxSpan / int64(time.Hour))},
		{gcra.DenyAll, 0},
	}
	nows := []int64{0, 1, int64(time.Hour), maxNow - 1, maxNow}
	for _, lb := range limits {
		p, err := gcra.NewParams(lb.limit, lb.burst)
		if err != nil {
			t.Fatal(err)
		}
		for _, now := range nows {
			// n = 0 is a peek, admitted and storing nothing: checked below.
			if next, ok := p.Admit(RetiredTAT, now, 0); !ok || next != RetiredTAT {
				t.Errorf("%v burst %d: Admit(RetiredTAT, %d, 0) = %d, %v; want RetiredTAT, true", lb.limit, lb.burst, now, next, ok)
			}
			for _, n := range []int{1, 2, max(lb.burst, 1), math.MaxInt} {
				if next, ok := p.Admit(RetiredTAT, now, n); ok || next != RetiredTAT {
					t.Errorf("%v burst %d: Admit(RetiredTAT, %d, %d) = %d, %v; want RetiredTAT, false", lb.limit, lb.burst, now, n, next, ok)
				}
				if next, _, ok := p.Reserve(RetiredTAT, now, n, math.MaxInt64); ok || next != RetiredTAT {
					t.Errorf("%v burst %d: Reserve(RetiredTAT, %d, %d, max) = %d, %v; want RetiredTAT, false", lb.limit, lb.burst, now, n, next, ok)
				}
				if next, d := p.Decide(RetiredTAT, now, n); d.Allowed || next != RetiredTAT || d.Remaining != 0 {
					t.Errorf("%v burst %d: Decide(RetiredTAT, %d, %d) = %d, %+v", lb.limit, lb.burst, now, n, next, d)
				}
			}
			if _, _, ok := p.Refund(RetiredTAT, now, RetiredTAT, now, 1, gcra.Alone); ok {
				t.Errorf("%v: Refund against RetiredTAT gave back", lb.limit)
			}
		}
		// The largest state an admission can store stays below RetiredTAT.
		if _, wait, ok := p.Reserve(0, maxNow, 1, math.MaxInt64); ok {
			if top := maxNow + wait + int64(p.Span()); top >= RetiredTAT {
				t.Errorf("%v: a reservation can store %d ≥ RetiredTAT", lb.limit, top)
			}
		}
	}
	if RetiredTAT <= maxNow+maxSpan+maxWait || RetiredTAT > math.MaxInt64-maxSpan {
		t.Fatalf("RetiredTAT = %d is outside (MaxNow+MaxSpan+gcra.MaxWait, MaxInt64−gcra.MaxSpan]", RetiredTAT)
	}
}
