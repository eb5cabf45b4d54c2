package httplimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// stepClock is a clock the example moves by hand, so the output does not
// depend on how fast it runs.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Three requests per client IP at once, then one every 20 seconds: the third
// request is denied, and after waiting its Retry-After the client is served.
func Example() {
	clock := &stepClock{t: time.Date(2026, 5, 23, 12, 0, 0, 0, time.UTC)}
	lim, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(3), 2,
		atomiclimit.WithClock(clock), atomiclimit.WithSweepInterval(0))
	key, _ := httplimit.ClientIP(httplimit.IPOptions{})
	mw, _ := httplimit.New(httplimit.Config[netip.Prefix]{
		Key:      key,
		Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "per-ip", Limiter: lim}},
	})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	get := func() {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "198.51.100.7:50000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d RateLimit: %s", w.Code, w.Header().Get("RateLimit"))
		if ra := w.Header().Get("Retry-After"); ra != "" {
			fmt.Printf(" Retry-After: %s", ra)
		}
		fmt.Println()
	}
	get()
	fmt.Println("RateLimit-Policy:", policyOf(h))
	get()
	get()
	clock.Add(20 * time.Second)
	get()
	// Output:
	// 200 RateLimit: "per-ip";r=1
	// RateLimit-Policy: "per-ip";q=2;w=40
	// 200 RateLimit: "per-ip";r=0;t=20
	// 429 RateLimit: "per-ip";r=0;t=20 Retry-After: 20
	// 200 RateLimit: "per-ip";r=0;t=20
}

// policyOf returns the RateLimit-Policy a request from another client sees.
func policyOf(h http.Handler) string {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8::1]:443"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Header().Get("RateLimit-Policy")
}

// A server that tells every limited client "busy, try later" answers 503
// instead of 429: Config.Deny writes the response, after the rate-limit
// headers (Retry-After among them) are set.
func ExampleConfig_deny() {
	lim, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(1), 1, atomiclimit.WithSweepInterval(0))
	mw, _ := httplimit.New(httplimit.Config[netip.Prefix]{
		Key:      httplimit.RemoteIP,
		Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "per-ip", Limiter: lim}},
		Deny: func(w http.ResponseWriter, r *http.Request, d httplimit.Denial) {
			http.Error(w, "busy, try later", http.StatusServiceUnavailable)
		},
	})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 2 {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:1234"
		h.ServeHTTP(w, r)
		fmt.Printf("%d Retry-After:%q\n", w.Code, w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 Retry-After:""
	// 503 Retry-After:"60"
}
