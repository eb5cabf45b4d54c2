package atomiclimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// A day of a client's traffic through an HTTP handler with two policies
// stacked, in microseconds: 10 a minute in bursts of 10, and 50 per UTC day.
// The clock starts at midnight; every hour from 09:00 the client sends 12
// requests at once: 10 pass each hour until the day's 50 are spent at 13:00,
// whose refusals already wait for midnight.
func ExampleManualClock() {
	var clock atomiclimit.ManualClock
	opts := []atomiclimit.Option{atomiclimit.WithClock(&clock), atomiclimit.WithSweepInterval(0)}
	perMinute, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(10), 10, opts...)
	perDay, _ := atomiclimit.NewKeyedRule[netip.Prefix](atomiclimit.FixedWindowUTC(50, 24*time.Hour, 0), opts...)
	mw, _ := httplimit.New(httplimit.Config[netip.Prefix]{
		Key: httplimit.RemoteIP,
		Policies: []httplimit.Policy[netip.Prefix]{
			{Name: "minute", Limiter: perMinute},
			{Name: "day", Limiter: perDay},
		},
	})
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))

	clock.Advance(9 * time.Hour)
	for hour := 9; hour <= 15; hour++ {
		served, last := 0, ""
		for range 12 {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "192.0.2.1:4000"
			h.ServeHTTP(w, r)
			if w.Code == http.StatusOK {
				served++
			} else {
				last = fmt.Sprintf("%d, Retry-After %ss", w.Code, w.Header().Get("Retry-After"))
			}
		}
		fmt.Printf("%02d:00 served %2d; the others %s\n", hour, served, last)
		clock.Advance(time.Hour)
	}
	clock.Advance(17 * time.Hour) // 09:00 the next day: a new day's quota
	d, _, _ := perDay.Take(context.Background(), netip.MustParsePrefix("192.0.2.1/32"), 0)
	fmt.Println("next day, left today:", d.Remaining)
	// Output:
	// 09:00 served 10; the others 429, Retry-After 6s
	// 10:00 served 10; the others 429, Retry-After 6s
	// 11:00 served 10; the others 429, Retry-After 6s
	// 12:00 served 10; the others 429, Retry-After 6s
	// 13:00 served 10; the others 429, Retry-After 39600s
	// 14:00 served  0; the others 429, Retry-After 36000s
	// 15:00 served  0; the others 429, Retry-After 32400s
	// next day, left today: 50
}
