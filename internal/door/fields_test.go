package door

import (
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/ratefields"
)

// The fields of two policies, one admitted with a precomputed r and one at
// r = 0 with its t; the lone common admission allocates nothing, nor does a
// RateLimit-Policy value already joined.
func TestValues(t *testing.T) {
	a := ratefields.NewFields(atomiclimit.Quota{Limit: 10, Window: 10 * time.Second}, "a", "")
	b := ratefields.NewFields(atomiclimit.Quota{Limit: 2, Window: time.Minute}, `b"q`, "requests")
	out := []Outcome{
		{Kind: Admitted, D: gcra.Decision{Allowed: true, Remaining: 7}},
		{Kind: Violated, D: gcra.Decision{RetryAfter: 1500 * time.Millisecond, TokenAfter: 1500 * time.Millisecond}},
	}
	fs := []*ratefields.Fields{a, b}
	policies, items, least, leastR := Count(out, fs, 1)
	if policies != 2 || items != 2 || least != 1 || leastR != 0 {
		t.Fatalf("Count = %d %d %d %d", policies, items, least, leastR)
	}
	if got, want := RateLimitValue(out, fs, 1, items, nil), `"a";r=7, "b\"q";r=0;t=2`; got != want {
		t.Errorf("RateLimit = %s, want %s", got, want)
	}
	var s Stack[string]
	want := `"a";q=10;w=10, "b\"q";q=2;w=60;qu="requests"`
	if got := s.PolicyValue(fs, policies, nil); got != want {
		t.Errorf("RateLimit-Policy = %s, want %s", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { s.PolicyValue(fs, policies, nil) }); n != 0 {
		t.Errorf("a kept RateLimit-Policy: %v allocs", n)
	}
	if got := RateLimitValue(out, fs, 1, items, []byte{1, 2}); got != `"a";r=7;pk=:AQI=:, "b\"q";r=0;t=2;pk=:AQI=:` {
		t.Errorf("with pk: %s", got)
	}
	one, ofs := out[:1], fs[:1]
	if n := testing.AllocsPerRun(100, func() { RateLimitValue(one, ofs, 1, 1, nil) }); n != 0 {
		t.Errorf("the common admission: %v allocs, want 0", n)
	}
	// Outside the precomputed items (r = 200): built, and right.
	big := ratefields.NewFields(atomiclimit.Quota{Limit: 500, Window: time.Second}, "big", "")
	if got := RateLimitValue([]Outcome{{Kind: Admitted, D: gcra.Decision{Remaining: 200}}}, []*ratefields.Fields{big}, 1, 1, nil); got != `"big";r=200` {
		t.Errorf("r = 200: %s", got)
	}
}
