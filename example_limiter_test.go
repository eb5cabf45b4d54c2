package atomiclimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

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
