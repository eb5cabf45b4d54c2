package redislimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// Two processes, A and B, share a burst of 4 per hour through leases. A's
// second request takes a lease of 2 (its first lease ran out in time, so k
// doubled) and keeps the token it did not spend; B then finds Redis empty,
// while A still spends its token locally. The fleet admits 4, the burst.
//
// (exampleRedis is the test's redis-server.)
func ExampleLeased() {
	ctx := context.Background()
	procs := map[string]*redislimit.Leased[string]{}
	for _, name := range []string{"A", "B"} {
		rdb := redis.NewClient(&redis.Options{Addr: exampleRedis, MaxRetries: -1})
		defer rdb.Close()
		rdb.Del(ctx, "lease-example:user") // a fresh bucket on every run
		lim, err := redislimit.New(rdb, gcra.Every(time.Hour), 4, redislimit.WithKeyPrefix("lease-example:"))
		if err != nil {
			panic(err)
		}
		procs[name], err = redislimit.NewLeased(lim, 4, time.Minute)
		if err != nil {
			panic(err)
		}
	}
	for _, name := range []string{"A", "A", "B", "B", "A", "A"} {
		fmt.Println(name, procs[name].Allow(ctx, "user"))
	}
	// Output:
	// A true
	// A true
	// B true
	// B false
	// A true
	// A false
}
