package httplimit

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// admits sends the requests in order and returns their status codes as a
// string of 'A' (2xx) and 'D' (429) and 'E' (anything else).
func admits(h http.Handler, reqs ...*http.Request) string {
	var b strings.Builder
	for _, r := range reqs {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch {
		case w.Code < 300:
			b.WriteByte('A')
		case w.Code == 429:
			b.WriteByte('D')
		default:
			b.WriteByte('E')
		}
	}
	return b.String()
}

func req(method, target string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func TestKeyHeader(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	h := mustNew(t, Config[string]{Key: Header("x-client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}}).Handler(okHandler)
	got := admits(h,
		req("GET", "/", "X-Client", "a"), req("GET", "/", "X-Client", "a"),
		req("GET", "/", "X-Client", "b"), req("GET", "/"), req("GET", "/", "X-Client", ""))
	if got != "ADAEE" {
		t.Errorf("Header key: %s, want ADAEE", got)
	}
	w := do(h, "GET", "/", "")
	if w.Code != 400 || w.Header().Get("Content-Type") != "application/problem+json" {
		t.Errorf("missing key: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
}

func TestKeyAPIKey(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	issued := map[string]bool{"k1": true, "k2": true}
	h := mustNew(t, Config[string]{Key: APIKey("Authorization", func(k string) bool { return issued[k] }), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}}).Handler(okHandler)
	got := admits(h,
		req("GET", "/", "Authorization", "Bearer k1"),
		req("GET", "/", "Authorization", "bearer  k1 "), // same key
		req("GET", "/", "Authorization", "Bearer k2"),
		req("GET", "/", "Authorization", "Bearer forged"), // 400, not a fresh bucket
		req("GET", "/", "Authorization", "Bearer "),
		req("GET", "/"))
	if got != "ADAEEE" {
		t.Errorf("APIKey: %s, want ADAEEE", got)
	}
	key := APIKey("X-API-Key", nil)
	r := req("GET", "/", "X-API-Key", " abc ")
	if k, err := key(r); k != "abc" || err != nil {
		t.Errorf("X-API-Key: %q, %v", k, err)
	}
	if _, err := APIKey("Authorization", func(string) bool { return false })(req("GET", "/", "Authorization", "Bearer x")); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("invalid key error %v", err)
	}
}

// A scheme with no token is no key, not the key "Bearer".
func TestKeyBearerAlone(t *testing.T) {
	auth := APIKey("Authorization", nil)
	for _, v := range []string{"Bearer", "bearer", " Bearer  "} {
		if k, err := auth(req("GET", "/", "Authorization", v)); !errors.Is(err, ErrNoKey) {
			t.Errorf("Authorization %q: %q, %v; want ErrNoKey", v, k, err)
		}
	}
}

// Issue 28, "one key bound for every door": every key function that reads
// the client's bytes holds its keys to one bound, 256 bytes unless its
// MaxKeyLen option says otherwise (grpclimit's are held to the same).
// Through a real server: a key of exactly the bound is served, one byte
// more is 400 (RejectOnError), never a key in the limiter. MaxKeyLen(0)
// accepts no key; Method, which takes no option, holds to the default.
func TestIssue28KeyBound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		key    KeyFunc[string]
		bound  int
		header string // the header the key is sent in; "" for the method
		prefix string // before the key in the header (a scheme)
	}{
		{"Header", Header("X-Key"), 256, "X-Key", ""},
		{"APIKey", APIKey("X-Key", nil), 256, "X-Key", ""},
		{"APIKey/Authorization", APIKey("Authorization", nil), 256, "Authorization", "Bearer "},
		{"Header/MaxKeyLen(8)", Header("X-Key", MaxKeyLen(8)), 8, "X-Key", ""},
		{"APIKey/MaxKeyLen(1000)", APIKey("Authorization", nil, MaxKeyLen(1000)), 1000, "Authorization", "Bearer "},
		{"Header/MaxKeyLen(0)", Header("X-Key", MaxKeyLen(0)), 0, "X-Key", ""},
		{"Method", Method, 256, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 10)
			h := newCountingHook()
			srv := httptest.NewServer(mustNew(t, Config[string]{Key: tc.key, Policies: []atomiclimit.Policy[string]{{Limiter: lim}}, Hook: h.hook()}).Handler(okHandler))
			defer srv.Close()
			send := func(n int) int {
				t.Helper()
				key := strings.Repeat("k", n)
				method := "GET"
				if tc.header == "" {
					method = strings.ToUpper(key)
				}
				r, err := http.NewRequest(method, srv.URL+"/", nil)
				if err != nil {
					t.Fatal(err)
				}
				if tc.header != "" {
					r.Header.Set(tc.header, tc.prefix+key)
				}
				resp, err := srv.Client().Do(r)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if tc.bound > 0 {
				if got := send(tc.bound); got != 200 {
					t.Errorf("a key of %d bytes, the bound: %d, want 200", tc.bound, got)
				}
			}
			if got := send(tc.bound + 1); got != 400 {
				t.Errorf("a key of %d bytes, one over the bound: %d, want 400", tc.bound+1, got)
			}
			if n := lim.Stats().Keys; n != min(tc.bound, 1) {
				t.Errorf("the limiter holds %d keys, want %d: the long key never reaches it", n, min(tc.bound, 1))
			}
			if h.errors["default"] != 1 || !errors.Is(h.lastErr, ErrInvalidKey) {
				t.Errorf("Hook.Error heard %v (%v), want the long key once, ErrInvalidKey", h.errors, h.lastErr)
			}
		})
	}
}

func TestKeyRoute(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	m := mustNew(t, Config[string]{Key: Route, Policies: []atomiclimit.Policy[string]{{Limiter: lim}}})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", m.Handler(okHandler))
	mux.Handle("GET /users/{id}", m.Handler(okHandler))
	got := admits(mux, req("GET", "/items/1"), req("GET", "/items/2"), req("GET", "/users/1"), req("GET", "/users/9"))
	if got != "ADAD" {
		t.Errorf("Route key inside the mux: %s, want ADAD", got)
	}
	// Outside the mux r.Pattern is empty: Route fails, RouteOf asks the mux.
	if got := admits(m.Handler(mux), req("GET", "/items/1")); got != "E" {
		t.Errorf("Route outside the mux: %s, want E", got)
	}
	lim2 := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	inner := http.NewServeMux()
	inner.Handle("GET /items/{id}", okHandler)
	h := mustNew(t, Config[string]{Key: RouteOf(inner), Policies: []atomiclimit.Policy[string]{{Limiter: lim2}}}).Handler(inner)
	if got := admits(h, req("GET", "/items/1"), req("GET", "/items/2"), req("GET", "/nowhere")); got != "ADE" {
		t.Errorf("RouteOf: %s, want ADE", got)
	}
}

func TestKeyMethodCompose(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	h := mustNew(t, Config[string]{Key: Method, Policies: []atomiclimit.Policy[string]{{Limiter: lim}}}).Handler(okHandler)
	if got := admits(h, req("GET", "/"), req("POST", "/"), req("GET", "/a")); got != "AAD" {
		t.Errorf("Method: %s, want AAD", got)
	}

	ipRoute := Compose(RemoteIP, Method)
	lim2 := newKeyed[Pair[netip.Prefix, string]](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	h = mustNew(t, Config[Pair[netip.Prefix, string]]{Key: ipRoute, Policies: []atomiclimit.Policy[Pair[netip.Prefix, string]]{{Limiter: lim2}}}).Handler(okHandler)
	r1, r2, r3 := req("GET", "/"), req("POST", "/"), req("GET", "/")
	r3.RemoteAddr = "198.51.100.7:1"
	if got := admits(h, r1, r2, r3, req("GET", "/")); got != "AAAD" {
		t.Errorf("Compose: %s, want AAAD", got)
	}
	k, _ := ipRoute(r3)
	if k != (Pair[netip.Prefix, string]{mustPrefix("198.51.100.7/32"), "GET"}) {
		t.Errorf("Compose key %v", k)
	}
	if _, err := Compose(Header("X-None"), Method)(r1); !errors.Is(err, ErrNoKey) {
		t.Errorf("Compose error %v", err)
	}
	if _, err := Compose(Method, Header("X-None"))(r1); !errors.Is(err, ErrNoKey) {
		t.Errorf("Compose second error %v", err)
	}

	// More than two parts: Compose nested (Join, which formatted a string
	// per request, is gone), comparable and allocation-free.
	three := Compose(RemoteIP, Compose(Method, Header("X-T")))
	r4 := req("PUT", "/", "X-T", "t1")
	want := Pair[netip.Prefix, Pair[string, string]]{mustPrefix("192.0.2.1/32"), Pair[string, string]{"PUT", "t1"}}
	if k, err := three(r4); k != want || err != nil {
		t.Errorf("nested Compose = %v, %v", k, err)
	}
	if _, err := three(req("PUT", "/")); !errors.Is(err, ErrNoKey) {
		t.Errorf("nested Compose error %v", err)
	}
	if n := testing.AllocsPerRun(100, func() { three(r4) }); n != 0 {
		t.Errorf("nested Compose: %v allocs, want 0", n)
	}
}

func TestRoutes(t *testing.T) {
	c := newFakeClock()
	def := newKeyed[netip.Prefix](t, c, gcra.Per(100, time.Minute), 100)
	login := newKeyed[netip.Prefix](t, c, gcra.Per(2, time.Minute), 2)
	hook := newCountingHook()
	mux := http.NewServeMux()
	m := mustNew(t, Config[netip.Prefix]{
		Key:      RemoteIP,
		Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: def}},
		Routes:   map[string]atomiclimit.Policy[netip.Prefix]{"POST /login": {Name: "login", Limiter: login}},
		Mux:      mux,
		Hook:     hook.hook(),
	})
	mux.Handle("POST /login", m.Handler(okHandler))
	mux.Handle("GET /", m.Handler(okHandler))
	if got := admits(mux, req("POST", "/login"), req("POST", "/login"), req("POST", "/login"), req("GET", "/x")); got != "AADA" {
		t.Errorf("routes: %s, want AADA", got)
	}
	// A route's policy adds to the default one: the login requests are
	// checked against both, and both are listed.
	w := do(mux, "POST", "/login", "")
	if w.Header().Get("RateLimit-Policy") != `"default";q=100;w=60, "login";q=2;w=60` || !strings.Contains(w.Body.String(), `"violated-policies":["login"]`) {
		t.Errorf("login policy %q body %s", w.Header().Get("RateLimit-Policy"), w.Body)
	}
	if got := w.Header().Get("RateLimit"); got != `"default";r=97, "login";r=0;t=30` {
		t.Errorf("login RateLimit %q", got)
	}
	// The default policy was charged for the two admitted logins and the
	// GET, not for the two denied logins (given back): 100 − 4 after this.
	w = do(mux, "GET", "/", "")
	if w.Header().Get("RateLimit") != `"default";r=96` {
		t.Errorf("default route RateLimit %q", w.Header().Get("RateLimit"))
	}
	if hook.allowed["login"] != 2 || hook.denied["login"] != 2 || hook.allowed["default"] != 4 || hook.denied["default"] != 0 {
		t.Errorf("hook %v", hook)
	}
	// The same middleware around the whole mux finds the pattern via Mux.
	c2 := newFakeClock()
	login2 := newKeyed[netip.Prefix](t, c2, gcra.Per(1, time.Minute), 1)
	inner := http.NewServeMux()
	inner.Handle("POST /login", okHandler)
	inner.Handle("/", okHandler)
	outer := mustNew(t, Config[netip.Prefix]{
		Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: newKeyed[netip.Prefix](t, c2, gcra.Per(100, time.Minute), 100)}},
		Routes: map[string]atomiclimit.Policy[netip.Prefix]{"POST /login": {Name: "login", Limiter: login2}}, Mux: inner,
	}).Handler(inner)
	if got := admits(outer, req("POST", "/login"), req("POST", "/login"), req("GET", "/")); got != "ADA" {
		t.Errorf("routes via Mux: %s, want ADA", got)
	}
	if _, err := New(Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: def}}, Routes: map[string]atomiclimit.Policy[netip.Prefix]{"/x": {Limiter: login}}, Mux: inner}); !errors.Is(err, ErrConfig) {
		t.Errorf("unnamed route policy: %v", err)
	}
}

// Routes without Mux: a middleware that wraps the mux sees every request
// before routing (r.Pattern empty), so no route matched and five POSTs to
// /login all passed its limit of three per minute. New refuses the config
// instead of ignoring the routes.
func TestRoutesNeedMux(t *testing.T) {
	c := newFakeClock()
	login := newKeyed[netip.Prefix](t, c, gcra.Per(3, time.Minute), 3)
	_, err := New(Config[netip.Prefix]{
		Key:      RemoteIP,
		Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: newKeyed[netip.Prefix](t, c, gcra.Per(100, time.Minute), 100)}},
		Routes:   map[string]atomiclimit.Policy[netip.Prefix]{"POST /login": {Name: "login", Limiter: login}},
	})
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("Routes without Mux: err = %v, want ErrConfig", err)
	}
	// With the mux, the middleware around it enforces the route's limit.
	mux := http.NewServeMux()
	mux.Handle("POST /login", okHandler)
	h := mustNew(t, Config[netip.Prefix]{
		Key:      RemoteIP,
		Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: newKeyed[netip.Prefix](t, c, gcra.Per(100, time.Minute), 100)}},
		Routes:   map[string]atomiclimit.Policy[netip.Prefix]{"POST /login": {Name: "login", Limiter: login}},
		Mux:      mux,
	}).Handler(mux)
	if got := admits(h, req("POST", "/login"), req("POST", "/login"), req("POST", "/login"), req("POST", "/login"), req("POST", "/login")); got != "AAADD" {
		t.Errorf("five POSTs to /login: %s, want AAADD", got)
	}
}

func TestExclude(t *testing.T) {
	lim := newKeyed[netip.Prefix](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	hook := newCountingHook()
	h := mustNew(t, Config[netip.Prefix]{
		Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: lim}}, Hook: hook.hook(),
		Exclude: func(r *http.Request) bool { return r.URL.Path == "/healthz" },
	}).Handler(okHandler)
	for i := 0; i < 3; i++ {
		if w := do(h, "GET", "/healthz", ""); w.Code != 200 || len(w.Header()) != 0 {
			t.Errorf("excluded: %d %v", w.Code, w.Header())
		}
	}
	if got := admits(h, req("GET", "/"), req("GET", "/")); got != "AD" {
		t.Errorf("after exclusions: %s, want AD (exclusions took no token)", got)
	}
	if hook.allowed["default"] != 1 || hook.denied["default"] != 1 {
		t.Errorf("hook %v", hook)
	}
}

func TestDryRun(t *testing.T) {
	lim := newKeyed[netip.Prefix](t, newFakeClock(), gcra.Per(2, time.Minute), 2)
	hook := newCountingHook()
	h := mustNew(t, Config[netip.Prefix]{Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: lim}}, Hook: hook.hook(), DryRun: true}).Handler(okHandler)
	for i := 0; i < 5; i++ {
		w := do(h, "GET", "/", "")
		if w.Code != 200 || w.Header().Get("Retry-After") != "" {
			t.Errorf("dry run %d: %d, Retry-After %q", i, w.Code, w.Header().Get("Retry-After"))
		}
		if i >= 2 && w.Header().Get("RateLimit") != `"default";r=0;t=30` {
			t.Errorf("dry run %d: RateLimit %q", i, w.Header().Get("RateLimit"))
		}
	}
	if hook.allowed["default"] != 2 || hook.denied["default"] != 3 || hook.lastRetry != 30*time.Second {
		t.Errorf("dry-run hook %v, last retry %v", hook, hook.lastRetry)
	}
}

func TestCost(t *testing.T) {
	c := newFakeClock()
	lim := newKeyed[netip.Prefix](t, c, gcra.Per(1, time.Second), 5)
	hook := newCountingHook()
	h := mustNew(t, Config[netip.Prefix]{
		Key: RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: lim}}, Hook: hook.hook(),
		Cost: func(r *http.Request) int {
			switch r.URL.Path {
			case "/free":
				return 0
			case "/bulk":
				return 3
			case "/huge":
				return 6
			case "/bad":
				return -1
			}
			return 1
		},
	}).Handler(okHandler)
	for _, s := range []struct {
		path, code, rate, retry string
	}{
		{"/free", "200", `"default";r=5`, ""},
		{"/bulk", "200", `"default";r=2`, ""},
		{"/free", "200", `"default";r=2`, ""},
		{"/bulk", "429", `"default";r=2`, "1"},
		{"/huge", "429", `"default";r=2`, ""},
		{"/one", "200", `"default";r=1`, ""},
		{"/one", "200", `"default";r=0;t=1`, ""},
		{"/free", "200", `"default";r=0;t=1`, ""},
		{"/bad", "400", "", ""},
	} {
		w := do(h, "GET", s.path, "")
		if got := w.Code; strconv.Itoa(got) != s.code {
			t.Errorf("%s: status %d, want %s", s.path, got, s.code)
		}
		if got := w.Header().Get("RateLimit"); got != s.rate {
			t.Errorf("%s: RateLimit %q, want %q", s.path, got, s.rate)
		}
		if got := w.Header().Get("Retry-After"); got != s.retry {
			t.Errorf("%s: Retry-After %q, want %q", s.path, got, s.retry)
		}
	}
	if hook.allowed["default"] != 5 || hook.denied["default"] != 9 || hook.errors["default"] != 1 || !errors.Is(hook.lastErr, ErrCost) {
		t.Errorf("hook %v (allowed counts tokens: 0+3+0+1+1+0; denied 3+6)", hook)
	}
}

func TestCustomDenyAndErrorHandlers(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	var got Denial
	h := mustNew(t, Config[string]{
		Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Name: "p", Limiter: lim}},
		Deny: func(w http.ResponseWriter, r *http.Request, d Denial) {
			got = d
			w.WriteHeader(http.StatusServiceUnavailable)
		},
		OnError: ServeOnError,
	}).Handler(okHandler)
	do(h, "GET", "/", "", "X-Client", "k")
	w := do(h, "GET", "/", "", "X-Client", "k")
	if w.Code != 503 || !slices.Equal(got.Policies, []string{"p"}) || got.Cost != 1 || got.RetryAfter != 60 || got.Decision.Allowed || w.Header().Get("Retry-After") != "60" {
		t.Errorf("custom deny: %d %+v Retry-After %q", w.Code, got, w.Header().Get("Retry-After"))
	}
	if w := do(h, "GET", "/", ""); w.Code != 200 || w.Header().Get("RateLimit") != "" {
		t.Errorf("ServeOnError: %d %v", w.Code, w.Header())
	}
}

func TestSetLimitChangesHeaders(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(10, time.Minute), 10)
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}}).Handler(okHandler)
	if w := do(h, "GET", "/", "", "X-Client", "k"); w.Header().Get("RateLimit-Policy") != `"default";q=10;w=60` {
		t.Errorf("before: %q", w.Header().Get("RateLimit-Policy"))
	}
	if err := lim.SetRule(atomiclimit.GCRA(gcra.Per(20, time.Second), 20)); err != nil {
		t.Fatal(err)
	}
	if w := do(h, "GET", "/", "", "X-Client", "k"); w.Header().Get("RateLimit-Policy") != `"default";q=20;w=1` {
		t.Errorf("after SetLimit: %q", w.Header().Get("RateLimit-Policy"))
	}
}

func TestReportEvictions(t *testing.T) {
	c := newFakeClock()
	lim := newKeyed[string](t, c, gcra.Per(1, time.Second), 1)
	hook := newCountingHook()
	m := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}, Hook: hook.hook()})
	h := m.Handler(okHandler)
	for _, k := range []string{"a", "b", "c"} {
		do(h, "GET", "/", "", "X-Client", k)
	}
	m.ReportEvictions()
	if len(hook.evicted) != 0 {
		t.Errorf("evictions before any: %v", hook.evicted)
	}
	c.Add(2 * time.Second)
	if n := lim.Sweep(); n != 3 {
		t.Fatalf("swept %d", n)
	}
	m.ReportEvictions()
	m.ReportEvictions() // nothing new
	if hook.evicted["default"] != 3 {
		t.Errorf("evicted %v, want 3", hook.evicted)
	}
}

func TestConfigErrors(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Second), 1)
	for name, c := range map[string]Config[string]{
		"no key":     {Policies: []atomiclimit.Policy[string]{{Limiter: lim}}},
		"no limiter": {Key: Method},
		"bad unit":   {Key: Method, Policies: []atomiclimit.Policy[string]{{Limiter: lim}}, QuotaUnit: "bytes\n"},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
}

// The limiter adds no allocation on the allow path, with or without a hook,
// with or without the headers (issue 25): while r has a precomputed value,
// every header value is a shared field value built once.
func TestAllowPathAllocs(t *testing.T) {
	lim, err := atomiclimit.NewKeyed[netip.Prefix](gcra.Per(1_000_000_000, time.Second), 100, atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ClientIP(IPOptions{TrustedProxies: proxies})
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.0.0.1:1"
	r.Header.Set("X-Forwarded-For", "1.1.1.1, 203.0.113.9")
	// A burst beyond the prebuilt table: r = B−1, a full bucket after one
	// request, is built in advance too.
	big, err := atomiclimit.NewKeyed[netip.Prefix](gcra.Per(1_000_000_000, time.Second), 1<<30, atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	w := newReuseWriter()
	for _, tc := range []struct {
		name    string
		headers HeaderSet
		hook    *atomiclimit.Hook
		want    float64
		lim     *atomiclimit.Keyed[netip.Prefix]
	}{
		{"headers=none", HeadersNone, nil, 0, lim},
		{"headers=none/hook=on", HeadersNone, &atomiclimit.Hook{}, 0, lim},
		{"headers=default", DefaultHeaders, nil, 0, lim},
		{"headers=all", DefaultHeaders | HeaderLegacy, nil, 0, lim},
		{"headers=default/burst=2^30", DefaultHeaders, nil, 0, big},
	} {
		h := mustNew(t, Config[netip.Prefix]{Key: key, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: tc.lim}}, Headers: tc.headers, Hook: tc.hook}).Handler(okHandler)
		h.ServeHTTP(w, r) // create the key
		n := testing.AllocsPerRun(1000, func() {
			w.reset()
			h.ServeHTTP(w, r)
		})
		if w.status != 200 {
			t.Fatalf("%s: status %d", tc.name, w.status)
		}
		if n != tc.want {
			t.Errorf("%s: %v allocs per request, want %v", tc.name, n, tc.want)
		}
	}
}

// Keys on two tiers, alternating: each tier's header fields are built once
// and kept. Before, every request whose quota differed from the last one's
// rebuilt them (a table of up to 129 strings), so the allow path allocated
// on each request.
func TestAllowPathAllocsAcrossTiers(t *testing.T) {
	lim, err := atomiclimit.NewKeyed[string](gcra.Per(1_000_000_000, time.Second), 100, atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := lim.SetKeyRule("paid", atomiclimit.GCRA(gcra.Per(1_000_000_000, time.Second), 120)); err != nil { // r stays within the prebuilt table (tableMax)
		t.Fatal(err)
	}
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Limiter: lim}}}).Handler(okHandler)
	free, paid := httptest.NewRequest("GET", "/", nil), httptest.NewRequest("GET", "/", nil)
	free.Header.Set("X-Client", "free")
	paid.Header.Set("X-Client", "paid")
	w := newReuseWriter()
	h.ServeHTTP(w, free)
	h.ServeHTTP(w, paid)
	n := testing.AllocsPerRun(500, func() {
		w.reset()
		h.ServeHTTP(w, free)
		w.reset()
		h.ServeHTTP(w, paid)
	})
	if n != 0 { // as on one tier
		t.Errorf("%v allocs per pair of requests on two tiers, want 0", n)
	}
	w.reset()
	h.ServeHTTP(w, paid)
	if got := w.Header().Get("RateLimit-Policy"); got != `"default";q=1000000000;w=1` {
		t.Errorf("paid key's policy %q", got)
	}
}

// A kept problem body is DefaultDeny's, byte for byte, with its headers,
// for every Retry-After, slots shared or not (issue 25).
func TestProblemCacheIsDefaultDeny(t *testing.T) {
	c := &problemCache{names: []string{`we"ird\name`}}
	for _, ra := range []int64{-1, 1, 2, 17, 1, 3600, 5000, 15, -1} {
		want := newReuseWriterBody()
		DefaultDeny(want, nil, Denial{Policies: c.names, RetryAfter: ra})
		got := newReuseWriterBody()
		p := c.get(ra)
		writeProblem(got, http.StatusTooManyRequests, p.body, p.length)
		if got.body != want.body || got.status != want.status || fmt.Sprint(got.h) != fmt.Sprint(want.h) {
			t.Errorf("ra %d: kept %d %v %q, DefaultDeny %d %v %q", ra, got.status, got.h, got.body, want.status, want.h, want.body)
		}
	}
}

// bodyWriter is a reuseWriter that keeps the body.
type bodyWriter struct {
	reuseWriter
	body string
}

func newReuseWriterBody() *bodyWriter { return &bodyWriter{reuseWriter: *newReuseWriter()} }

func (w *bodyWriter) Write(b []byte) (int, error) { w.body += string(b); return len(b), nil }

// A denial with the default headers and DefaultDeny allocates nothing once
// its body and RateLimit item are kept (issue 25), for one policy; a second
// policy denying after the first admitted (its give-back) allocates the
// RateLimit list of two items, whose r values change.
func TestDenyPathAllocs(t *testing.T) {
	for _, tc := range []struct {
		name string
		want float64
		pols func() []atomiclimit.Policy[netip.Prefix]
	}{
		{"policies=1", 0, func() []atomiclimit.Policy[netip.Prefix] {
			return []atomiclimit.Policy[netip.Prefix]{{Limiter: newKeyed[netip.Prefix](t, newFakeClock(), gcra.Per(1, time.Hour), 1)}}
		}},
		{"policies=2/denied=second", 1, func() []atomiclimit.Policy[netip.Prefix] {
			lim, err := atomiclimit.NewKeyed[netip.Prefix](gcra.Per(1_000_000_000, time.Second), 100, atomiclimit.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			return []atomiclimit.Policy[netip.Prefix]{{Name: "a", Limiter: lim}, {Name: "b", Limiter: newKeyed[netip.Prefix](t, newFakeClock(), gcra.Per(1, time.Hour), 1)}}
		}},
	} {
		h := mustNew(t, Config[netip.Prefix]{Key: RemoteIP, Policies: tc.pols()}).Handler(okHandler)
		r := httptest.NewRequest("GET", "/", nil)
		w := newReuseWriter()
		h.ServeHTTP(w, r) // the one admission
		h.ServeHTTP(w, r) // the first denial: keeps its values
		n := testing.AllocsPerRun(1000, func() {
			w.reset()
			h.ServeHTTP(w, r)
		})
		if w.status != http.StatusTooManyRequests {
			t.Fatalf("%s: status %d", tc.name, w.status)
		}
		if n != tc.want {
			t.Errorf("%s: %v allocs per denial, want %v", tc.name, n, tc.want)
		}
	}
}
