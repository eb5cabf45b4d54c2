package grpclimit

import (
	"context"
	"net/netip"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
)

// Stacked policies through a real gRPC server on loopback, every kind
// before every other: eight goroutines call Say 50 times each on one
// connection, from one address, a generous policy first and a strict one
// (5 per hour) after it. Each policy is charged what was served: exactly
// for a window, within a token for a bucket.
func TestEndToEndStackContention(t *testing.T) {
	const workers, calls = 8, 50
	key := netip.MustParsePrefix("127.0.0.1/32")
	for _, p := range kindPairs() {
		t.Run(pairName(p), func(t *testing.T) {
			gen := keyedOf[netip.Prefix](t, p[0].generous)
			strict := keyedOf[netip.Prefix](t, p[1].strict)
			m := mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{
				{Name: "generous", Limiter: gen}, {Name: "strict", Limiter: strict}}})
			cc := serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary())})
			served := hammer(workers, calls, func(int, int) bool {
				_, err := echo.CallSay(context.Background(), cc, "hi")
				if c := status.Code(err); c != codes.OK && c != codes.ResourceExhausted {
					t.Errorf("call: %v", err)
				}
				return err == nil
			})
			if served == 0 || served > strictQuota {
				t.Fatalf("served %d of %d, want 1 to %d", served, workers*calls, strictQuota)
			}
			cg, cs := charged[netip.Prefix](gen, key, p[0].quota), charged[netip.Prefix](strict, key, strictQuota)
			checkCharged(t, "generous", p[0], cg, served)
			checkCharged(t, "strict", p[1], cs, served)
			t.Logf("served %d; generous charged %d, strict %d", served, cg, cs)
		})
	}
}
