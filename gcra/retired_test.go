package gcra

import (
	"math"
	"testing"
	"time"
)

// TestRetiredDeniesEverything checks the two facts Retired rests on: every
// finite limit denies every request against it without storing, from any
// time the clock can report, and no admitted state ever reaches it.
func TestRetiredDeniesEverything(t *testing.T) {
	limits := []struct {
		limit Limit
		burst int
	}{
		{Every(time.Nanosecond), 1},
		{Every(time.Nanosecond), 1 << 30},
		{PerSecond(10), 1},
		{PerSecond(10), 100},
		{Every(MaxSpan), 1},
		{Every(time.Hour), int(maxSpan / int64(time.Hour))},
		{DenyAll, 0},
	}
	nows := []int64{0, 1, int64(time.Hour), maxNow - 1, maxNow}
	for _, lb := range limits {
		p, err := NewParams(lb.limit, lb.burst)
		if err != nil {
			t.Fatal(err)
		}
		for _, now := range nows {
			// n = 0 is a peek, admitted and storing nothing: checked below.
			if next, ok := p.Admit(Retired, now, 0); !ok || next != Retired {
				t.Errorf("%v burst %d: Admit(Retired, %d, 0) = %d, %v; want Retired, true", lb.limit, lb.burst, now, next, ok)
			}
			for _, n := range []int{1, 2, max(lb.burst, 1), math.MaxInt} {
				if next, ok := p.Admit(Retired, now, n); ok || next != Retired {
					t.Errorf("%v burst %d: Admit(Retired, %d, %d) = %d, %v; want Retired, false", lb.limit, lb.burst, now, n, next, ok)
				}
				if next, _, ok := p.Reserve(Retired, now, n, math.MaxInt64); ok || next != Retired {
					t.Errorf("%v burst %d: Reserve(Retired, %d, %d, max) = %d, %v; want Retired, false", lb.limit, lb.burst, now, n, next, ok)
				}
				if next, d := p.Decide(Retired, now, n); d.Allowed || next != Retired || d.Remaining != 0 {
					t.Errorf("%v burst %d: Decide(Retired, %d, %d) = %d, %+v", lb.limit, lb.burst, now, n, next, d)
				}
			}
			if _, ok := p.Refund(Retired, now, Retired-p.interval, 1); ok {
				t.Errorf("%v: Refund against Retired refunded", lb.limit)
			}
		}
		// The largest state an admission can store stays below Retired.
		if _, wait, ok := p.Reserve(0, maxNow, 1, math.MaxInt64); ok {
			if top := maxNow + wait + p.span; top >= Retired {
				t.Errorf("%v: a reservation can store %d ≥ Retired", lb.limit, top)
			}
		}
	}
	if Retired <= maxNow+maxSpan+maxWait || Retired > math.MaxInt64-maxSpan {
		t.Fatalf("Retired = %d is outside (MaxNow+MaxSpan+MaxWait, MaxInt64−MaxSpan]", Retired)
	}
	if !IsRetired(Retired) || IsRetired(0) || IsRetired(maxNow+maxSpan+maxWait) {
		t.Fatal("IsRetired misclassifies")
	}
}
