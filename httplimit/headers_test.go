package httplimit

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// Strict patterns for the values we write, per the RFC 9651 grammar
// (sf-string, sf-integer, sf-binary, parameters without spaces) and the
// draft's parameters.
var (
	sfStringRE = `"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"`
	sfIntRE    = `(?:0|[1-9][0-9]{0,14})`
	sfBinRE    = `:[A-Za-z0-9+/]*={0,2}:`
	policyRE   = regexp.MustCompile(`^` + sfStringRE + `;q=` + sfIntRE + `(?:;w=[1-9][0-9]{0,14})?(?:;qu=` + sfStringRE + `)?(?:;pk=` + sfBinRE + `)?$`)
	rateRE     = regexp.MustCompile(`^` + sfStringRE + `;r=` + sfIntRE + `(?:;t=` + sfIntRE + `)?(?:;pk=` + sfBinRE + `)?$`)
	retryRE    = regexp.MustCompile(`^[1-9][0-9]*$`) // delay-seconds; we never send 0
)

// checkFields checks the RateLimit and RateLimit-Policy fields of h with
// both the regexes and the parser, and returns their parsed single items.
func checkFields(t *testing.T, h http.Header) (policy, rate sfItem) {
	t.Helper()
	pv, rv := h.Values("RateLimit-Policy"), h.Values("RateLimit")
	if len(pv) != 1 || len(rv) != 1 {
		t.Fatalf("RateLimit-Policy %q, RateLimit %q: want one line each", pv, rv)
	}
	if !policyRE.MatchString(pv[0]) {
		t.Errorf("RateLimit-Policy %q does not match %v", pv[0], policyRE)
	}
	if !rateRE.MatchString(rv[0]) {
		t.Errorf("RateLimit %q does not match %v", rv[0], rateRE)
	}
	pl, err := parseSFList(pv[0])
	if err != nil || len(pl) != 1 {
		t.Fatalf("RateLimit-Policy %q: %v, %d items", pv[0], err, len(pl))
	}
	rl, err := parseSFList(rv[0])
	if err != nil || len(rl) != 1 {
		t.Fatalf("RateLimit %q: %v, %d items", rv[0], err, len(rl))
	}
	policy, rate = pl[0], rl[0]
	// Draft -11, 3: the item is a String; q a non-negative Integer
	// (REQUIRED); w a positive Integer; qu a String; pk a Byte Sequence.
	if _, ok := policy.value.(string); !ok {
		t.Errorf("RateLimit-Policy item %#v is not a String", policy.value)
	}
	if q, ok := policy.param("q"); !ok || q.(int64) < 0 {
		t.Errorf("RateLimit-Policy q = %v", q)
	}
	if w, ok := policy.param("w"); ok && w.(int64) < 1 {
		t.Errorf("RateLimit-Policy w = %v", w)
	}
	// Draft -11, 4: r REQUIRED non-negative Integer; t non-negative Integer.
	if rate.value != policy.value {
		t.Errorf("RateLimit item %v names a policy other than %v", rate.value, policy.value)
	}
	if r, ok := rate.param("r"); !ok || r.(int64) < 0 {
		t.Errorf("RateLimit r = %v", r)
	}
	if tt, ok := rate.param("t"); ok && tt.(int64) < 0 {
		t.Errorf("RateLimit t = %v", tt)
	}
	return policy, rate
}

func intParam(it sfItem, k string) int64 {
	v, ok := it.param(k)
	if !ok {
		return -1
	}
	return v.(int64)
}

// A timeline with T = 1s, B = 5: every header value, exactly.
func TestHeadersTimeline(t *testing.T) {
	c := newFakeClock()
	lim := newKeyed[string](t, c, gcra.Per(10, 10*time.Second), 5)
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}, Headers: DefaultHeaders | HeaderLegacy}).Handler(okHandler)
	steps := []struct {
		advance     time.Duration
		wantCode    int
		wantRate    string
		wantRetry   string
		wantXRemain string
		wantXReset  string
	}{
		{0, 200, `"default";r=4`, "", "4", "1"},
		{0, 200, `"default";r=3`, "", "3", "2"},
		{0, 200, `"default";r=2`, "", "2", "3"},
		{0, 200, `"default";r=1`, "", "1", "4"},
		{0, 200, `"default";r=0;t=1`, "", "0", "5"},
		{0, 429, `"default";r=0;t=1`, "1", "0", "5"},
		{300 * time.Millisecond, 429, `"default";r=0;t=1`, "1", "0", "5"}, // 0.7s rounded up
		{700 * time.Millisecond, 200, `"default";r=0;t=1`, "", "0", "5"},  // exactly at RetryAfter
		{2500 * time.Millisecond, 200, `"default";r=1`, "", "1", "4"},     // 2.5 tokens back, 1 taken
		{0, 200, `"default";r=0;t=1`, "", "0", "5"},
		{10 * time.Second, 200, `"default";r=4`, "", "4", "1"}, // full again
	}
	for i, s := range steps {
		c.Add(s.advance)
		w := do(h, "GET", "/", "", "X-Client", "alice")
		pol, rate := checkFields(t, w.Header())
		if w.Code != s.wantCode {
			t.Errorf("step %d: status %d, want %d", i, w.Code, s.wantCode)
		}
		if got := w.Header().Get("RateLimit"); got != s.wantRate {
			t.Errorf("step %d: RateLimit %q, want %q", i, got, s.wantRate)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"default";q=5;w=5` {
			t.Errorf("step %d: RateLimit-Policy %q", i, got)
		}
		if intParam(pol, "q") != 5 || intParam(pol, "w") != 5 || intParam(rate, "r") < 0 {
			t.Errorf("step %d: parsed q=%d w=%d", i, intParam(pol, "q"), intParam(pol, "w"))
		}
		if got := w.Header().Get("Retry-After"); got != s.wantRetry {
			t.Errorf("step %d: Retry-After %q, want %q", i, got, s.wantRetry)
		}
		if got := w.Header().Get("X-RateLimit-Remaining"); got != s.wantXRemain {
			t.Errorf("step %d: X-RateLimit-Remaining %q, want %q", i, got, s.wantXRemain)
		}
		if got := w.Header().Get("X-RateLimit-Reset"); got != s.wantXReset {
			t.Errorf("step %d: X-RateLimit-Reset %q, want %q", i, got, s.wantXReset)
		}
		if got := w.Header().Get("X-RateLimit-Limit"); got != "5" {
			t.Errorf("step %d: X-RateLimit-Limit %q", i, got)
		}
		if s.wantRetry != "" {
			if !retryRE.MatchString(w.Header().Get("Retry-After")) {
				t.Errorf("step %d: Retry-After %q is not delay-seconds", i, w.Header().Get("Retry-After"))
			}
			ra, _ := strconv.Atoi(w.Header().Get("Retry-After"))
			if int64(ra) < intParam(rate, "t") {
				t.Errorf("step %d: Retry-After %d earlier than t=%d", i, ra, intParam(rate, "t"))
			}
		}
	}
}

func TestRetryAfterRounding(t *testing.T) {
	for _, tc := range []struct {
		retry, token time.Duration
		want         int64
	}{
		{time.Nanosecond, 0, 1},
		{999 * time.Millisecond, 999 * time.Millisecond, 1},
		{time.Second, time.Second, 1},
		{time.Second + time.Nanosecond, time.Second, 2},
		{2500 * time.Millisecond, 0, 3},
		{59*time.Second + 1, 0, 60},
		{time.Second, 3*time.Second + 1, 4}, // never earlier than t (not a real decision)
		{gcra.Never, gcra.Never, -1},
		{gcra.Never, 0, -1},
	} {
		d := gcra.Decision{RetryAfter: tc.retry, TokenAfter: tc.token}
		if got := retryAfter(d); got != tc.want {
			t.Errorf("retryAfter(%v, token %v) = %d, want %d", tc.retry, tc.token, got, tc.want)
		}
	}
}

// Whatever the history, a client that waits Retry-After seconds is admitted,
// and one second less is not always enough only because the value is
// ⌈RetryAfter⌉: waiting Retry-After−1 seconds is denied. Limits with T not a
// whole second exercise the rounding.
func TestRetryAfterIsTheLeastSufficientWait(t *testing.T) {
	for _, lc := range []struct {
		limit gcra.Limit
		burst int
		cost  int
	}{
		{gcra.Per(3, 7*time.Second), 2, 1},
		{gcra.Per(7, 3*time.Second), 4, 3},
		{gcra.Per(1, time.Minute), 1, 1},
		{gcra.Every(1500 * time.Millisecond), 3, 2},
	} {
		c := newFakeClock()
		lim := newKeyed[string](t, c, lc.limit, lc.burst)
		h := mustNew(t, Config[string]{
			Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}},
			Cost: func(*http.Request) int { return lc.cost },
		}).Handler(okHandler)
		denials := 0
		for i := 0; i < 40; i++ {
			c.Add(time.Duration(i*37%11) * 100 * time.Millisecond) // an irregular client
			w := do(h, "GET", "/", "", "X-Client", "k")
			if w.Code != 429 {
				continue
			}
			denials++
			ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if err != nil || ra < 1 {
				t.Fatalf("%v: Retry-After %q", lc.limit, w.Header().Get("Retry-After"))
			}
			_, rate := checkFields(t, w.Header())
			if tt := intParam(rate, "t"); int64(ra) < tt {
				t.Errorf("%v step %d: Retry-After %d earlier than t=%d", lc.limit, i, ra, tt)
			}
			// Retry-After − 1 seconds is too early (the decision would be
			// the same later for a Peek that takes nothing).
			early := lim.PeekN("k", c.Now().Add(time.Duration(ra-1)*time.Second), lc.cost)
			if early.Allowed {
				t.Errorf("%v step %d: admitted after Retry-After−1 = %ds: Retry-After %d not the least", lc.limit, i, ra-1, ra)
			}
			c.Add(time.Duration(ra) * time.Second)
			if w := do(h, "GET", "/", "", "X-Client", "k"); w.Code != 200 {
				t.Errorf("%v step %d: denied (%d) after waiting Retry-After %ds", lc.limit, i, w.Code, ra)
			}
		}
		if denials == 0 {
			t.Errorf("%v: no denial: the test tested nothing", lc.limit)
		}
	}
}

func TestHeaderSets(t *testing.T) {
	for _, tc := range []struct {
		set                    HeaderSet
		allowedHas, deniedHas  []string
		allowedNot, deniedNots []string
	}{
		{0, []string{"RateLimit", "RateLimit-Policy"}, []string{"RateLimit", "RateLimit-Policy", "Retry-After"},
			[]string{"Retry-After", "X-RateLimit-Limit"}, []string{"X-RateLimit-Remaining"}},
		{HeaderRateLimit, []string{"RateLimit"}, []string{"RateLimit"},
			[]string{"RateLimit-Policy"}, []string{"RateLimit-Policy", "Retry-After"}},
		{HeaderRetryAfter, nil, []string{"Retry-After"},
			[]string{"RateLimit", "RateLimit-Policy"}, []string{"RateLimit", "X-RateLimit-Reset"}},
		{HeaderLegacy, []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}, []string{"X-RateLimit-Reset"},
			[]string{"RateLimit"}, []string{"Retry-After", "RateLimit"}},
		{HeadersNone | DefaultHeaders | HeaderLegacy, nil, nil,
			[]string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit"}, []string{"Retry-After", "RateLimit", "X-RateLimit-Reset"}},
	} {
		lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Second), 1)
		h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}, Headers: tc.set}).Handler(okHandler)
		a := do(h, "GET", "/", "", "X-Client", "k")
		d := do(h, "GET", "/", "", "X-Client", "k")
		if a.Code != 200 || d.Code != 429 {
			t.Fatalf("set %#x: codes %d, %d", tc.set, a.Code, d.Code)
		}
		for _, k := range tc.allowedHas {
			if a.Header().Get(k) == "" {
				t.Errorf("set %#x: allowed response lacks %s", tc.set, k)
			}
		}
		for _, k := range tc.deniedHas {
			if d.Header().Get(k) == "" {
				t.Errorf("set %#x: denied response lacks %s", tc.set, k)
			}
		}
		for _, k := range tc.allowedNot {
			if v := a.Header().Get(k); v != "" {
				t.Errorf("set %#x: allowed response has %s: %q", tc.set, k, v)
			}
		}
		for _, k := range tc.deniedNots {
			if v := d.Header().Get(k); v != "" {
				t.Errorf("set %#x: denied response has %s: %q", tc.set, k, v)
			}
		}
		if d.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("set %#x: denial Content-Type %q", tc.set, d.Header().Get("Content-Type"))
		}
	}
	if _, err := New(Config[string]{Key: Header("X"), Policies: []atomiclimit.Policy[string]{{Limiter: newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Second), 1)}}, Headers: 0x80}); err == nil {
		t.Error("New accepted unknown header bits")
	}
}

// The policy mapping q = B, w = ⌈B·T⌉ for a range of limits.
func TestPolicyMapping(t *testing.T) {
	for _, tc := range []struct {
		limit gcra.Limit
		burst int
		want  string
	}{
		{gcra.Per(60, time.Minute), 60, `"default";q=60;w=60`},
		{gcra.Per(100, time.Second), 100, `"default";q=100;w=1`},
		{gcra.Per(100, time.Second), 10, `"default";q=100;w=1`},  // B·T = 100ms: w rounded up to 1, q scaled to it
		{gcra.Per(1000, time.Second), 1, `"default";q=1000;w=1`}, // not q=1;w=1: the rate is 1000/s
		{gcra.Per(10, time.Second), 15, `"default";q=20;w=2`},    // B·T = 1.5s: q/w is the rate
		{gcra.Per(10, time.Hour), 2, `"default";q=2;w=720`},
		{gcra.Per(3, 7*time.Second), 2, `"default";q=2;w=5`}, // T = 2.333…s, B·T = 4.67s
		{gcra.Per(1000, 24*time.Hour), 1000, `"default";q=1000;w=86400`},
		{gcra.DenyAll, 1, `"default";q=0`},
	} {
		lim := newKeyed[string](t, newFakeClock(), tc.limit, tc.burst)
		h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}}).Handler(okHandler)
		w := do(h, "GET", "/", "", "X-Client", "k")
		if got := w.Header().Get("RateLimit-Policy"); got != tc.want {
			t.Errorf("%v burst %d: RateLimit-Policy %q, want %q", tc.limit, tc.burst, got, tc.want)
		}
		checkFields(t, w.Header())
	}
}

func TestDenyAllAndUnlimited(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.DenyAll, 1)
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}}).Handler(okHandler)
	w := do(h, "GET", "/", "", "X-Client", "k")
	if w.Code != 429 || w.Header().Get("Retry-After") != "" || w.Header().Get("RateLimit") != `"default";r=0` {
		t.Errorf("DenyAll: %d, Retry-After %q, RateLimit %q", w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"))
	}
	checkFields(t, w.Header())
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p["detail"] != "request cost exceeds the policy's quota" {
		t.Errorf("DenyAll body %s: %v", w.Body, err)
	}

	un := newKeyed[string](t, newFakeClock(), gcra.Unlimited, 1)
	h = mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: un}}, Headers: DefaultHeaders | HeaderLegacy}).Handler(okHandler)
	for i := 0; i < 3; i++ {
		w = do(h, "GET", "/", "", "X-Client", "k")
		if w.Code != 200 || len(w.Header()) != 0 {
			t.Errorf("Unlimited: %d, headers %v", w.Code, w.Header())
		}
	}
}

// A structured-field string with characters that need escaping round-trips.
func TestPolicyNameEscaping(t *testing.T) {
	name := `tier "gold" \ v2`
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Second), 2)
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Name: name, Limiter: lim}}, QuotaUnit: "requests"}).Handler(okHandler)
	w := do(h, "GET", "/", "", "X-Client", "k")
	pol, rate := checkFields(t, w.Header())
	if pol.value != name || rate.value != name {
		t.Errorf("names %q, %q, want %q", pol.value, rate.value, name)
	}
	if qu, _ := pol.param("qu"); qu != "requests" {
		t.Errorf("qu = %v", qu)
	}
	do(h, "GET", "/", "", "X-Client", "k")
	w = do(h, "GET", "/", "", "X-Client", "k")
	var p struct {
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || len(p.Violated) != 1 || p.Violated[0] != name {
		t.Errorf("problem body %s: %v %v", w.Body, p, err)
	}
	for _, bad := range []string{"é", "tab\there", "nl\n"} {
		if _, err := New(Config[string]{Key: Header("X"), Policies: []atomiclimit.Policy[string]{{Name: bad, Limiter: lim}}}); err == nil {
			t.Errorf("New accepted policy name %q", bad)
		}
	}
}

func TestPartitionKey(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Second), 2)
	h := mustNew(t, Config[string]{
		Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}},
		PartitionKey: func(k string) []byte { return []byte("id-" + k) },
	}).Handler(okHandler)
	for i := 0; i < 3; i++ {
		w := do(h, "GET", "/", "", "X-Client", "bob")
		pol, rate := checkFields(t, w.Header())
		for _, it := range []sfItem{pol, rate} {
			pk, ok := it.param("pk")
			if b, isBytes := pk.([]byte); !ok || !isBytes || string(b) != "id-bob" {
				t.Errorf("request %d: pk = %#v", i, pk)
			}
		}
	}
}

func TestDefaultDenyBody(t *testing.T) {
	c := newFakeClock()
	lim := newKeyed[string](t, c, gcra.Per(1, time.Minute), 1)
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Name: "per-minute", Limiter: lim}}}).Handler(okHandler)
	do(h, "GET", "/", "", "X-Client", "k")
	c.Add(500 * time.Millisecond)
	w := do(h, "GET", "/", "", "X-Client", "k")
	if w.Code != 429 {
		t.Fatalf("status %d", w.Code)
	}
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	want := map[string]any{
		"type": QuotaExceededType, "title": "Too Many Requests", "status": float64(429),
		"detail": "retry after 60 seconds", "violated-policies": []any{"per-minute"},
	}
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Errorf("body %v, want %v", p, want)
	}
	if w.Header().Get("Retry-After") != "60" || w.Header().Get("Content-Length") != strconv.Itoa(w.Body.Len()) {
		t.Errorf("Retry-After %q, Content-Length %q for %d bytes", w.Header().Get("Retry-After"), w.Header().Get("Content-Length"), w.Body.Len())
	}
}

// Header checks on a real exchange, parsed from the wire by net/http's client.
func TestHeadersOnTheWire(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Second), 1)
	m := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}, Headers: DefaultHeaders | HeaderLegacy})
	srv := httptest.NewServer(m.Handler(okHandler))
	defer srv.Close()
	for i, want := range []int{200, 429} {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.Header.Set("X-Client", "wire")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
		checkFields(t, resp.Header)
	}
}

// The claims behind the advertised q and w (see advertise). A client that
// spaces its requests w/q apart is never denied, on every limit. Where q is
// the burst (w = B·T in whole seconds, or rounding up to whole seconds adds
// less than one interval), so is a client that sends at most q requests in
// every window of length w, in bursts or not: random schedules that keep to
// the advertised policy, on limits whose B·T is and is not whole seconds.
func TestPolicyHonouringClientNeverDenied(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, lc := range []struct {
		limit gcra.Limit
		burst int
	}{
		{gcra.Per(3, 7*time.Second), 2},
		{gcra.Per(5, time.Second), 5},
		{gcra.Per(100, time.Second), 10},
		{gcra.Per(7, time.Minute), 3},
		{gcra.Every(1500 * time.Millisecond), 1},
	} {
		c := newFakeClock()
		lim := newKeyed[string](t, c, lc.limit, lc.burst)
		h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}}).Handler(okHandler)
		pol, _ := checkFields(t, do(h, "GET", "/", "", "X-Client", "probe").Header())
		q, w := int(intParam(pol, "q")), time.Duration(intParam(pol, "w"))*time.Second
		for i := range 3 * q {
			c.Add(w / time.Duration(q))
			if resp := do(h, "GET", "/", "", "X-Client", "paced"); resp.Code != 200 {
				t.Fatalf("%v burst %d (q=%d w=%v): paced request %d denied", lc.limit, lc.burst, q, w, i)
			}
		}
		if q != lc.burst {
			continue // bursts of up to q at once are more than the burst
		}
		var sent []time.Duration // times since start
		now, served := time.Duration(0), 0
		for step := 0; step < 3000; step++ {
			gap := time.Duration(rng.Int64N(int64(2 * w / time.Duration(q))))
			if rng.IntN(4) == 0 {
				gap = 0 // bursts at one instant
			}
			c.Add(gap)
			now += gap
			inWindow := 0
			for _, s := range sent {
				if now-s < w {
					inWindow++
				}
			}
			if inWindow >= q {
				continue // the policy says wait
			}
			sent = append(sent, now)
			if resp := do(h, "GET", "/", "", "X-Client", "k"); resp.Code != 200 {
				t.Fatalf("%v burst %d (q=%d w=%v): request %d at %v denied, though within the advertised policy",
					lc.limit, lc.burst, q, w, len(sent), now)
			}
			served++
		}
		if served < 100 {
			t.Errorf("%v: only %d requests sent", lc.limit, served)
		}
	}
}

// The header values are shared between responses (issue 25): a handler
// that adds to, sets or deletes them changes its own response only.
func TestSharedHeaderValues(t *testing.T) {
	lim := newKeyed[netip.Prefix](t, newFakeClock(), gcra.Per(1, time.Second), 10)
	h := mustNew(t, Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "p", Limiter: lim}}, Headers: DefaultHeaders | HeaderLegacy}).
		Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Add("RateLimit", `"inner";r=1`)
			w.Header().Add("RateLimit-Policy", `"inner";q=1`)
			w.Header().Add("X-RateLimit-Limit", "1")
			w.Header().Set("X-RateLimit-Remaining", "0")
		}))
	for i, want := range []string{`"p";r=9`, `"p";r=8`, `"p";r=7`} {
		w := do(h, "GET", "/", "192.0.2.1:1")
		if got := w.Header().Values("RateLimit"); len(got) != 2 || got[0] != want {
			t.Errorf("request %d: RateLimit %q, want %q first", i, got, want)
		}
		if got := w.Header().Values("RateLimit-Policy"); len(got) != 2 || got[0] != `"p";q=10;w=10` {
			t.Errorf("request %d: RateLimit-Policy %q", i, got)
		}
		if got := w.Header().Values("X-RateLimit-Limit"); len(got) != 2 || got[0] != "10" {
			t.Errorf("request %d: X-RateLimit-Limit %q", i, got)
		}
	}
}
