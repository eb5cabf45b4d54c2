package httplimit

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// fakeClock is a Clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newKeyed returns a Keyed limiter on clock c without a background sweeper.
func newKeyed[K comparable](t testing.TB, c *fakeClock, limit gcra.Limit, burst int) *atomiclimit.Keyed[K] {
	t.Helper()
	lim, err := atomiclimit.NewKeyed[K](limit, burst, atomiclimit.WithClock(c), atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func mustNew[K comparable](t testing.TB, c Config[K]) *Middleware[K] {
	t.Helper()
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
})

// do sends one request from remote through h and returns the recorder.
func do(h http.Handler, method, target, remote string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, nil)
	if remote != "" {
		r.RemoteAddr = remote
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// countingHook records the hook events.
type countingHook struct {
	mu                      sync.Mutex
	allowed, denied, errors map[string]int
	evicted, overloaded     map[string]int
	lastRetry               time.Duration
	lastErr                 error
}

func newCountingHook() *countingHook {
	return &countingHook{allowed: map[string]int{}, denied: map[string]int{}, errors: map[string]int{}, evicted: map[string]int{}, overloaded: map[string]int{}}
}

func (h *countingHook) Allowed(p string, n int) {
	h.mu.Lock()
	h.allowed[p] += n
	h.mu.Unlock()
}

func (h *countingHook) Denied(p string, n int, ra time.Duration) {
	h.mu.Lock()
	h.denied[p] += n
	h.lastRetry = ra
	h.mu.Unlock()
}

func (h *countingHook) Overloaded(p string, n int) {
	h.mu.Lock()
	h.overloaded[p] += n
	h.mu.Unlock()
}

func (h *countingHook) Evicted(p string, n int) {
	h.mu.Lock()
	h.evicted[p] += n
	h.mu.Unlock()
}

func (h *countingHook) Error(p string, err error) {
	h.mu.Lock()
	h.errors[p]++
	h.lastErr = err
	h.mu.Unlock()
}

func (h *countingHook) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("allowed %v denied %v errors %v evicted %v", h.allowed, h.denied, h.errors, h.evicted)
}

// reuseWriter is a ResponseWriter that can be reset without allocating, for
// allocation counts and benchmarks.
type reuseWriter struct {
	h      http.Header
	status int
}

func newReuseWriter() *reuseWriter { return &reuseWriter{h: make(http.Header, 8)} }

func (w *reuseWriter) Header() http.Header         { return w.h }
func (w *reuseWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *reuseWriter) WriteHeader(s int)           { w.status = s }
func (w *reuseWriter) reset() {
	clear(w.h)
	w.status = 0
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// hook returns h as a Hook.
func (h *countingHook) hook() *atomiclimit.Hook {
	return &atomiclimit.Hook{Allowed: h.Allowed, Denied: h.Denied, Overloaded: h.Overloaded, Evicted: h.Evicted, Error: h.Error}
}
