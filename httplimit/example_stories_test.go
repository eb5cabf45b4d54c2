package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// userKey is the context key under which an authentication middleware
// stores the authenticated user.
type userKey struct{}

// authenticated is the stand-in for an authentication middleware: it puts
// the user named by a (pretend-verified) token in the request's context.
func authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, user))
		}
		next.ServeHTTP(w, r)
	})
}

// byUser keys a request on the authenticated user; an anonymous request has
// no key (400 by default).
func byUser(r *http.Request) (string, error) {
	if u, ok := r.Context().Value(userKey{}).(string); ok {
		return u, nil
	}
	return "", httplimit.ErrNoKey
}

// 100 requests per rolling minute per authenticated user, exactly: a
// sliding log admits no 101st request in any 60 seconds, however the
// requests are spread. 50 at 12:00:00 and 50 at 12:00:30 pass; the next is
// denied until the first 50 leave the window at 12:01:00, and then only 50
// pass until 12:01:30.
func Example_slidingLogPerUser() {
	clock := &stepClock{t: time.Date(2026, 5, 23, 12, 0, 0, 0, time.UTC)}
	perUser, _ := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingLog(100, time.Minute),
		atomiclimit.WithClock(clock), atomiclimit.WithSweepInterval(0))
	mw, _ := httplimit.New(httplimit.Config[string]{
		Key:      byUser,
		Policies: []atomiclimit.Policy[string]{{Name: "per-user", Limiter: perUser}},
	})
	h := authenticated(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))

	send := func(count int) {
		served := 0
		var last *httptest.ResponseRecorder
		for range count {
			r := httptest.NewRequest("GET", "/reports", nil)
			r.Header.Set("Authorization", "Bearer alice")
			last = httptest.NewRecorder()
			h.ServeHTTP(last, r)
			if last.Code == 200 {
				served++
			}
		}
		fmt.Printf("%s: %d of %d served; last: %d RateLimit: %s", clock.Now().Format("15:04:05"), served, count, last.Code, last.Header().Get("RateLimit"))
		if ra := last.Header().Get("Retry-After"); ra != "" {
			fmt.Printf(" Retry-After: %s", ra)
		}
		fmt.Println()
	}
	send(50)
	clock.Add(30 * time.Second)
	send(50)
	send(1)
	clock.Add(30 * time.Second)
	send(51)
	// Output:
	// 12:00:00: 50 of 50 served; last: 200 RateLimit: "per-user";r=50
	// 12:00:30: 50 of 50 served; last: 200 RateLimit: "per-user";r=0;t=30
	// 12:00:30: 0 of 1 served; last: 429 RateLimit: "per-user";r=0;t=30 Retry-After: 30
	// 12:01:00: 50 of 51 served; last: 429 RateLimit: "per-user";r=0;t=30 Retry-After: 30
}

// 60 requests per 60 seconds and 10,000 per rolling 24 hours per client,
// both at once and both advertised. A client that sends 60 a minute for
// 166 minutes (9,960) has 40 left for the day: then the day's policy
// denies, and the minute's admission of that request is given back. The
// day's Retry-After is the time until the first hour's requests leave the
// rolling day (21h14m, rounded up to the second).
func Example_minuteAndDay() {
	clock := &stepClock{t: time.Date(2026, 5, 23, 0, 0, 0, 0, time.UTC)}
	opts := []atomiclimit.Option{atomiclimit.WithClock(clock), atomiclimit.WithSweepInterval(0)}
	minute, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(60), 60, opts...)
	day, _ := atomiclimit.NewKeyedRule[netip.Prefix](atomiclimit.Rolling(10_000, 24*time.Hour, time.Hour, 0), opts...)
	key, _ := httplimit.ClientIP(httplimit.IPOptions{})
	mw, _ := httplimit.New(httplimit.Config[netip.Prefix]{
		Key: key,
		Policies: []atomiclimit.Policy[netip.Prefix]{
			{Name: "minute", Limiter: minute},
			{Name: "day", Limiter: day},
		},
	})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	get := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "198.51.100.7:50000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	w := get()
	fmt.Println("RateLimit-Policy:", w.Header().Get("RateLimit-Policy"))
	fmt.Println(w.Code, "RateLimit:", w.Header().Get("RateLimit"))
	served := 1
	for range 59 {
		get()
		served++
	}
	w = get()
	fmt.Println(w.Code, "RateLimit:", w.Header().Get("RateLimit"), "Retry-After:", w.Header().Get("Retry-After"))
	for m := 1; m < 166; m++ {
		clock.Add(time.Minute)
		for range 60 {
			if get().Code == 200 {
				served++
			}
		}
	}
	clock.Add(time.Minute)
	for get().Code == 200 {
		served++
	}
	w = get()
	fmt.Println("served:", served)
	fmt.Println(w.Code, "RateLimit:", w.Header().Get("RateLimit"), "Retry-After:", w.Header().Get("Retry-After"))
	fmt.Printf("%s", w.Body)
	// Output:
	// RateLimit-Policy: "minute";q=60;w=60, "day";q=10000;w=86400
	// 200 RateLimit: "minute";r=59, "day";r=9999
	// 429 RateLimit: "minute";r=0;t=1, "day";r=9940 Retry-After: 1
	// served: 10000
	// 429 RateLimit: "minute";r=20, "day";r=0;t=76440 Retry-After: 76440
	// {"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429,"detail":"retry after 76440 seconds","violated-policies":["day"]}
}
