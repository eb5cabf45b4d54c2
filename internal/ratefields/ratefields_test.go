package ratefields

import (
	"math"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/door"
)

func TestAdvertise(t *testing.T) {
	for _, tc := range []struct {
		limit  int
		window time.Duration
		q      int
		w      int64
	}{
		{60, time.Minute, 60, 60},                              // whole seconds: as it is
		{1, time.Millisecond, 1000, 1},                         // 1000/s, burst 1: the rate, not q=1;w=1
		{3, 1500 * time.Millisecond, 4, 2},                     // ⌊3·2/1.5⌋ = 4
		{10, 0, 10, 1},                                         // no window
		{0, time.Second, 0, 1},                                 // DenyAll
		{math.MaxInt / 2, time.Nanosecond, sfInt(maxSFInt), 1}, // beyond any count, and beyond 15 digits: the largest sf-integer (the largest int on 32 bits)
	} {
		q, w := Advertise(atomiclimit.Quota{Limit: tc.limit, Window: tc.window})
		if q != tc.q || w != tc.w {
			t.Errorf("Advertise(%d per %v) = q=%d w=%d, want q=%d w=%d", tc.limit, tc.window, q, w, tc.q, tc.w)
		}
	}
}

func TestRetryAfterAndCeil(t *testing.T) {
	for _, tc := range []struct {
		retry, token time.Duration
		want         int64
	}{
		{time.Second, 0, 1},
		{time.Second + 1, 0, 2},
		{1, 0, 1},
		{0, 0, 1}, // a denial waits at least a second
		{time.Second, 3 * time.Second, 3},
		{gcra.Never, gcra.Never, -1},
	} {
		if got := RetryAfter(gcra.Decision{RetryAfter: tc.retry, TokenAfter: tc.token}); got != tc.want {
			t.Errorf("RetryAfter(%v, %v) = %d, want %d", tc.retry, tc.token, got, tc.want)
		}
	}
}

// The fields of two policies, one admitted with a precomputed r and one at
// r = 0 with its t; the lone common admission allocates nothing.
func TestValues(t *testing.T) {
	a := NewFields(atomiclimit.Quota{Limit: 10, Window: 10 * time.Second}, "a", "")
	b := NewFields(atomiclimit.Quota{Limit: 2, Window: time.Minute}, `b"q`, "requests")
	out := []door.Outcome{
		{Kind: door.Admitted, D: gcra.Decision{Allowed: true, Remaining: 7}},
		{Kind: door.Violated, D: gcra.Decision{RetryAfter: 1500 * time.Millisecond, TokenAfter: 1500 * time.Millisecond}},
	}
	fs := []*Fields{a, b}
	policies, items, least, leastR := Count(out, fs, 1)
	if policies != 2 || items != 2 || least != 1 || leastR != 0 {
		t.Fatalf("Count = %d %d %d %d", policies, items, least, leastR)
	}
	if got, want := RateLimitValue(out, fs, 1, items, nil), `"a";r=7, "b\"q";r=0;t=2`; got != want {
		t.Errorf("RateLimit = %s, want %s", got, want)
	}
	var jn Joined
	want := `"a";q=10;w=10, "b\"q";q=2;w=60;qu="requests"`
	if got := jn.PolicyValue(fs, policies, nil); got != want {
		t.Errorf("RateLimit-Policy = %s, want %s", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { jn.PolicyValue(fs, policies, nil) }); n != 0 {
		t.Errorf("a kept RateLimit-Policy: %v allocs", n)
	}
	if got := RateLimitValue(out, fs, 1, items, []byte{1, 2}); got != `"a";r=7;pk=:AQI=:, "b\"q";r=0;t=2;pk=:AQI=:` {
		t.Errorf("with pk: %s", got)
	}
	one, ofs := out[:1], fs[:1]
	if n := testing.AllocsPerRun(100, func() { RateLimitValue(one, ofs, 1, 1, nil) }); n != 0 {
		t.Errorf("the common admission: %v allocs, want 0", n)
	}
	if !ValidString("ok \"name\"") || ValidString("é") || ValidString("a\nb") {
		t.Error("ValidString")
	}
}

// A Cache builds each quota's fields once, keeps up to MaxQuotas of them,
// and builds the others per call.
func TestCache(t *testing.T) {
	var c Cache
	c.Init("p", "")
	q := func(n int) atomiclimit.Quota { return atomiclimit.Quota{Limit: n, Window: time.Second} }
	f1 := c.For(q(1))
	if c.For(q(2)) == f1 || c.For(q(1)) != f1 {
		t.Fatal("a quota's fields are not kept")
	}
	for n := 3; n < MaxQuotas+5; n++ {
		if f := c.For(q(n)); f.Quota != q(n) {
			t.Fatalf("fields of %v for %v", f.Quota, q(n))
		}
	}
	if c.For(q(1)) != f1 {
		t.Error("a kept quota was rebuilt")
	}
	if f := c.For(q(MaxQuotas + 4)); f != c.For(q(MaxQuotas+4)) {
		// The last one used is the fast path's, even when not kept.
		t.Error("the last quota used is not reused")
	}
	if f := NewFields(atomiclimit.Quota{Limit: math.MaxInt}, "u", ""); f.Limited {
		t.Error("Unlimited has fields")
	}
}
