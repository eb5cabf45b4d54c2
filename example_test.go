package atomiclimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// Ten requests per second per user, in bursts of up to three. The times are
// explicit, so the output does not depend on the machine's speed.
func Example() {
	lim, err := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(10), 3,
		atomiclimit.WithMaxKeys(100_000, atomiclimit.RejectNew))
	if err != nil {
		panic(err)
	}
	defer lim.Close()

	t0 := time.Now()
	for i := range 4 {
		fmt.Println("alice", i, lim.AllowN("alice", t0, 1))
	}
	fmt.Println("bob", lim.AllowN("bob", t0, 1))
	d := decideN(lim, "alice", t0, 1)
	fmt.Println("alice retry after", d.RetryAfter)
	fmt.Println("alice 100ms later", lim.AllowN("alice", t0.Add(100*time.Millisecond), 1))
	// Output:
	// alice 0 true
	// alice 1 true
	// alice 2 true
	// alice 3 false
	// bob true
	// alice retry after 100ms
	// alice 100ms later true
}

// 2 per second with a burst of 2, and 3 per UTC hour, on one key: the
// second band binds from the fourth request on.
func ExampleBands() {
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim, _ := atomiclimit.NewRule(atomiclimit.Bands(
		atomiclimit.GCRA(atomiclimit.PerSecond(2), 2),
		atomiclimit.FixedWindowUTC(3, time.Hour, 0),
	), atomiclimit.WithClock(fixedClock{t0}))
	for _, at := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
		d := lim.TakeN(t0.Add(at), 1)
		fmt.Printf("at %v: allowed=%v remaining=%d retry=%v\n", at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// at 0s: allowed=true remaining=1 retry=0s
	// at 0s: allowed=true remaining=0 retry=0s
	// at 0s: allowed=false remaining=0 retry=500ms
	// at 1s: allowed=true remaining=0 retry=0s
	// at 2s: allowed=false remaining=0 retry=59m58s
}

// The same bands for every user: 2 per second and 3 per UTC hour each.
func ExampleBands_keyed() {
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim, _ := atomiclimit.NewKeyedRule[string](atomiclimit.Bands(
		atomiclimit.GCRA(atomiclimit.PerSecond(2), 2),
		atomiclimit.FixedWindowUTC(3, time.Hour, 0),
	), atomiclimit.WithClock(fixedClock{t0}), atomiclimit.WithSweepInterval(0))
	defer lim.Close()
	for _, r := range []struct {
		user string
		at   time.Duration
	}{{"ann", 0}, {"ann", 0}, {"ann", 0}, {"ben", 0}, {"ann", 2 * time.Second}, {"ann", 3 * time.Second}} {
		d := decideN(lim, r.user, t0.Add(r.at), 1)
		fmt.Printf("%s at %v: allowed=%v retry=%v\n", r.user, r.at, d.Allowed, d.RetryAfter)
	}
	// Output:
	// ann at 0s: allowed=true retry=0s
	// ann at 0s: allowed=true retry=0s
	// ann at 0s: allowed=false retry=500ms
	// ben at 0s: allowed=true retry=0s
	// ann at 2s: allowed=true retry=0s
	// ann at 3s: allowed=false retry=59m57s
}

// Explicit instants keep the output independent of scheduling.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func ExampleLimiter_AllowN() {
	// 10 per second, burst 2; the limiter's epoch is t0.
	lim, _ := atomiclimit.New(atomiclimit.PerSecond(10), 2, atomiclimit.WithClock(fixedClock{t0}))
	fmt.Println(lim.AllowN(t0, 1), lim.AllowN(t0, 1), lim.AllowN(t0, 1))
	fmt.Println(lim.AllowN(t0.Add(100*time.Millisecond), 1)) // one token back
	// Output:
	// true true false
	// true
}

func ExampleLimiter_TakeN() {
	lim, _ := atomiclimit.New(atomiclimit.PerMinute(60), 3, atomiclimit.WithClock(fixedClock{t0}))
	for i := 0; i < 4; i++ {
		d := lim.TakeN(t0, 1)
		fmt.Printf("allowed=%v remaining=%d retry=%v reset=%v\n", d.Allowed, d.Remaining, d.RetryAfter, d.ResetAfter)
	}
	// Output:
	// allowed=true remaining=2 retry=0s reset=1s
	// allowed=true remaining=1 retry=0s reset=2s
	// allowed=true remaining=0 retry=0s reset=3s
	// allowed=false remaining=0 retry=1s reset=3s
}

func ExampleLimiter_ReserveN() {
	lim, _ := atomiclimit.New(atomiclimit.PerSecond(4), 1, atomiclimit.WithClock(fixedClock{t0}))
	for i := 0; i < 3; i++ {
		r, _ := lim.ReserveN(t0, 1)
		fmt.Println(r.DelayFrom(t0)) // pace: act after this long
	}
	_, err := lim.ReserveN(t0, 2)
	fmt.Println(errors.Is(err, atomiclimit.ErrExceedsBurst))
	// Output:
	// 0s
	// 250ms
	// 500ms
	// true
}

func ExampleLimiter_Wait() {
	lim, _ := atomiclimit.New(atomiclimit.Every(time.Hour), 1)
	lim.Allow() // spend the only token

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// The next token is an hour away: Wait fails at once, consuming nothing.
	err := lim.Wait(ctx)
	fmt.Println(errors.Is(err, atomiclimit.ErrDeadline))
	// Output: true
}

func ExampleNew_errors() {
	_, err := atomiclimit.New(atomiclimit.PerSecond(0), 10)
	fmt.Println(errors.Is(err, atomiclimit.ErrInvalidLimit), err)
	_, err = atomiclimit.New(atomiclimit.PerSecond(100), 0)
	fmt.Println(errors.Is(err, atomiclimit.ErrInvalidLimit), err)
	// Output:
	// true gcra: invalid limit: 0 events per period
	// true gcra: invalid burst: 0 (must be at least 1; 1 means no burst)
}

// Free users get 2 requests in a burst, premium ones 5. The tier is chosen
// once, when a key is first seen.
func ExampleKeyed_SetTierFunc() {
	lim, _ := atomiclimit.NewKeyed[string](atomiclimit.PerMinute(60), 2)
	defer lim.Close()
	premium, _ := lim.NewTier(atomiclimit.GCRA(atomiclimit.PerMinute(60), 5))
	lim.SetTierFunc(func(user string) *atomiclimit.Tier {
		if strings.HasPrefix(user, "pro:") {
			return premium
		}
		return nil // the default tier
	})
	t0 := time.Now()
	for _, user := range []string{"ann", "pro:bea"} {
		n := 0
		for lim.AllowN(user, t0, 1) {
			n++
		}
		fmt.Println(user, n)
	}
	// Output:
	// ann 2
	// pro:bea 5
}

// An idle key (its bucket full again) is removed by the sweeper, or by
// Sweep; nothing about its limit is lost, because a full bucket is what a new
// key starts with.
func ExampleKeyed_SweepAt() {
	clk := &fixedClock{t0} // a sweep never looks past the limiter's clock
	lim, _ := atomiclimit.NewKeyed[int](atomiclimit.PerSecond(10), 5, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	lim.AllowN(1, t0, 5) // drained: full again 500 ms later
	lim.AllowN(2, t0, 1) // full again 100 ms later
	clk.t = t0.Add(200 * time.Millisecond)
	fmt.Println(lim.Stats().Keys, lim.SweepAt(clk.t), lim.Stats().Keys)
	clk.t = t0.Add(time.Second)
	fmt.Println(lim.SweepAt(clk.t), lim.Stats().Keys)
	// Output:
	// 2 1 1
	// 1 0
}

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
		Policies: []atomiclimit.Policy[netip.Prefix]{
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

// The quick start's rule at a small scale: at most 3 per rolling day,
// recalculated every hour, and at most 2 in any rolling minute. The log
// band goes last: it is the one band that cannot be refunded.
func ExampleRolling() {
	lim, err := atomiclimit.NewKeyedRule[string](atomiclimit.Bands(
		atomiclimit.Rolling(3, 24*time.Hour, time.Hour, 0),
		atomiclimit.SlidingLog(2, time.Minute),
	), atomiclimit.WithClock(fixedClock{t0}), atomiclimit.WithSweepInterval(0))
	if err != nil {
		panic(err)
	}
	fmt.Println(lim.AllowN("u", t0, 1), lim.AllowN("u", t0, 1), lim.AllowN("u", t0, 1)) // the minute's 2
	t1 := t0.Add(time.Minute)
	fmt.Println(lim.AllowN("u", t1, 1), lim.AllowN("u", t1, 1)) // the day's 3
	// The first hour's slice leaves the rolling day 24 h after it began.
	fmt.Println(decideN(lim, "u", t1, 1).RetryAfter)
	// Output:
	// true true false
	// true false
	// 23h59m0s
}

// A daily quota that resets at 00:00 UTC, for a limiter created in the
// evening. Explicit instants keep the output independent of the wall clock.
func ExampleFixedWindowUTC() {
	created := time.Date(2026, 1, 1, 18, 0, 0, 0, time.UTC)
	day, _ := atomiclimit.NewRule(atomiclimit.FixedWindowUTC(2, 24*time.Hour, 0),
		atomiclimit.WithClock(fixedClock{created}))
	for _, at := range []time.Time{created, created.Add(time.Hour), created.Add(2 * time.Hour), created.Add(6 * time.Hour)} {
		d := day.TakeN(at, 1)
		fmt.Printf("%s allowed=%v remaining=%d retry=%v\n", at.Format("Jan 2 15:04"), d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// Jan 1 18:00 allowed=true remaining=1 retry=0s
	// Jan 1 19:00 allowed=true remaining=0 retry=0s
	// Jan 1 20:00 allowed=false remaining=0 retry=4h0m0s
	// Jan 2 00:00 allowed=true remaining=1 retry=0s
}

// The fixed window's boundary burst, and the exact log's answer to the same
// traffic: 3 per minute, 3 requests a moment before a boundary and 3 at it.
func ExampleSlidingLog() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fixed, _ := atomiclimit.NewRule(atomiclimit.FixedWindow(3, time.Minute), atomiclimit.WithClock(fixedClock{t0}))
	exact, _ := atomiclimit.NewRule(atomiclimit.SlidingLog(3, time.Minute), atomiclimit.WithClock(fixedClock{t0}))
	count := func(allow func(time.Time, int) bool) (k int) {
		for _, at := range []time.Duration{59 * time.Second, 60 * time.Second} {
			for range 3 {
				if allow(t0.Add(at), 1) {
					k++
				}
			}
		}
		return k
	}
	fmt.Println("fixed window admits", count(fixed.AllowN), "within one second")
	fmt.Println("sliding log admits", count(exact.AllowN))
	fmt.Println("log retry:", exact.PeekN(t0.Add(60*time.Second), 1).RetryAfter)
	// Output:
	// fixed window admits 6 within one second
	// sliding log admits 3
	// log retry: 59s
}

// The sliding-window counter weighs the previous window by how much of it
// is still inside the rolling window.
func ExampleSlidingCounter() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c, _ := atomiclimit.NewRule(atomiclimit.SlidingCounter(10, time.Second), atomiclimit.WithClock(fixedClock{t0}))
	c.AllowN(t0, 10) // the first window, full
	for _, at := range []time.Duration{1000 * time.Millisecond, 1250 * time.Millisecond, 1250 * time.Millisecond} {
		d := c.TakeN(t0.Add(at), 2)
		fmt.Printf("at %v: allowed=%v remaining=%d retry=%v\n", at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// at 1s: allowed=false remaining=0 retry=200ms
	// at 1.25s: allowed=true remaining=0 retry=0s
	// at 1.25s: allowed=false remaining=0 retry=150ms
}

// settableClock is a Clock that moves only when set; safe for concurrent use.
type settableClock struct {
	base time.Time
	ns   atomic.Int64
}

func (c *settableClock) Now() time.Time      { return c.base.Add(time.Duration(c.ns.Load())) }
func (c *settableClock) Set(d time.Duration) { c.ns.Store(int64(d)) }

// A keyed exact sliding log: at most 2 requests per API key in any rolling
// minute, each key on its own; an idle key is removed and comes back fresh.
func ExampleNewKeyedRule() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := &settableClock{base: t0} // a sweep never looks past the limiter's clock
	lim, _ := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingLog(2, time.Minute),
		atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	defer lim.Close()
	for _, r := range []struct {
		key string
		at  time.Duration
	}{{"alice", 0}, {"alice", 10 * time.Second}, {"bob", 20 * time.Second}, {"alice", 30 * time.Second}, {"alice", 61 * time.Second}} {
		d := decideN(lim, r.key, t0.Add(r.at), 1)
		fmt.Printf("%-5s at %v: allowed=%v retry=%v\n", r.key, r.at, d.Allowed, d.RetryAfter)
	}
	clk.Set(2 * time.Minute)
	fmt.Println("keys:", lim.Stats().Keys, "removed at 2m:", lim.SweepAt(t0.Add(2*time.Minute)), "keys:", lim.Stats().Keys)
	// Output:
	// alice at 0s: allowed=true retry=0s
	// alice at 10s: allowed=true retry=0s
	// bob   at 20s: allowed=true retry=0s
	// alice at 30s: allowed=false retry=30s
	// alice at 1m1s: allowed=true retry=0s
	// keys: 2 removed at 2m: 1 keys: 1
}
