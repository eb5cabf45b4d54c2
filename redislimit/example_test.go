package redislimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// One limit shared by a fleet: 60 requests a minute per user, bursts of 10,
// decided in Redis. The example needs a server, so it has no Output line and
// does not run; TestExampleFlow runs the same calls against a real one.
func Example() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  "localhost:6379",
		ContextTimeoutEnabled: true, // WithTimeout needs it
		MaxRetries:            -1,   // fail fast; the Outage policy decides
		DialerRetries:         1,    // a refused dial fails at once
	})
	// While Redis is unreachable, each process allows a tenth of the limit.
	local, _ := atomiclimit.NewKeyed[string](gcra.Per(6, time.Minute), 1)
	lim, err := redislimit.New(rdb, gcra.Per(60, time.Minute), 10,
		redislimit.WithTimeout(50*time.Millisecond),
		redislimit.WithOutage(redislimit.FallbackTo(local)),
		redislimit.WithOverLimitCache(100_000),
	)
	if err != nil {
		panic(err)
	}
	d, _, err := lim.Take(context.Background(), "user:42", 1)
	if err != nil {
		// Redis did not decide: the local limiter did (ErrUnavailable).
		fmt.Println("redis:", err)
	}
	if !d.Allowed {
		fmt.Printf("429, retry after %v\n", d.RetryAfter)
	}
}
