package grpclimit_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/grpclimit"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// fixedClock stops time, so that the output does not depend on scheduling.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// A server on TCP loopback limits each client address to 2 calls per
// minute; the third call is denied with the wait and the violated policy,
// and the RateLimit fields in its header metadata.
func Example() {
	perClient, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(2), 2,
		atomiclimit.WithClock(fixedClock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}))
	key, _ := grpclimit.ClientIP(httplimit.IPOptions{})
	lim, _ := grpclimit.New(grpclimit.Config[netip.Prefix]{
		Key:      key,
		Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "per-client", Limiter: perClient}},
	})
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(lim.Unary()), grpc.ChainStreamInterceptor(lim.Stream()))
	echo.Register(srv)
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Stop()

	cc, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer cc.Close()
	for i := 1; i <= 3; i++ {
		var header metadata.MD
		_, err := echo.CallSay(context.Background(), cc, "hi", grpc.Header(&header))
		if err == nil {
			fmt.Printf("call %d: OK\n", i)
			continue
		}
		wait, _ := grpclimit.RetryDelay(err)
		fmt.Printf("call %d: %v, retry after %v\n", i, status.Code(err), wait)
		for _, d := range status.Convert(err).Details() {
			if qf, ok := d.(*errdetails.QuotaFailure); ok {
				fmt.Printf("violated: %s (%s)\n", qf.Violations[0].Subject, qf.Violations[0].Description)
			}
		}
		fmt.Println("ratelimit:", header.Get("ratelimit")[0])
		fmt.Println("ratelimit-policy:", header.Get("ratelimit-policy")[0])
	}
	// Output:
	// call 1: OK
	// call 2: OK
	// call 3: ResourceExhausted, retry after 30s
	// violated: per-client (2/min, burst 2)
	// ratelimit: "per-client";r=0;t=30
	// ratelimit-policy: "per-client";q=2;w=60
}

// A client that limits itself to 10 calls per second, bursts of 1, and
// retries a call the server denies after the delay its RetryInfo names, up
// to 3 times.
func ExamplePacer() {
	self, _ := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(10), 1)
	p, _ := grpclimit.NewPacer(grpclimit.PacerConfig[string]{
		Key:      grpclimit.FullMethod,
		Policies: []atomiclimit.Policy[string]{{Name: "self", Limiter: self}},
		Retries:  3,
	})
	cc, err := grpc.NewClient("127.0.0.1:50051",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(p.Unary()),
		grpc.WithChainStreamInterceptor(p.Stream()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cc.Close()
	fmt.Println("paced client ready")
	// Output: paced client ready
}
