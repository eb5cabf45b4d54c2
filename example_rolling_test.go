package atomiclimit_test

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

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
