package redislimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/httplimit"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// A hard limit that a fleet shares: one request per second per API key,
// burst 1, for three server processes behind the middleware, each with its
// own Redis client and Limiter, on one Redis. A client that sends its
// requests round-robin across them is admitted once in the fleet, not once
// per process: the other processes deny it, with Retry-After 1 and
// RateLimit r=0;t=1. Another key has its own bucket.
//
// (The three servers stand in for three processes; cmd/httpdemo runs the
// same with real ones. exampleRedis is the test's redis-server.)
func Example_fleet() {
	// Every process builds the same Limiter: same limit, same key prefix,
	// same Redis.
	var fleet []*httptest.Server
	for range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: exampleRedis, ContextTimeoutEnabled: true, MaxRetries: -1})
		defer rdb.Close()
		lim, err := redislimit.New(rdb, gcra.Per(1, time.Second), 1,
			redislimit.WithKeyPrefix("api:"), redislimit.WithTimeout(time.Second))
		if err != nil {
			panic(err)
		}
		mw, err := httplimit.New(httplimit.Config[string]{
			Key:      httplimit.Header("X-API-Key"),
			Policies: []atomiclimit.Policy[string]{{Name: "fleet", Limiter: lim}},
		})
		if err != nil {
			panic(err)
		}
		srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
		defer srv.Close()
		fleet = append(fleet, srv)
	}

	// Round-robin, as a load balancer would send them; all within the second.
	for i, key := range []string{"alice", "alice", "alice", "alice", "bob", "bob"} {
		req, _ := http.NewRequest("GET", fleet[i%3].URL, nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		if i == 0 {
			fmt.Println("RateLimit-Policy:", resp.Header.Get("RateLimit-Policy"))
		}
		fmt.Printf("%-5s → process %c: %d RateLimit: %s", key, 'A'+i%3, resp.StatusCode, resp.Header.Get("RateLimit"))
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			fmt.Printf(" Retry-After: %s", ra)
		}
		fmt.Println()
	}
	// Output:
	// RateLimit-Policy: "fleet";q=1;w=1
	// alice → process A: 200 RateLimit: "fleet";r=0;t=1
	// alice → process B: 429 RateLimit: "fleet";r=0;t=1 Retry-After: 1
	// alice → process C: 429 RateLimit: "fleet";r=0;t=1 Retry-After: 1
	// alice → process A: 429 RateLimit: "fleet";r=0;t=1 Retry-After: 1
	// bob   → process B: 200 RateLimit: "fleet";r=0;t=1
	// bob   → process C: 429 RateLimit: "fleet";r=0;t=1 Retry-After: 1
}
