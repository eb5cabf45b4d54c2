package atomiclimit_test

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

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
