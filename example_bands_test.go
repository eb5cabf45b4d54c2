package atomiclimit_test

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

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
