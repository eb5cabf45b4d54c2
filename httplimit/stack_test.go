package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/stacktest"
)

// Two policies on one key, as "60 per minute and 1,000 per day": a request
// is admitted only when both admit; when the second denies, the first's
// admission is given back, both are listed in the headers, and the body
// names the violated one.
func TestStackedAllOrNothing(t *testing.T) {
	c := newFakeClock()
	minute := newKeyed[string](t, c, gcra.Per(3, time.Minute), 3)
	day := newKeyed[string](t, c, gcra.Per(5, 24*time.Hour), 5)
	hook := newCountingHook()
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Hook: hook.hook(), Policies: []atomiclimit.Policy[string]{
		{Name: "minute", Limiter: minute}, {Name: "day", Limiter: day},
	}}).Handler(okHandler)

	// Three pass both; the fourth is denied by the minute, and the day is
	// not asked to take (it is checked: it would admit).
	for i, want := range []string{
		`"minute";r=2, "day";r=4`,
		`"minute";r=1, "day";r=3`,
		`"minute";r=0;t=20, "day";r=2`,
	} {
		w := do(h, "GET", "/", "", "X-Client", "k")
		if w.Code != 200 || w.Header().Get("RateLimit") != want {
			t.Fatalf("request %d: %d RateLimit %q, want %q", i, w.Code, w.Header().Get("RateLimit"), want)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"minute";q=3;w=60, "day";q=5;w=86400` {
			t.Fatalf("RateLimit-Policy %q", got)
		}
		checkFieldLists(t, w.Header())
	}
	w := do(h, "GET", "/", "", "X-Client", "k")
	if w.Code != 429 || w.Header().Get("RateLimit") != `"minute";r=0;t=20, "day";r=2` || w.Header().Get("Retry-After") != "20" ||
		!strings.Contains(w.Body.String(), `"violated-policies":["minute"]`) {
		t.Fatalf("minute denial: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if r := stacktest.Peek(day, "k", 0).Remaining; r != 2 {
		t.Fatalf("day remaining %d, want 2: charged for a request the minute denied", r)
	}

	// A minute later the minute has room again; after two more, the day is
	// spent. Then the day denies: the minute's admission is given back.
	c.Add(time.Minute)
	for range 2 {
		if w := do(h, "GET", "/", "", "X-Client", "k"); w.Code != 200 {
			t.Fatalf("%d", w.Code)
		}
	}
	before := stacktest.Peek(minute, "k", 0)
	w = do(h, "GET", "/", "", "X-Client", "k")
	if w.Code != 429 || !strings.Contains(w.Body.String(), `"violated-policies":["day"]`) {
		t.Fatalf("day denial: %d %s", w.Code, w.Body)
	}
	if after := stacktest.Peek(minute, "k", 0); after != before {
		t.Fatalf("minute %+v after the day's denial, %+v before: the admission was not given back", after, before)
	}
	if got, want := w.Header().Get("RateLimit"), `"minute";r=1, "day";r=0;t=17220`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if hook.allowed["minute"] != 5 || hook.allowed["day"] != 5 || hook.denied["minute"] != 1 || hook.denied["day"] != 1 {
		t.Errorf("hook %v: the given-back admissions are not Allowed events", hook)
	}
}

// When several policies are violated, every one is named, and Retry-After
// is the longest wait any of them needs; a request one policy can never
// admit gets no Retry-After at all.
func TestStackedEveryViolatedPolicy(t *testing.T) {
	c := newFakeClock()
	a := newKeyed[string](t, c, gcra.Per(1, time.Minute), 1)
	b := newKeyed[string](t, c, gcra.Per(1, time.Hour), 1)
	d := newKeyed[string](t, c, gcra.Per(10, time.Second), 10)
	var got Denial
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{
		{Name: "a", Limiter: a}, {Name: "b", Limiter: b}, {Name: "d", Limiter: d},
	}, Cost: func(r *http.Request) int {
		if r.URL.Path == "/big" {
			return 2
		}
		return 1
	}, Deny: func(w http.ResponseWriter, r *http.Request, den Denial) {
		got = den
		DefaultDeny(w, r, den)
	}}).Handler(okHandler)
	do(h, "GET", "/", "", "X-Client", "k")
	w := do(h, "GET", "/", "", "X-Client", "k")
	if w.Code != 429 || w.Header().Get("Retry-After") != "3600" || !strings.Contains(w.Body.String(), `"violated-policies":["a","b"]`) {
		t.Fatalf("%d Retry-After %q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if got.RetryAfter != 3600 || got.Decision.RetryAfter != time.Hour || len(got.Policies) != 2 {
		t.Fatalf("denial %+v", got)
	}
	if r := stacktest.Peek(d, "k", 0).Remaining; r != 9 {
		t.Fatalf("d remaining %d, want 9", r)
	}
	c.Add(time.Hour)
	w = do(h, "GET", "/big", "", "X-Client", "k")
	if w.Code != 429 || w.Header().Get("Retry-After") != "" || got.RetryAfter != -1 {
		t.Fatalf("cost above a burst: %d Retry-After %q %+v", w.Code, w.Header().Get("Retry-After"), got)
	}
}

// A policy whose limiter cannot give an admission back (the sliding log)
// is asked last whatever its place, so the others' admissions can be given
// back when it denies; two such policies on one request are refused.
func TestStackedLogAskedLast(t *testing.T) {
	c := newFakeClock()
	log, err := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingLog(2, time.Minute), atomiclimit.WithClock(c), atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	other := newKeyed[string](t, c, gcra.Per(1, time.Minute), 1)
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{
		{Name: "log", Limiter: log}, {Name: "gcra", Limiter: other},
	}}).Handler(okHandler)
	do(h, "GET", "/", "", "X-Client", "k")
	w := do(h, "GET", "/", "", "X-Client", "k")
	if w.Code != 429 || !strings.Contains(w.Body.String(), `["gcra"]`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if r := stacktest.Peek(log, "k", 0).Remaining; r != 1 {
		t.Fatalf("log remaining %d, want 1: the log was charged for the gcra policy's denial", r)
	}
	if got := w.Header().Get("RateLimit-Policy"); !strings.HasPrefix(got, `"log"`) {
		t.Fatalf("headers keep the configured order: %q", got)
	}
	log2, _ := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingLog(2, time.Minute))
	defer log2.Close()
	if _, err := New(Config[string]{Key: Header("X"), Policies: []atomiclimit.Policy[string]{{Name: "a", Limiter: log}, {Name: "b", Limiter: log2}}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("two policies that cannot give back: %v", err)
	}
}

// flaky is a KeyedLimiter whose store can fail: with err set, Take and
// Check return it, with the decision an outage policy would give (admit
// for fail open, deny for fail closed).
type flaky struct {
	*atomiclimit.Keyed[string]
	err     error
	open    bool
	blocked chan struct{} // if set, Take waits for ctx to end, then fails with its error
}

func (f *flaky) Take(ctx context.Context, key string, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	if f.blocked != nil {
		close(f.blocked)
		<-ctx.Done()
		return gcra.Decision{}, atomiclimit.Receipt{}, ctx.Err()
	}
	if f.err != nil {
		if f.open {
			return gcra.Decision{Allowed: true}, atomiclimit.Receipt{}, f.err
		}
		return gcra.Decision{RetryAfter: 250 * time.Millisecond}, atomiclimit.Receipt{}, f.err
	}
	return f.Keyed.Take(ctx, key, n)
}

func (f *flaky) Peek(ctx context.Context, key string, n int) (gcra.Decision, error) {
	if f.err != nil {
		return gcra.Decision{}, f.err
	}
	return f.Keyed.Peek(ctx, key, n)
}

// An outage is not a quota: a limiter that fails closed gets 503 with its
// wait as Retry-After and no RateLimit item of its own, the hook's Error
// (not Denied), and the policies before it given back. One that fails open
// serves the request, again without an item for the policy it could not
// decide.
func TestStackedOutage(t *testing.T) {
	c := newFakeClock()
	local := newKeyed[string](t, c, gcra.Per(10, time.Minute), 10)
	remote := &flaky{Keyed: newKeyed[string](t, c, gcra.Per(10, time.Minute), 10), err: errors.New("store down")}
	hook := newCountingHook()
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Hook: hook.hook(), Policies: []atomiclimit.Policy[string]{
		{Name: "local", Limiter: local}, {Name: "remote", Limiter: remote},
	}}).Handler(okHandler)

	w := do(h, "GET", "/", "", "X-Client", "k")
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), `"status":503`) ||
		!strings.Contains(w.Body.String(), "could not be checked") {
		t.Fatalf("fail closed: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if got := w.Header().Get("RateLimit"); got != `"local";r=10` {
		t.Fatalf("fail closed: RateLimit %q (the local admission given back, no item for remote)", got)
	}
	if hook.errors["remote"] != 1 || hook.denied["remote"] != 0 || hook.allowed["local"] != 0 {
		t.Fatalf("fail closed: hook %v", hook)
	}
	if r := stacktest.Peek(local, "k", 0).Remaining; r != 10 {
		t.Fatalf("local charged during the outage: remaining %d", r)
	}

	remote.open = true
	w = do(h, "GET", "/", "", "X-Client", "k")
	if w.Code != 200 || w.Header().Get("RateLimit") != `"local";r=9` || w.Header().Get("RateLimit-Policy") != `"local";q=10;w=60, "remote";q=10;w=60` {
		t.Fatalf("fail open: %d %v", w.Code, w.Header())
	}
	if hook.errors["remote"] != 2 || hook.allowed["remote"] != 0 || hook.allowed["local"] != 1 {
		t.Fatalf("fail open: hook %v", hook)
	}
}

// A caller that gives up while a limiter decides is not an outage: nothing
// is served, the hook records no error, and what the policies before took
// is given back.
func TestStackedCallerGone(t *testing.T) {
	c := newFakeClock()
	local := newKeyed[string](t, c, gcra.Per(10, time.Minute), 10)
	remote := &flaky{Keyed: newKeyed[string](t, c, gcra.Per(10, time.Minute), 10), blocked: make(chan struct{})}
	hook := newCountingHook()
	served := false
	h := mustNew(t, Config[string]{Key: Header("X-Client"), Hook: hook.hook(), Policies: []atomiclimit.Policy[string]{
		{Name: "local", Limiter: local}, {Name: "remote", Limiter: remote},
	}}).Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, "GET", "/", nil)
	r.Header.Set("X-Client", "k")
	go func() {
		<-remote.blocked
		cancel()
	}()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if served || w.Code != statusClientClosed || w.Body.Len() != 0 {
		t.Fatalf("served %v, %d %q", served, w.Code, w.Body)
	}
	if len(hook.errors) != 0 || len(hook.allowed) != 0 || len(hook.denied) != 0 {
		t.Fatalf("hook %v", hook)
	}
	if r := stacktest.Peek(local, "k", 0).Remaining; r != 10 {
		t.Fatalf("local remaining %d: charged for a request nobody received", r)
	}
}

// Nested middlewares (one per route group, one for the server) extend each
// other's fields instead of overwriting them, and Retry-After is the longer
// wait.
func TestNestedMiddlewaresExtendFields(t *testing.T) {
	c := newFakeClock()
	outer := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Name: "server", Limiter: newKeyed[string](t, c, gcra.Per(10, time.Minute), 10)}}})
	inner := mustNew(t, Config[string]{Key: Header("X-Client"), Policies: []atomiclimit.Policy[string]{{Name: "api", Limiter: newKeyed[string](t, c, gcra.Per(1, time.Minute), 1)}}})
	h := outer.Handler(inner.Handler(okHandler))
	w := do(h, "GET", "/", "", "X-Client", "k")
	if got := w.Header().Get("RateLimit"); got != `"server";r=9, "api";r=0;t=60` {
		t.Fatalf("RateLimit %q", got)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"server";q=10;w=60, "api";q=1;w=60` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	checkFieldLists(t, w.Header())

	// The legacy headers hold one integer each: the set with the fewest
	// remaining, not a list.
	outerAll := mustNew(t, Config[string]{Key: Header("X-Client"), Headers: DefaultHeaders | HeaderLegacy, Policies: []atomiclimit.Policy[string]{{Name: "server", Limiter: newKeyed[string](t, c, gcra.Per(10, time.Minute), 10)}}})
	innerAll := mustNew(t, Config[string]{Key: Header("X-Client"), Headers: DefaultHeaders | HeaderLegacy, Policies: []atomiclimit.Policy[string]{{Name: "api", Limiter: newKeyed[string](t, c, gcra.Per(5, time.Minute), 5)}}})
	w = do(outerAll.Handler(innerAll.Handler(okHandler)), "GET", "/", "", "X-Client", "k")
	if got := fmt.Sprint(w.Header().Values("X-Ratelimit-Limit"), w.Header().Values("X-Ratelimit-Remaining")); got != "[5] [4]" {
		t.Fatalf("legacy headers %s, want the inner policy's alone (fewest remaining)", got)
	}
}

// checkFieldLists checks RateLimit-Policy and RateLimit as Structured
// Field Lists (RFC 9651) of several items: every RateLimit item names a
// policy listed in RateLimit-Policy, each name once; every item passes the
// single-item checks; t is sent exactly when r = 0.
func checkFieldLists(t *testing.T, h http.Header) (policies, rates []sfItem) {
	t.Helper()
	policies, err := parseSFList(h.Get("RateLimit-Policy"))
	if err != nil {
		t.Fatalf("RateLimit-Policy %q: %v", h.Get("RateLimit-Policy"), err)
	}
	rates, err = parseSFList(h.Get("RateLimit"))
	if err != nil {
		t.Fatalf("RateLimit %q: %v", h.Get("RateLimit"), err)
	}
	listed := map[any]bool{}
	for _, p := range policies {
		_, isString := p.value.(string)
		q, hasQ := p.param("q")
		w, hasW := p.param("w")
		if !isString || !hasQ || q.(int64) < 0 || hasW && w.(int64) < 1 {
			t.Errorf("RateLimit-Policy item %+v", p)
		}
		if listed[p.value] {
			t.Errorf("policy %v listed twice", p.value)
		}
		listed[p.value] = true
	}
	seen := map[any]bool{}
	for _, r := range rates {
		if !listed[r.value] || seen[r.value] {
			t.Errorf("RateLimit item %v: not a listed policy, or twice", r.value)
		}
		seen[r.value] = true
		rv, ok := r.param("r")
		if !ok || rv.(int64) < 0 {
			t.Errorf("RateLimit item %+v: no r", r)
			continue
		}
		if tv, hasT := r.param("t"); hasT != (rv.(int64) == 0) || hasT && tv.(int64) < 1 {
			t.Errorf("RateLimit item %+v: t must be sent exactly when r = 0, and be positive", r)
		}
	}
	return policies, rates
}

func TestStackConfigErrors(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	for name, c := range map[string]Config[string]{
		"no policy":      {Key: Header("X")},
		"unnamed of two": {Key: Header("X"), Policies: []atomiclimit.Policy[string]{{Name: "a", Limiter: lim}, {Limiter: lim}}},
		"same name":      {Key: Header("X"), Policies: []atomiclimit.Policy[string]{{Name: "a", Limiter: lim}, {Name: "a", Limiter: lim}}},
		"route same name": {Key: Header("X"), Mux: http.NewServeMux(), Policies: []atomiclimit.Policy[string]{{Name: "a", Limiter: lim}},
			Routes: map[string]atomiclimit.Policy[string]{"/x": {Name: "a", Limiter: lim}}},
		"nine": {Key: Header("X"), Policies: func() (ps []atomiclimit.Policy[string]) {
			for _, n := range "abcdefghi" {
				ps = append(ps, atomiclimit.Policy[string]{Name: string(n), Limiter: lim})
			}
			return ps
		}()},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A request admitted by two policies allocates nothing with the headers
// off, and one value with the default headers: the RateLimit list, whose r
// values change per request, built in one allocation (RateLimit-Policy's
// list is built once per combination of quotas).
func TestStackedAllowPathAllocs(t *testing.T) {
	for _, tc := range []struct {
		set  HeaderSet
		want float64
	}{{HeadersNone, 0}, {DefaultHeaders, 1}} {
		lim := func() *atomiclimit.Keyed[string] {
			k, err := atomiclimit.NewKeyed[string](gcra.Per(1_000_000_000, time.Second), 100, atomiclimit.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		h := mustNew(t, Config[string]{Key: Header("X-Client"), Headers: tc.set, Policies: []atomiclimit.Policy[string]{
			{Name: "a", Limiter: lim()}, {Name: "b", Limiter: lim()}}}).Handler(okHandler)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Client", "k")
		w := newReuseWriter()
		h.ServeHTTP(w, r)
		n := testing.AllocsPerRun(500, func() {
			w.reset()
			h.ServeHTTP(w, r)
		})
		if w.status != 200 || n != tc.want {
			t.Errorf("headers %#x: %d, %v allocs per request, want %v", uint8(tc.set), w.status, n, tc.want)
		}
	}
}

// The policies a user configured, validated: a lone unnamed policy is
// "default", every policy gets the unit, and the errors name the policy
// (New wraps them in ErrConfig).
func TestPoliciesAdd(t *testing.T) {
	g := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	ps := policies[string]{unit: "requests"}
	pols, err := ps.addList("Policies", []atomiclimit.Policy[string]{{Limiter: g}})
	if err != nil || len(pols) != 1 || pols[0].Name != "default" || pols[0].problems.names[0] != "default" {
		t.Fatalf("lone policy: %v %+v", err, pols)
	}
	if p := pols[0].fields.Policy(g.Quota("k")); p != `"default";q=1;w=60;qu="requests"` {
		t.Errorf("fields %q", p)
	}
	if pols, err := ps.addList("Routes", nil); pols != nil || err != nil {
		t.Errorf("no policies: %v %v", pols, err)
	}
	for _, tc := range []struct {
		ps   []atomiclimit.Policy[string]
		want string
	}{
		{[]atomiclimit.Policy[string]{{Name: "a", Limiter: g}, {Limiter: g}}, "Policies[1] has no name"},
		{[]atomiclimit.Policy[string]{{Name: "a"}}, "Policies[0] has no Limiter"},
		{[]atomiclimit.Policy[string]{{Name: "é", Limiter: g}}, `Policies[0] name "é": only printable ASCII can be a structured-field string`},
	} {
		if _, err := ps.addList("Policies", tc.ps); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %s", tc.ps, err, tc.want)
		}
	}
	two, _ := ps.addList("Policies", []atomiclimit.Policy[string]{{Name: "a", Limiter: g}, {Name: "a", Limiter: g}})
	if _, err := newStack("Policies", two); !errors.Is(err, atomiclimit.ErrStack) || !strings.HasSuffix(err.Error(), `two policies named "a" for the same requests (Policies)`) {
		t.Errorf("two named a: %v", err)
	}
	if err := checkString("QuotaUnit", "bytes\n"); err == nil || !strings.HasPrefix(err.Error(), `QuotaUnit "bytes\n"`) {
		t.Errorf("checkString: %v", err)
	}
}

// A route's stack is the door's policies and then the route's own, each
// route its own list; the door's stack is left as it was, and a policy
// keeps its fields and bodies whatever stacks it is in.
func TestRouteStacks(t *testing.T) {
	g := newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)
	mux := http.NewServeMux()
	m := mustNew(t, Config[string]{Key: Header("X"), Mux: mux,
		Policies: []atomiclimit.Policy[string]{{Name: "a", Limiter: g}, {Name: "b", Limiter: g}},
		Routes:   map[string]atomiclimit.Policy[string]{"/r1": {Name: "r1", Limiter: g}, "/r2": {Name: "r2", Limiter: g}},
	})
	s1, s2 := m.routes["/r1"], m.routes["/r2"]
	if m.def.Len() != 2 || s1.Len() != 3 || s2.Len() != 3 || s1.Policy(2).Name != "r1" || s2.Policy(2).Name != "r2" {
		t.Fatalf("stacks: %d, %d, %d policies", m.def.Len(), s1.Len(), s2.Len())
	}
	for j := range 2 {
		if s1.fields[j] != m.def.fields[j] || s2.problems[j] != m.def.problems[j] {
			t.Errorf("policy %d: its fields or bodies differ between stacks", j)
		}
	}
	only := mustNew(t, Config[string]{Key: Header("X"), Mux: mux, Routes: map[string]atomiclimit.Policy[string]{"/r": {Name: "r", Limiter: g}}})
	if only.def != nil || only.routes["/r"].Len() != 1 {
		t.Errorf("routes alone: %v %v", only.def, only.routes["/r"])
	}
}

// evicting is a limiter whose evictions a test sets.
type evicting struct {
	*atomiclimit.Keyed[string]
	n atomic.Uint64
}

func (e *evicting) Stats() atomiclimit.Stats { return atomiclimit.Stats{Evicted: e.n.Load()} }

// plainLimiter hides Keyed's Stats.
type plainLimiter struct{ k *atomiclimit.Keyed[string] }

func (p plainLimiter) Take(ctx context.Context, key string, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	return p.k.Take(ctx, key, n)
}
func (p plainLimiter) Peek(ctx context.Context, key string, n int) (gcra.Decision, error) {
	return p.k.Peek(ctx, key, n)
}
func (p plainLimiter) Refund(ctx context.Context, key string, n int, r atomiclimit.Receipt) (bool, error) {
	return p.k.Refund(ctx, key, n, r)
}
func (p plainLimiter) Quota(key string) atomiclimit.Quota { return p.k.Quota(key) }

// ReportEvictions reports every eviction exactly once, however many
// goroutines call it while evictions go on; a limiter without Stats, a nil
// hook and a hook without Evicted report nothing.
func TestReportEvictionsConcurrent(t *testing.T) {
	ev := &evicting{Keyed: newKeyed[string](t, newFakeClock(), gcra.Per(1, time.Minute), 1)}
	var reported atomic.Int64
	var mu sync.Mutex
	names := map[string]int{}
	h := &atomiclimit.Hook{Evicted: func(p string, n int) {
		reported.Add(int64(n))
		mu.Lock()
		names[p]++
		mu.Unlock()
	}}
	m := mustNew(t, Config[string]{Key: Header("X"), Hook: h,
		Policies: []atomiclimit.Policy[string]{{Name: "ev", Limiter: ev}, {Name: "plain", Limiter: plainLimiter{ev.Keyed}}}})
	m.pols.reportEvictions(nil)                 // no hook: nothing, no panic
	m.pols.reportEvictions(&atomiclimit.Hook{}) // no Evicted: nothing, no panic
	const workers, rounds = 4, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if w == 0 {
					ev.n.Add(3)
				}
				m.ReportEvictions()
			}
		}()
	}
	wg.Wait()
	m.ReportEvictions()
	if got, want := reported.Load(), int64(3*rounds); got != want || names["plain"] != 0 {
		t.Errorf("reported %d evictions, want %d; by policy %v", got, want, names)
	}
}
