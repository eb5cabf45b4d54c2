package main

import (
	"context"
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

func main() {
	// 60 requests a minute per user, in bursts of up to 5; at most a
	// million users held at once.
	lim, err := atomiclimit.NewKeyed[string](atomiclimit.PerMinute(60), 5,
		atomiclimit.WithMaxKeys(1_000_000, atomiclimit.RejectNew))
	if err != nil {
		panic(err) // errors.Is(err, atomiclimit.ErrInvalidLimit), ErrOption, …
	}
	defer lim.Close() // stops the idle-key sweeper

	admitted := 0
	for range 7 {
		if lim.Allow("alice") { // lock-free, no allocation; a denial writes nothing
			admitted++
		}
	}
	d, _, _ := lim.Take(context.Background(), "alice", 1) // the whole decision
	fmt.Println("admitted", admitted, "of 7; the next:", d.Allowed,
		"retry after", d.RetryAfter.Round(time.Second))
}
