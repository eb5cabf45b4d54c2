package httplimit_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// A door of another protocol (grpclimit is one) finds the client behind its
// trusted proxies by ClientIP's rule: it hands the resolver the peer's
// address and a function that reads the forwarding field's values, which
// is called only for a trusted peer.
func ExampleIPResolver() {
	res, err := httplimit.NewIPResolver(httplimit.IPOptions{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	if err != nil {
		panic(err)
	}
	xff := func() []string { return []string{"198.51.100.7, 203.0.113.9"} }
	fmt.Println(res.Client(netip.MustParseAddr("10.0.0.1"), xff))  // a trusted proxy: its field names the client
	fmt.Println(res.Client(netip.MustParseAddr("192.0.2.1"), xff)) // a client: what it sends is ignored
	// Output:
	// 203.0.113.9/32
	// 192.0.2.1/32
}

// A door of another protocol decides with an atomiclimit.Stack and sends
// the RateLimit fields its own way, formatting each policy's items with a
// PolicyFields of its own.
func ExamplePolicyFields() {
	clock := &stepClock{t: time.Unix(1e9, 0)}
	perMinute, err := atomiclimit.NewKeyed[string](atomiclimit.PerMinute(60), 60, atomiclimit.WithClock(clock))
	if err != nil {
		panic(err)
	}
	defer perMinute.Close()
	stack, _ := atomiclimit.NewStack(atomiclimit.Policy[string]{Name: "minute", Limiter: perMinute})
	fields, _ := httplimit.NewPolicyFields("minute", "")

	var out [1]atomiclimit.Outcome
	res, _ := stack.Take(context.Background(), "tenant-a", 1, out[:])
	fmt.Println(res == atomiclimit.Pass)
	fmt.Println(fields.Policy(out[0].Quota))
	fmt.Println(fields.RateLimit(&out[0], 1))
	// Output:
	// true
	// "minute";q=60;w=60
	// "minute";r=59
}
