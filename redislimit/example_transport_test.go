package redislimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/httplimit"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// The founding scenario: a fleet of three processes calls an API that
// allows 10 calls per 100ms, and refuses (429) past that. Each process has
// its own Redis client, Limiter and httplimit.Transport; they share one
// limit, 1 call per 12.5ms, by its key in Redis (the API's host), below
// the API's with room for the network's jitter. Each call waits for its
// place, reserved in Redis in one script call; the API refuses none.
//
// (The three clients stand in for three processes. exampleRedis is the
// test's redis-server; TestFleetTransport measures the same for longer.)
func Example_fleetTransport() {
	api := &fakeAPI{n: 10, period: 100 * time.Millisecond}
	srv := httptest.NewServer(api)
	defer srv.Close()

	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 3 { // three processes
		rdb := redis.NewClient(&redis.Options{Addr: exampleRedis})
		defer rdb.Close()
		fleet, err := redislimit.New(rdb, gcra.Every(12500*time.Microsecond), 1, redislimit.WithKeyPrefix("example-transport:"))
		if err != nil {
			panic(err)
		}
		tr, err := httplimit.NewTransport(httplimit.TransportConfig[string]{
			Policies: []atomiclimit.Policy[string]{{Name: "api", Limiter: fleet}},
			MaxWait:  5 * time.Second,
		})
		if err != nil {
			panic(err)
		}
		client := &http.Client{Transport: tr}
		for range 2 { // two goroutines each, five calls each
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					resp, err := client.Get(srv.URL + "/v1/items")
					if err != nil {
						panic(err)
					}
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						ok.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	refused := 0
	for _, a := range api.arrivals {
		if !a.ok {
			refused++
		}
	}
	fmt.Printf("%d calls answered 200, %d refused\n", ok.Load(), refused)
	// Output:
	// 30 calls answered 200, 0 refused
}
