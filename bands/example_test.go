package bands_test

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit/bands"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/window"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// 2 per second with a burst of 2, and 3 per UTC hour: the decision names
// the band that binds.
func ExampleLimiter_DecideAt() {
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim, _ := bands.New([]bands.Band{
		bands.GCRA(gcra.PerSecond(2), 2),
		bands.Fixed(3, time.Hour, window.AlignUTC(0)),
	}, bands.WithClock(fixedClock{t0}))
	for _, at := range []time.Duration{0, 0, 0, time.Second, 2 * time.Second} {
		d := lim.DecideAt(t0.Add(at), 1)
		fmt.Printf("at %v: allowed=%v band=%d remaining=%d retry=%v\n", at, d.Allowed, d.Band, d.Remaining, d.RetryAfter)
	}
	// Output:
	// at 0s: allowed=true band=0 remaining=1 retry=0s
	// at 0s: allowed=true band=0 remaining=0 retry=0s
	// at 0s: allowed=false band=0 remaining=0 retry=500ms
	// at 1s: allowed=true band=1 remaining=0 retry=0s
	// at 2s: allowed=false band=1 remaining=0 retry=59m58s
}

// The same bands for every user: 2 per second and 3 per UTC hour each.
func ExampleKeyed_DecideAt() {
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	lim, _ := bands.NewKeyed[string]([]bands.Band{
		bands.GCRA(gcra.PerSecond(2), 2),
		bands.Fixed(3, time.Hour, window.AlignUTC(0)),
	}, bands.WithClock(fixedClock{t0}), bands.WithSweepInterval(0))
	defer lim.Close()
	for _, r := range []struct {
		user string
		at   time.Duration
	}{{"ann", 0}, {"ann", 0}, {"ann", 0}, {"ben", 0}, {"ann", 2 * time.Second}, {"ann", 3 * time.Second}} {
		d := lim.DecideAt(r.user, t0.Add(r.at), 1)
		fmt.Printf("%s at %v: allowed=%v band=%d retry=%v\n", r.user, r.at, d.Allowed, d.Band, d.RetryAfter)
	}
	// Output:
	// ann at 0s: allowed=true band=0 retry=0s
	// ann at 0s: allowed=true band=0 retry=0s
	// ann at 0s: allowed=false band=0 retry=500ms
	// ben at 0s: allowed=true band=0 retry=0s
	// ann at 2s: allowed=true band=1 retry=0s
	// ann at 3s: allowed=false band=1 retry=59m57s
}
