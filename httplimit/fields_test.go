package httplimit

import (
	"errors"
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

func TestRetryAfterOfDecision(t *testing.T) {
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
		if got := retryAfter(gcra.Decision{RetryAfter: tc.retry, TokenAfter: tc.token}); got != tc.want {
			t.Errorf("retryAfter(%v, %v) = %d, want %d", tc.retry, tc.token, got, tc.want)
		}
	}
}

// A quota's RateLimit items: built in advance for 1 ≤ r ≤ 128, appended
// otherwise, with t at r = 0 and pk when given.
func TestItems(t *testing.T) {
	a := newFields(atomiclimit.Quota{Limit: 200, Window: 10 * time.Second}, `a"q`, "")
	for _, tc := range []struct {
		r  int
		ok bool
	}{{0, false}, {1, true}, {128, true}, {129, false}} {
		v, ok := a.kept(tc.r)
		if ok != tc.ok || ok && v != `"a\"q";r=`+strconv.Itoa(tc.r) {
			t.Errorf("kept(%d) = %q, %v", tc.r, v, ok)
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
		if got := string(a.appendItem([]byte("x"), tc.r, tc.token, tc.pk)); got != "x"+tc.want {
			t.Errorf("appendItem(%d, %v, %v) = %s, want x%s", tc.r, tc.token, tc.pk, got, tc.want)
		}
	}
	b := newFields(atomiclimit.Quota{Limit: 2, Window: time.Minute}, "b", "requests")
	if b.policy != `"b";q=2;w=60;qu="requests"` || b.limit != "2" {
		t.Errorf("policy item %s, limit %s", b.policy, b.limit)
	}
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() { a.appendItem(buf, 0, time.Second, nil) }); n != 0 {
		t.Errorf("appendItem: %v allocs, want 0", n)
	}
	if !validString("ok \"name\"") || validString("é") || validString("a\nb") {
		t.Error("validString")
	}
}

// A PolicyFields builds each quota's fields once, keeps up to maxQuotas of
// them, and builds the others per call.
func TestPolicyFieldsKeepsQuotas(t *testing.T) {
	c := newPolicyFields("p", "")
	q := func(n int) atomiclimit.Quota { return atomiclimit.Quota{Limit: n, Window: time.Second} }
	f1 := c.of(q(1))
	if c.of(q(2)) == f1 || c.of(q(1)) != f1 {
		t.Fatal("a quota's fields are not kept")
	}
	for n := 3; n < maxQuotas+5; n++ {
		if f := c.of(q(n)); f.quota != q(n) {
			t.Fatalf("fields of %v for %v", f.quota, q(n))
		}
	}
	if c.of(q(1)) != f1 {
		t.Error("a kept quota was rebuilt")
	}
	if f := c.of(q(maxQuotas + 4)); f != c.of(q(maxQuotas+4)) {
		// The last one used is the fast path's, even when not kept.
		t.Error("the last quota used is not reused")
	}
	if f := newFields(atomiclimit.Quota{Limit: math.MaxInt}, "u", ""); f.limited {
		t.Error("Unlimited has fields")
	}
}

// The shared field values (issue 25): each is what it says, of capacity 1,
// so that an append copies it; the cached ones are the same slice each time.
func TestFieldValues(t *testing.T) {
	f := newFields(atomiclimit.Quota{Limit: 200, Window: 200 * time.Second}, "p", "")
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
		v := f.values(tc.r, tc.token)
		if len(v) != 1 || cap(v) != 1 || v[0] != tc.want {
			t.Errorf("values(%d, %v) = %q (cap %d), want [%q]", tc.r, tc.token, v, cap(v), tc.want)
		}
	}
	if a, b := f.values(199, 0), f.values(199, 0); &a[0] != &b[0] {
		t.Error("a full bucket's value is built again")
	}
	if a, b := f.values(0, time.Second), f.values(0, time.Second); &a[0] != &b[0] {
		t.Error("a denial's value is built again")
	}
	for _, v := range []int64{-1, 0, 7, 99, 100, 3600, 3601, 1 << 40} {
		a, b := intValue(v), intValue(v)
		if len(a) != 1 || cap(a) != 1 || a[0] != strconv.FormatInt(v, 10) {
			t.Errorf("intValue(%d) = %q", v, a)
		}
		if cached := v >= 0 && v <= maxInt; cached != (&a[0] == &b[0]) {
			t.Errorf("intValue(%d): kept %v, want %v", v, !cached, cached)
		}
	}
	for _, s := range []string{"", "x", strings.Repeat("y", 48), strings.Repeat("z", 49)} {
		b := []byte(s)
		v := stringValue(b)
		clear(b)
		if len(v) != 1 || cap(v) != 1 || v[0] != s {
			t.Errorf("stringValue(%q) = %q", s, v)
		}
	}
	if n := testing.AllocsPerRun(100, func() { f.values(5, 0); f.values(0, time.Second); intValue(3600) }); n != 0 {
		t.Errorf("kept values: %v allocs, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { f.values(150, 0) }); n != 1 {
		t.Errorf("a value beyond the table: %v allocs, want 1", n)
	}
}

// The values of a stack's fields, two policies: one admitted with a
// precomputed r and one at r = 0 with its t. The lone common admission
// allocates nothing, nor does a RateLimit-Policy value already joined.
func TestStackFieldValues(t *testing.T) {
	a := newFields(atomiclimit.Quota{Limit: 10, Window: 10 * time.Second}, "a", "")
	b := newFields(atomiclimit.Quota{Limit: 2, Window: time.Minute}, `b"q`, "requests")
	out := []atomiclimit.Outcome{
		{Kind: atomiclimit.Admitted, Decision: gcra.Decision{Allowed: true, Remaining: 7}, Quota: a.quota},
		{Kind: atomiclimit.Violated, Decision: gcra.Decision{RetryAfter: 1500 * time.Millisecond, TokenAfter: 1500 * time.Millisecond}, Quota: b.quota},
	}
	fs := []*fields{a, b}
	policies, items, least, leastR := count(out, fs, 1)
	if policies != 2 || items != 2 || least != 1 || leastR != 0 {
		t.Fatalf("count = %d %d %d %d", policies, items, least, leastR)
	}
	if got, want := rateLimitValue(out, fs, 1, items, nil), `"a";r=7, "b\"q";r=0;t=2`; got != want {
		t.Errorf("RateLimit = %s, want %s", got, want)
	}
	var j joined
	want := `"a";q=10;w=10, "b\"q";q=2;w=60;qu="requests"`
	if got := j.policyValue(fs, policies, nil); got != want {
		t.Errorf("RateLimit-Policy = %s, want %s", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { j.policyValue(fs, policies, nil) }); n != 0 {
		t.Errorf("a kept RateLimit-Policy: %v allocs", n)
	}
	if got := rateLimitValue(out, fs, 1, items, []byte{1, 2}); got != `"a";r=7;pk=:AQI=:, "b\"q";r=0;t=2;pk=:AQI=:` {
		t.Errorf("with pk: %s", got)
	}
	one, ofs := out[:1], fs[:1]
	if n := testing.AllocsPerRun(100, func() { rateLimitValue(one, ofs, 1, 1, nil) }); n != 0 {
		t.Errorf("the common admission: %v allocs, want 0", n)
	}
	// Outside the precomputed items (r = 200): built, and right.
	big := newFields(atomiclimit.Quota{Limit: 500, Window: time.Second}, "big", "")
	if got := rateLimitValue([]atomiclimit.Outcome{{Kind: atomiclimit.Admitted, Decision: gcra.Decision{Remaining: 200}, Quota: big.quota}}, []*fields{big}, 1, 1, nil); got != `"big";r=200` {
		t.Errorf("r = 200: %s", got)
	}
}

// PolicyFields, as another door uses it: the items of an outcome and of a
// quota, "" where there is none, the kept ones without an allocation; an
// invalid name or unit is ErrConfig.
func TestPolicyFields(t *testing.T) {
	f, err := NewPolicyFields(`b"q`, "requests")
	if err != nil {
		t.Fatal(err)
	}
	q := atomiclimit.Quota{Limit: 200, Window: 200 * time.Second}
	if got := f.Policy(q); got != `"b\"q";q=200;w=200;qu="requests"` {
		t.Errorf("Policy = %s", got)
	}
	if got := f.Policy(atomiclimit.Quota{Limit: 1, Window: time.Millisecond}); got != `"b\"q";q=1000;w=1;qu="requests"` {
		t.Errorf("Policy of 1/ms = %s: the advertised q and w", got)
	}
	for _, tc := range []struct {
		o    atomiclimit.Outcome
		n    int
		want string
	}{
		{atomiclimit.Outcome{Kind: atomiclimit.Admitted, Decision: gcra.Decision{Allowed: true, Remaining: 7}, Quota: q}, 1, `"b\"q";r=7`},
		{atomiclimit.Outcome{Kind: atomiclimit.Violated, Decision: gcra.Decision{TokenAfter: 1500 * time.Millisecond}, Quota: q}, 1, `"b\"q";r=0;t=2`},
		{atomiclimit.Outcome{Kind: atomiclimit.Refunded, Decision: gcra.Decision{Remaining: 6}, Quota: q}, 3, `"b\"q";r=9`},
		{atomiclimit.Outcome{Kind: atomiclimit.Admitted, Decision: gcra.Decision{Remaining: 150}, Quota: q}, 1, `"b\"q";r=150`},
		{atomiclimit.Outcome{Kind: atomiclimit.Unknown, Quota: q}, 1, ""},
		{atomiclimit.Outcome{Kind: atomiclimit.Admitted, Decision: gcra.Decision{Remaining: 7}, Quota: atomiclimit.Quota{Limit: math.MaxInt}}, 1, ""},
	} {
		if got := f.RateLimit(&tc.o, tc.n); got != tc.want {
			t.Errorf("RateLimit(%+v, %d) = %q, want %q", tc.o, tc.n, got, tc.want)
		}
	}
	if got := f.Policy(atomiclimit.Quota{Limit: math.MaxInt}); got != "" {
		t.Errorf("Policy of Unlimited = %q", got)
	}
	kept := atomiclimit.Outcome{Kind: atomiclimit.Violated, Decision: gcra.Decision{TokenAfter: time.Second}, Quota: q}
	admitted := atomiclimit.Outcome{Kind: atomiclimit.Admitted, Decision: gcra.Decision{Remaining: 99}, Quota: q}
	if n := testing.AllocsPerRun(100, func() { f.RateLimit(&kept, 1); f.RateLimit(&admitted, 1); f.Policy(q) }); n != 0 {
		t.Errorf("kept items: %v allocs, want 0", n)
	}
	for _, c := range [][2]string{{"é", ""}, {"a\n", ""}, {"a", "bytes\n"}} {
		if _, err := NewPolicyFields(c[0], c[1]); !errors.Is(err, ErrConfig) {
			t.Errorf("NewPolicyFields(%q, %q): %v, want ErrConfig", c[0], c[1], err)
		}
	}
}
