package ratefields

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
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

// A quota's RateLimit items: built in advance for 1 ≤ r ≤ 128, appended
// otherwise, with t at r = 0 and pk when given.
func TestItems(t *testing.T) {
	a := NewFields(atomiclimit.Quota{Limit: 200, Window: 10 * time.Second}, `a"q`, "")
	for _, tc := range []struct {
		r  int
		ok bool
	}{{0, false}, {1, true}, {128, true}, {129, false}} {
		v, ok := a.Item(tc.r)
		if ok != tc.ok || ok && v != `"a\"q";r=`+strconv.Itoa(tc.r) {
			t.Errorf("Item(%d) = %q, %v", tc.r, v, ok)
		}
	}
	for _, tc := range []struct {
		r     int
		token time.Duration
		pk    []byte
		want  string
	}{
		{7, 0, nil, `"a\"q";r=7`},
		{0, 1500 * time.Millisecond, nil, `"a\"q";r=0;t=2`},
		{0, 0, nil, `"a\"q";r=0`},
		{0, gcra.Never, nil, `"a\"q";r=0`},
		{3, time.Second, []byte{1, 2}, `"a\"q";r=3;pk=:AQI=:`},
	} {
		if got := string(a.AppendItem([]byte("x"), tc.r, tc.token, tc.pk)); got != "x"+tc.want {
			t.Errorf("AppendItem(%d, %v, %v) = %s, want x%s", tc.r, tc.token, tc.pk, got, tc.want)
		}
	}
	b := NewFields(atomiclimit.Quota{Limit: 2, Window: time.Minute}, "b", "requests")
	if b.Policy != `"b";q=2;w=60;qu="requests"` || b.Limit != "2" {
		t.Errorf("policy item %s, limit %s", b.Policy, b.Limit)
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { a.AppendItem(buf, 0, time.Second, nil) }); n != 0 {
		t.Errorf("AppendItem: %v allocs, want 0", n)
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
