package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// trackedBody is a response body that says whether it was read to its end
// and closed.
type trackedBody struct {
	io.Reader
	mu             sync.Mutex
	drained, shut  bool
	bodyOfResponse string
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err == io.EOF {
		b.mu.Lock()
		b.drained = true
		b.mu.Unlock()
	}
	return n, err
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.shut = true
	b.mu.Unlock()
	return nil
}

func (b *trackedBody) state() (drained, closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.drained, b.shut
}

// provider is a base transport that answers in memory: the i-th request
// (from 0) gets answer(i, r). It records what each request sent.
type provider struct {
	mu     sync.Mutex
	answer func(i int, r *http.Request) *http.Response
	sent   []string // "METHOD host body" per request
	bodies []*trackedBody
}

func (p *provider) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	p.mu.Lock()
	i := len(p.sent)
	p.sent = append(p.sent, strings.TrimSpace(r.Method+" "+r.URL.Host+" "+string(body)))
	p.mu.Unlock()
	resp := p.answer(i, r)
	if tb, ok := resp.Body.(*trackedBody); ok {
		p.mu.Lock()
		p.bodies = append(p.bodies, tb)
		p.mu.Unlock()
	}
	resp.Request = r
	return resp, nil
}

func (p *provider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sent)
}

// answer is a response of status with headers given as "Name: value"
// pairs, and a body that reports what was done with it.
func answer(status int, headers ...string) *http.Response {
	h := http.Header{}
	for _, kv := range headers {
		k, v, _ := strings.Cut(kv, ": ")
		h.Add(k, v)
	}
	body := fmt.Sprintf("answer %d", status)
	return &http.Response{StatusCode: status, Header: h, Body: &trackedBody{Reader: strings.NewReader(body), bodyOfResponse: body}}
}

// fakeTimer replaces the transport's timers for the test: each wait is
// recorded and ends at once.
type fakeTimer struct {
	mu    sync.Mutex
	waits []time.Duration
}

func fakeTimers(t *testing.T) *fakeTimer {
	ts := &fakeTimer{}
	testTimer = func(d time.Duration) (<-chan time.Time, func() bool) {
		ts.mu.Lock()
		ts.waits = append(ts.waits, d)
		ts.mu.Unlock()
		testSkew.Add(int64(d)) // the time passes for the holds
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c, func() bool { return true }
	}
	t.Cleanup(func() { testTimer = nil; testSkew.Store(0) })
	return ts
}

func (ts *fakeTimer) all() []time.Duration {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.waits)
}

// events records a hook's events as strings, waits rounded to seconds.
type events struct {
	mu  sync.Mutex
	all []string
}

func (e *events) add(format string, a ...any) {
	e.mu.Lock()
	e.all = append(e.all, fmt.Sprintf(format, a...))
	e.mu.Unlock()
}

func (e *events) hook() *atomiclimit.Hook {
	return &atomiclimit.Hook{
		Allowed: func(p string, n int) { e.add("allowed %s %d", p, n) },
		Denied:  func(p string, n int, d time.Duration) { e.add("denied %s %d %v", p, n, d) },
		Waited:  func(p string, n int, d time.Duration) { e.add("waited %s %d %v", p, n, d.Round(time.Second)) },
		Held:    func(p string, d time.Duration) { e.add("held %s %v", p, d) },
		Retried: func(p string, attempt int) { e.add("retried %s %d", p, attempt) },
		Error:   func(p string, err error) { e.add("error %s %v", p, err) },
	}
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.all)
}

func mustTransport[K comparable](t testing.TB, c TransportConfig[K]) *Transport[K] {
	t.Helper()
	tr, err := NewTransport(c)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func get(t testing.TB, c *http.Client, url string) *http.Response {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A 429 with Retry-After holds its host: the request is sent again once
// the hold is over, and the caller gets the provider's second answer; the
// refusal it did not get was read and closed. The events say so.
func TestTransportHoldsAndRetries(t *testing.T) {
	ts := fakeTimers(t)
	p := &provider{answer: func(i int, _ *http.Request) *http.Response {
		if i == 0 {
			return answer(http.StatusTooManyRequests, "Retry-After: 2")
		}
		return answer(http.StatusOK)
	}}
	var ev events
	c := &http.Client{Transport: mustTransport(t, TransportConfig[string]{Base: p, Retries: 1, Hook: ev.hook()})}
	resp := get(t, c, "http://api.example/a")
	if resp.StatusCode != http.StatusOK || p.count() != 2 {
		t.Fatalf("status %d after %d sends, want 200 after 2", resp.StatusCode, p.count())
	}
	if drained, closed := p.bodies[0].state(); !drained || !closed {
		t.Errorf("the refusal's body: read %v, closed %v; want both", drained, closed)
	}
	if drained, closed := p.bodies[1].state(); drained || closed {
		t.Errorf("the caller's body was touched: read %v, closed %v", drained, closed)
	}
	if w := ts.all(); len(w) != 1 || w[0] > 2*time.Second || w[0] < 1900*time.Millisecond {
		t.Errorf("waits %v, want the hold's 2s", w)
	}
	if got, want := ev.list(), []string{"held provider 2s", "waited provider 1 2s", "retried provider 1"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// A hold holds every request of the key, and no other: the caller that was
// refused without a retry gets the refusal as it was sent; the next
// request to the host waits, one to another host does not; a hold longer
// than the longest wait fails at once, unsent, with ErrDeadline.
func TestTransportHoldsTheKey(t *testing.T) {
	ts := fakeTimers(t)
	refusal := answer(http.StatusServiceUnavailable, "Retry-After: 5")
	p := &provider{answer: func(i int, _ *http.Request) *http.Response {
		if i == 0 {
			return refusal
		}
		return answer(http.StatusOK)
	}}
	c := &http.Client{Transport: mustTransport(t, TransportConfig[string]{Base: p})}
	if resp := get(t, c, "http://api.example/"); resp != refusal {
		t.Fatalf("the caller got %v, not the provider's refusal", resp.Status)
	}
	if drained, closed := p.bodies[0].state(); drained || closed {
		t.Errorf("the caller's refusal was touched: read %v, closed %v", drained, closed)
	}
	get(t, c, "http://other.example/")
	if w := ts.all(); len(w) != 0 {
		t.Errorf("another host waited %v", w)
	}
	get(t, c, "http://api.example/")
	if w := ts.all(); len(w) != 1 || w[0] < 4900*time.Millisecond || w[0] > 5*time.Second {
		t.Errorf("the held host waited %v, want the 5s hold", w)
	}

	// Hold again, with a longest wait of a second: the next request fails
	// at once, unsent, and its body is closed.
	p.answer = func(int, *http.Request) *http.Response { return answer(http.StatusTooManyRequests, "Retry-After: 60") }
	get(t, c, "http://api.example/")
	c.Transport.(*Transport[string]).maxWait = time.Second
	sent := p.count()
	body := &trackedBody{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest("POST", "http://api.example/", body)
	_, err := c.Do(req)
	if !errors.Is(err, atomiclimit.ErrDeadline) || p.count() != sent {
		t.Errorf("a request held past its longest wait: %v, %d sent; want ErrDeadline, none", err, p.count()-sent)
	}
	if _, closed := body.state(); !closed {
		t.Error("the unsent request's body was not closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Transport.(*Transport[string]).maxWait = 0
	req, _ = http.NewRequestWithContext(ctx, "GET", "http://api.example/", nil)
	if _, err := c.Do(req); !errors.Is(err, atomiclimit.ErrDeadline) || p.count() != sent {
		t.Errorf("a request held past its deadline: %v", err)
	}
}

// A RateLimit field that says the quota is spent holds the key until its
// reset, on any response (the caller gets it); a 503 with an HTTP date is
// measured from the response's Date; a refusal without a time to wait is
// neither held nor retried.
func TestTransportReadsTheFields(t *testing.T) {
	ts := fakeTimers(t)
	date := time.Now().Add(-time.Hour).UTC() // the provider's clock is an hour behind
	answers := []*http.Response{
		answer(http.StatusOK, `RateLimit: "hour";r=0;t=3, "day";r=10`),
		answer(http.StatusOK),
		answer(http.StatusServiceUnavailable, "Date: "+date.Format(http.TimeFormat), "Retry-After: "+date.Add(7*time.Second).Format(http.TimeFormat)),
		answer(http.StatusOK),
		answer(http.StatusTooManyRequests),
	}
	p := &provider{answer: func(i int, _ *http.Request) *http.Response { return answers[i] }}
	c := &http.Client{Transport: mustTransport(t, TransportConfig[string]{Base: p, Retries: 3})}
	for range 2 {
		if resp := get(t, c, "http://api.example/"); resp.StatusCode != http.StatusOK {
			t.Fatal(resp.Status)
		}
	}
	if w := ts.all(); len(w) != 1 || w[0] > 3*time.Second || w[0] < 2900*time.Millisecond {
		t.Errorf("waits %v, want the 3s the field named", w)
	}
	if resp := get(t, c, "http://api.example/"); resp.StatusCode != http.StatusOK || p.count() != 4 {
		t.Errorf("the 503 was not retried: %v after %d", resp.Status, p.count())
	}
	if w := ts.all(); len(w) != 2 || w[1] > 7*time.Second || w[1] < 6900*time.Millisecond {
		t.Errorf("waits %v, want 7s after the Date", w)
	}
	if resp := get(t, c, "http://api.example/"); resp.StatusCode != http.StatusTooManyRequests || p.count() != 5 {
		t.Errorf("a 429 without a wait: %v after %d sends, want it as it came", resp.Status, p.count())
	}
}

// What is sent again: a request whose body can be had again (GetBody),
// or without a body and of an idempotent method, or that Replayable
// allows; the others get the refusal. Retries bound the sends.
func TestTransportReplays(t *testing.T) {
	fakeTimers(t)
	refuse := func(int, *http.Request) *http.Response { return answer(http.StatusTooManyRequests, "Retry-After: 1") }
	newReq := func(method string, body io.Reader, header ...string) *http.Request {
		r, _ := http.NewRequest(method, "http://api.example/", body)
		for _, kv := range header {
			k, v, _ := strings.Cut(kv, ": ")
			r.Header.Set(k, v)
		}
		return r
	}
	for _, c := range []struct {
		name       string
		req        *http.Request
		replayable func(*http.Request) bool
		sends      int
	}{
		{"GET", newReq("GET", nil), nil, 3},
		{"PUT without a body", newReq("PUT", nil), nil, 3},
		{"POST with GetBody", newReq("POST", strings.NewReader("form")), nil, 3},
		{"POST without a body", newReq("POST", nil), nil, 1},
		{"POST with Idempotency-Key", newReq("POST", nil, "Idempotency-Key: 7"), nil, 3},
		{"POST with a body read once", newReq("POST", io.MultiReader(strings.NewReader("x"))), nil, 1},
		{"POST allowed", newReq("POST", nil), func(*http.Request) bool { return true }, 3},
		{"GET refused", newReq("GET", nil), func(*http.Request) bool { return false }, 1},
		{"body read once, allowed", newReq("POST", io.MultiReader(strings.NewReader("x"))), func(*http.Request) bool { return true }, 1},
	} {
		p := &provider{answer: refuse}
		tr := mustTransport(t, TransportConfig[string]{Base: p, Retries: 2, Replayable: c.replayable})
		resp, err := tr.RoundTrip(c.req)
		if err != nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s: %v %v", c.name, resp, err)
		}
		if p.count() != c.sends {
			t.Errorf("%s: %d sends, want %d", c.name, p.count(), c.sends)
		}
		if c.name == "POST with GetBody" && !slices.Equal(p.sent, []string{"POST api.example form", "POST api.example form", "POST api.example form"}) {
			t.Errorf("%s: sent %q: want the body each time", c.name, p.sent)
		}
		closed := 0
		for _, b := range p.bodies {
			if drained, shut := b.state(); drained && shut {
				closed++
			}
		}
		if closed != c.sends-1 {
			t.Errorf("%s: %d refusals read and closed, want %d", c.name, closed, c.sends-1)
		}
	}
}

// A hold that would pass the request's longest wait is not waited for a
// retry: the caller gets the refusal at once.
func TestTransportRetryWithinTheLongestWait(t *testing.T) {
	ts := fakeTimers(t)
	p := &provider{answer: func(int, *http.Request) *http.Response { return answer(http.StatusTooManyRequests, "Retry-After: 30") }}
	c := &http.Client{Transport: mustTransport(t, TransportConfig[string]{Base: p, Retries: 3, MaxWait: 10 * time.Second})}
	if resp := get(t, c, "http://api.example/"); resp.StatusCode != http.StatusTooManyRequests || p.count() != 1 || len(ts.all()) != 0 {
		t.Errorf("%v after %d sends and waits %v: want the refusal at once", resp.Status, p.count(), ts.all())
	}
}

// The policies: a request waits until they admit it, and fails at once,
// unsent, when it cannot within the longest wait; the hook hears the
// policies' events and the transport's. The key is the host unless Key
// says otherwise, the cost 1 unless Cost does.
func TestTransportPolicies(t *testing.T) {
	clk := newFakeClock()
	lim := newKeyed[string](t, clk, gcra.Every(time.Second), 2)
	p := &provider{answer: func(int, *http.Request) *http.Response { return answer(http.StatusOK) }}
	var ev events
	c := &http.Client{Transport: mustTransport(t, TransportConfig[string]{
		Base: p, Policies: []atomiclimit.Policy[string]{{Name: "second", Limiter: lim}}, MaxWait: 100 * time.Millisecond, Hook: ev.hook(),
		Cost: func(r *http.Request) int { return len(r.URL.Query()["n"]) + 1 },
	})}
	get(t, c, "http://a.example/")
	get(t, c, "http://a.example/")
	_, err := c.Get("http://a.example/")
	if !errors.Is(err, atomiclimit.ErrDeadline) || p.count() != 2 {
		t.Errorf("a third request within the second: %v after %d sends; want ErrDeadline, unsent", err, p.count())
	}
	if !strings.Contains(fmt.Sprint(err), `httplimit: not sent: atomiclimit: wait would exceed the deadline: policy "second" admits 1 in 1s`) {
		t.Errorf("the error says %q", err)
	}
	get(t, c, "http://b.example/?n") // another host, its own bucket: a cost of 2
	if _, err := c.Get("http://b.example/"); !errors.Is(err, atomiclimit.ErrDeadline) {
		t.Errorf("b's bucket after a cost of 2: %v", err)
	}
	if _, err := c.Get("http://b.example/?n&n&n"); !errors.Is(err, atomiclimit.ErrExceedsBurst) {
		t.Errorf("a cost above the burst: %v", err)
	}
	want := []string{"allowed second 1", "allowed second 1", "denied second 1 1s", "allowed second 2", "denied second 1 1s", "denied second 4 " + gcra.Never.String()}
	if got := ev.list(); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}

	// A key of another type needs a Key; a negative cost fails.
	if _, err := NewTransport(TransportConfig[netip.Prefix]{}); !errors.Is(err, ErrConfig) {
		t.Errorf("no Key for a Prefix key: %v", err)
	}
	for _, bad := range []TransportConfig[string]{{MaxWait: -1}, {Retries: -1}, {Policies: []atomiclimit.Policy[string]{{Name: "x"}}}} {
		if _, err := NewTransport(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", bad, err)
		}
	}
	neg := &http.Client{Transport: mustTransport(t, TransportConfig[string]{Base: p, Cost: func(*http.Request) int { return -1 }})}
	if _, err := neg.Get("http://a.example/"); !errors.Is(err, ErrCost) {
		t.Errorf("a negative cost: %v", err)
	}
	noKey := &http.Client{Transport: mustTransport(t, TransportConfig[string]{Base: p, Key: Header("X-Tenant")})}
	if _, err := noKey.Get("http://a.example/"); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key: %v", err)
	}
}

// holdingLimiter is a limiter that takes holds (as redislimit's does),
// recording them.
type holdingLimiter struct {
	*atomiclimit.Keyed[string]
	mu    sync.Mutex
	holds []string
}

func (h *holdingLimiter) Hold(_ context.Context, key string, d time.Duration) error {
	h.mu.Lock()
	h.holds = append(h.holds, fmt.Sprintf("%s %v", key, d.Round(time.Second)))
	h.mu.Unlock()
	return nil
}

// A policy's limiter that takes holds is given the provider's hold once
// per reset: the refusals of requests in flight together, which name the
// same reset within a second, do not call it again; a later reset does.
func TestTransportHoldsThePolicies(t *testing.T) {
	clk := newFakeClock()
	lim := &holdingLimiter{Keyed: newKeyed[string](t, clk, gcra.Every(time.Nanosecond), 1000)}
	var ev events
	tr := mustTransport(t, TransportConfig[string]{Policies: []atomiclimit.Policy[string]{{Limiter: lim}}, Hook: ev.hook()})
	for _, ra := range []string{"10", "10", "10", "12"} {
		tr.listen(context.Background(), "api.example", answer(http.StatusTooManyRequests, "Retry-After: "+ra))
	}
	if want := []string{"api.example 10s", "api.example 12s"}; !slices.Equal(lim.holds, want) {
		t.Errorf("holds %q, want %q", lim.holds, want)
	}
	if want := []string{"held provider 10s", "held provider 12s"}; !slices.Equal(ev.list(), want) {
		t.Errorf("events %q, want %q", ev.list(), want)
	}
}

func mustRequest(method, url string) *http.Request {
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		panic(err)
	}
	return r
}

// stubBase answers every request with the same response, allocating
// nothing: the base the transport's own cost is measured over.
type stubBase struct{ resp *http.Response }

func (s *stubBase) RoundTrip(*http.Request) (*http.Response, error) { return s.resp, nil }

func newStubBase() *stubBase {
	return &stubBase{resp: &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}}
}

// An admitted request allocates nothing beyond what the base transport
// does: without policies, with one in process, and with two.
func TestTransportAllocs(t *testing.T) {
	many := func() *atomiclimit.Keyed[string] {
		k, _ := atomiclimit.NewKeyed[string](gcra.Every(time.Nanosecond), 1_000_000, atomiclimit.WithSweepInterval(0))
		return k
	}
	req := mustRequest("GET", "http://api.example/")
	for _, pols := range [][]atomiclimit.Policy[string]{
		nil,
		{{Name: "a", Limiter: many()}},
		{{Name: "a", Limiter: many()}, {Name: "b", Limiter: many()}},
	} {
		tr := mustTransport(t, TransportConfig[string]{Base: newStubBase(), Policies: pols, MaxWait: time.Second})
		if allocs := testing.AllocsPerRun(1000, func() {
			if _, err := tr.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("%d policies: %v allocations per request, want 0", len(pols), allocs)
		}
	}
}

// The transport starts no goroutine of its own: concurrent requests
// through it, waiting on a policy, leave none behind.
func TestTransportConcurrent(t *testing.T) {
	const goroutines, each = 16, 20
	T, B := 100*time.Microsecond, 2
	lim, err := atomiclimit.NewKeyed[string](gcra.Every(T), B, atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{answer: func(int, *http.Request) *http.Response { return answer(http.StatusOK) }}
	tr := mustTransport(t, TransportConfig[string]{Base: p, Policies: []atomiclimit.Policy[string]{{Name: "a", Limiter: lim}}})
	start := time.Now()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				resp, err := tr.RoundTrip(mustRequest("GET", "http://api.example/"))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := p.count(); n != goroutines*each {
		t.Fatalf("%d sent, want %d", n, goroutines*each)
	}
	// Sent in order at one per T after the burst: no faster.
	if min := time.Duration(goroutines*each-B) * T; elapsed < min {
		t.Errorf("%d requests in %v, faster than the policy's %v", goroutines*each, elapsed, min)
	}
}

// End to end: a 429 whose RateLimit field says the quota is spent for a
// very long time must hold the key (and not be retried at once).
func TestTransportHoldsAResetBeyondADuration(t *testing.T) {
	fakeTimers(t)
	p := &provider{answer: func(i int, _ *http.Request) *http.Response {
		if i == 0 {
			return answer(http.StatusTooManyRequests, `Ratelimit: "default";r=0;t=10000000000`)
		}
		return answer(http.StatusOK)
	}}
	tr := mustTransport(t, TransportConfig[string]{Base: p, Retries: 1, MaxWait: time.Minute})
	resp, err := (&http.Client{Transport: tr}).Get("http://api.example/a")
	if err == nil {
		resp.Body.Close()
	}
	if p.count() != 1 {
		t.Errorf("sent %d times; a hold of (capped) a year must not be retried within a minute's MaxWait", p.count())
	}
	if _, _, held := tr.holds.until("api.example"); !held {
		t.Errorf("the key is not held after the provider said its quota is spent")
	}
}

// A hold that a concurrent refusal extends while a request waits out the
// key's earlier hold must hold that request too: it must not be sent while
// a known hold is active.
func TestTransportWaitsForAHoldExtendedWhileItWaits(t *testing.T) {
	var tr *Transport[string]
	first := true
	testTimer = func(d time.Duration) (<-chan time.Time, func() bool) {
		if first {
			first = false
			// Another request's 429 arrives meanwhile: Retry-After 30.
			tr.hold(context.Background(), "api.example", 30*time.Second)
		}
		testSkew.Add(int64(d))
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c, func() bool { return true }
	}
	t.Cleanup(func() { testTimer = nil; testSkew.Store(0) })
	var sentWhileHeld []time.Duration
	p := &provider{answer: func(i int, r *http.Request) *http.Response {
		if until, now, held := tr.holds.until("api.example"); held {
			sentWhileHeld = append(sentWhileHeld, time.Duration(until-now))
		}
		return answer(http.StatusOK)
	}}
	tr = mustTransport(t, TransportConfig[string]{Base: p})
	tr.hold(context.Background(), "api.example", 2*time.Second) // a refusal before
	resp, err := (&http.Client{Transport: tr}).Get("http://api.example/a")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(sentWhileHeld) > 0 {
		t.Errorf("sent while the key was held for %v more", sentWhileHeld[0])
	}
}

// denyOnce is a policy limiter that denies its first request (asking for a
// short wait) and admits the rest; at its first denial, the provider's
// hold arrives (another request's 429), as it can while a request waits
// for its policies.
type denyOnce struct {
	atomiclimit.KeyedLimiter[string]
	calls  int
	onDeny func()
}

func (l *denyOnce) Take(ctx context.Context, key string, n int) (gcraDecision, atomiclimit.Receipt, error) {
	l.calls++
	if l.calls == 1 {
		l.onDeny()
		return gcraDecision{RetryAfter: time.Millisecond, TokenAfter: time.Millisecond}, atomiclimit.Receipt{}, nil
	}
	return gcraDecision{Allowed: true, Remaining: 1}, atomiclimit.Receipt{}, nil
}

func (l *denyOnce) Peek(ctx context.Context, key string, n int) (gcraDecision, error) {
	return gcraDecision{Allowed: true}, nil
}

func (l *denyOnce) Refund(ctx context.Context, key string, n int, r atomiclimit.Receipt) (bool, error) {
	return false, nil
}

func (l *denyOnce) Quota(key string) atomiclimit.Quota {
	return atomiclimit.Quota{Kind: "fixed", Limit: 10, Window: time.Second}
}

// A hold that arrives while a request waits for its policies must hold it
// too: the request is not sent while a known hold is active.
func TestTransportWaitsForAHoldHeardDuringItsPolicies(t *testing.T) {
	fakeTimers(t)
	var tr *Transport[string]
	pol := &denyOnce{onDeny: func() { tr.hold(context.Background(), "api.example", 30*time.Second) }}
	var sentWhileHeld []time.Duration
	p := &provider{answer: func(i int, r *http.Request) *http.Response {
		if until, now, held := tr.holds.until("api.example"); held {
			sentWhileHeld = append(sentWhileHeld, time.Duration(until-now))
		}
		return answer(http.StatusOK)
	}}
	tr = mustTransport(t, TransportConfig[string]{Base: p, Policies: []atomiclimit.Policy[string]{{Name: "own", Limiter: pol}}})
	resp, err := (&http.Client{Transport: tr}).Get("http://api.example/a")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(sentWhileHeld) > 0 {
		t.Errorf("sent while the key was held for %v more", sentWhileHeld[0])
	}
}

// A refused request whose retry cannot be waited for (its policies now
// need longer than MaxWait) gets the provider's refusal as it came, not an
// error: the refusal is kept until the retry may go.
func TestTransportRetryThatCannotWaitReturnsTheRefusal(t *testing.T) {
	fakeTimers(t)
	slow := &slowPolicy{}
	p := &provider{answer: func(i int, r *http.Request) *http.Response {
		if i == 0 {
			slow.deny = true // the client's own policy now needs 10s
			return answer(http.StatusTooManyRequests, "Retry-After: 1")
		}
		return answer(http.StatusOK)
	}}
	tr := mustTransport(t, TransportConfig[string]{Base: p, Retries: 1, MaxWait: 5 * time.Second,
		Policies: []atomiclimit.Policy[string]{{Name: "own", Limiter: slow}}})
	resp, err := (&http.Client{Transport: tr}).Get("http://api.example/a")
	if err != nil {
		t.Fatalf("the caller got %v, not the provider's refusal", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || p.count() != 1 {
		t.Errorf("status %d after %d sends, want the 429 after 1", resp.StatusCode, p.count())
	}
	if drained, closed := p.bodies[0].state(); drained || closed {
		t.Errorf("the refusal's body: read %v, closed %v; want it untouched", drained, closed)
	}
}

// slowPolicy admits until deny is set, then asks for 10s.
type slowPolicy struct {
	atomiclimit.KeyedLimiter[string]
	deny bool
}

func (l *slowPolicy) Take(ctx context.Context, key string, n int) (gcraDecision, atomiclimit.Receipt, error) {
	if l.deny {
		return gcraDecision{RetryAfter: 10 * time.Second, TokenAfter: 10 * time.Second}, atomiclimit.Receipt{}, nil
	}
	return gcraDecision{Allowed: true, Remaining: 1}, atomiclimit.Receipt{}, nil
}

func (l *slowPolicy) Peek(ctx context.Context, key string, n int) (gcraDecision, error) {
	return gcraDecision{}, nil
}

func (l *slowPolicy) Refund(ctx context.Context, key string, n int, r atomiclimit.Receipt) (bool, error) {
	return false, nil
}

func (l *slowPolicy) Quota(key string) atomiclimit.Quota {
	return atomiclimit.Quota{Kind: "fixed", Limit: 10, Window: 10 * time.Second}
}

type gcraDecision = gcra.Decision
