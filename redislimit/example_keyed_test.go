package redislimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// httplimit's IP-keyed middleware with its limit kept in Redis, for a
// fleet: the policy moves from the process by its constructor alone,
// keyed by the same netip.Prefix (IPv4 clients by /32, IPv6 by /64), with
// a client and a timeout that answer within 50ms when Redis does not.
// Each client address has a burst of 2; the three IPv6 addresses are one
// /64, one client.
//
// (exampleRedis is the test's redis-server.)
func ExampleNewKeyed() {
	rdb := redis.NewClient(&redis.Options{
		Addr:                  exampleRedis,
		ContextTimeoutEnabled: true, // WithTimeout's deadline reaches the connection
		MaxRetries:            -1,   // no retry: the Outage policy decides at once
		DialerRetries:         1,    // a refused dial fails at once
	})
	defer rdb.Close()
	local, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(1), 1) // this process's share, during outages
	defer local.Close()

	// In process, it was:
	//	perClient, err := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(1), 2)
	perClient, err := redislimit.NewKeyed[netip.Prefix](rdb, atomiclimit.PerMinute(1), 2,
		redislimit.WithKeyPrefix("ip-example:"),
		redislimit.WithTimeout(50*time.Millisecond),
		redislimit.WithOutage(redislimit.FallbackTo(local)))
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(httplimit.Config[netip.Prefix]{
		Key:      httplimit.RemoteIP,
		Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "client", Limiter: perClient}},
	})
	if err != nil {
		panic(err)
	}
	handler := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	v4, v6 := netip.MustParsePrefix("192.0.2.1/32"), netip.MustParsePrefix("2001:db8::/64")
	rdb.Del(context.Background(), perClient.Key(v4), perClient.Key(v6)) // fresh buckets on every run
	fmt.Println("redis keys:", perClient.Key(v4), perClient.Key(v6))
	for _, addr := range []string{"192.0.2.1:1000", "192.0.2.1:1001", "192.0.2.1:1002", "[2001:db8::1]:1000", "[2001:db8::2]:1000", "[2001:db8::3]:1000"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		fmt.Println(addr, rec.Code)
	}
	// Output:
	// redis keys: ip-example:192.0.2.1/32 ip-example:2001:db8::/64
	// 192.0.2.1:1000 200
	// 192.0.2.1:1001 200
	// 192.0.2.1:1002 429
	// [2001:db8::1]:1000 200
	// [2001:db8::2]:1000 200
	// [2001:db8::3]:1000 429
}
