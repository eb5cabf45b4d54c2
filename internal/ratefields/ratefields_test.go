package ratefields

import (
	"math"
	"strconv"
	"strings"
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

// The shared field values (issue 25): each is what it says, of capacity 1,
// so that an append copies it; the cached ones are the same slice each time.
func TestValues(t *testing.T) {
	f := NewFields(atomiclimit.Quota{Limit: 200, Window: 200 * time.Second}, "p", "")
	for _, tc := range []struct {
		r     int
		token time.Duration
		want  string
	}{
		{1, 0, `"p";r=1`},
		{128, 0, `"p";r=128`},
		{129, 0, `"p";r=129`},
		{199, 0, `"p";r=199`}, // a full bucket after one request: built in advance
		{0, 1500 * time.Millisecond, `"p";r=0;t=2`},
		{0, 17*time.Second + 1, `"p";r=0;t=18`}, // the same slot as t=2
		{0, 1500 * time.Millisecond, `"p";r=0;t=2`},
		{0, 0, `"p";r=0`},
		{0, gcra.Never, `"p";r=0`},
	} {
		v := f.Values(tc.r, tc.token)
		if len(v) != 1 || cap(v) != 1 || v[0] != tc.want {
			t.Errorf("Values(%d, %v) = %q (cap %d), want [%q]", tc.r, tc.token, v, cap(v), tc.want)
		}
	}
	if a, b := f.Values(199, 0), f.Values(199, 0); &a[0] != &b[0] {
		t.Error("a full bucket's value is built again")
	}
	if a, b := f.Values(0, time.Second), f.Values(0, time.Second); &a[0] != &b[0] {
		t.Error("a denial's value is built again")
	}
	for _, v := range []int64{-1, 0, 7, 99, 100, 3600, 3601, 1 << 40} {
		a, b := IntValue(v), IntValue(v)
		if len(a) != 1 || cap(a) != 1 || a[0] != strconv.FormatInt(v, 10) {
			t.Errorf("IntValue(%d) = %q", v, a)
		}
		if cached := v >= 0 && v <= maxInt; cached != (&a[0] == &b[0]) {
			t.Errorf("IntValue(%d): kept %v, want %v", v, !cached, cached)
		}
	}
	for _, s := range []string{"", "x", strings.Repeat("y", 48), strings.Repeat("z", 49)} {
		b := []byte(s)
		v := StringValue(b)
		clear(b)
		if len(v) != 1 || cap(v) != 1 || v[0] != s {
			t.Errorf("StringValue(%q) = %q", s, v)
		}
	}
	if n := testing.AllocsPerRun(100, func() { f.Values(5, 0); f.Values(0, time.Second); IntValue(3600) }); n != 0 {
		t.Errorf("kept values: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { f.Values(150, 0) }); n != 1 {
		t.Errorf("a value beyond the table: %v allocs, want 1", n)
	}
}
