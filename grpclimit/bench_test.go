package grpclimit

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// allowAll is a limiter whose allow path is the real one (a CAS per call)
// but which never runs dry: T = 1ns, B = 100, so the bucket is full again
// long before the next call, and r = 99 has a precomputed value.
func allowAll[K comparable](tb testing.TB) *atomiclimit.Keyed[K] {
	lim, err := atomiclimit.NewKeyed[K](gcra.Per(1_000_000_000, time.Second), 100, atomiclimit.WithSweepInterval(0))
	if err != nil {
		tb.Fatal(err)
	}
	return lim
}

// bare is the baseline: an interceptor that only calls the handler, the
// least a chain with one interceptor does.
func bare(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(ctx, req)
}

// benchUnary runs icpt on a call from peer addr (with metadata kv) b.N
// times. The stream's header is reset before each call, so that each
// SetHeader costs what a fresh call's first one does (the reset runs in
// every chain alike).
func benchUnary(b *testing.B, icpt grpc.UnaryServerInterceptor, wantErr bool, addr string, kv ...string) {
	ctx, hs := callCtx(addr, kv...)
	info := &grpc.UnaryServerInfo{FullMethod: echo.Say}
	if _, err := icpt(ctx, nil, info, okHandler); (err != nil) != wantErr { // create the key off the clock
		b.Fatalf("err = %v, want error %v", err, wantErr)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		hs.reset()
		icpt(ctx, nil, info, okHandler)
	}
}

// BenchmarkUnary measures the unary interceptor's overhead per call against
// a bare interceptor chain, in process: the interceptor is called as the
// server calls it, with a peer and, for grpc.SetHeader, a stream that does
// what the HTTP/2 transport's does (headerStream). metadata=none is the
// key and the limiter alone; metadata=default sends the fields on denials
// only, so its allow path is the same; metadata=onallow sends them on every
// call (see TestAllowPathAllocs for its allocations).
func BenchmarkUnary(b *testing.B) {
	const peer = "203.0.113.9:4711"
	b.Run("chain=bare", func(b *testing.B) { benchUnary(b, bare, false, peer) })
	// The limiter's share: its Take alone, called by the bare chain.
	b.Run("chain=bare/take=only", func(b *testing.B) {
		lim, key := allowAll[netip.Prefix](b), mustPrefix("203.0.113.9/32")
		benchUnary(b, func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			lim.Take(ctx, key, 1)
			return handler(ctx, req)
		}, false, peer)
	})
	for _, tc := range []struct {
		name string
		md   MetadataSet
		hook *atomiclimit.Hook
	}{
		{"metadata=none", MetadataNone, nil},
		{"metadata=none/hook=on", MetadataNone, &atomiclimit.Hook{}},
		{"metadata=default", DefaultMetadata, nil},
		{"metadata=onallow", MetadataOnAllow, nil},
	} {
		b.Run("chain=grpclimit/key=peer/"+tc.name, func(b *testing.B) {
			m := mustNew(b, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: allowAll[netip.Prefix](b)}}, Metadata: tc.md, Hook: tc.hook})
			benchUnary(b, m.Unary(), false, peer)
		})
	}
	b.Run("chain=grpclimit/key=xff/metadata=default", func(b *testing.B) {
		key, _ := ClientIP(httplimit.IPOptions{TrustedProxies: []netip.Prefix{mustPrefix("10.0.0.0/8")}})
		m := mustNew(b, Config[netip.Prefix]{Key: key, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: allowAll[netip.Prefix](b)}}})
		benchUnary(b, m.Unary(), false, "10.0.0.1:4711", "x-forwarded-for", "198.51.100.1, 203.0.113.9, 10.0.0.2")
	})
	b.Run("chain=grpclimit/key=apikey/metadata=default", func(b *testing.B) {
		m := mustNew(b, Config[string]{Key: APIKey("x-api-key", nil), Policies: []atomiclimit.Policy[string]{{Limiter: allowAll[string](b)}}})
		benchUnary(b, m.Unary(), false, peer, "x-api-key", "k-123")
	})
	b.Run("chain=grpclimit/key=peer/policies=2/metadata=default", func(b *testing.B) {
		m := mustNew(b, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{
			{Name: "a", Limiter: allowAll[netip.Prefix](b)}, {Name: "b", Limiter: allowAll[netip.Prefix](b)}}})
		benchUnary(b, m.Unary(), false, peer)
	})
	b.Run("chain=grpclimit/key=peer/denied", func(b *testing.B) {
		lim, _ := atomiclimit.NewKeyed[netip.Prefix](gcra.Per(1, time.Hour), 1, atomiclimit.WithSweepInterval(0))
		m := mustNew(b, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: lim}}})
		m.Unary()(callCtxOnly(peer), nil, &grpc.UnaryServerInfo{FullMethod: echo.Say}, okHandler) // spend the burst
		benchUnary(b, m.Unary(), true, peer)
	})
}

// BenchmarkLoopback is a whole unary call on a real server over TCP
// loopback, with and without the interceptor: what the interceptor's share
// of a real call is. Allocations are both sides' (client and server).
func BenchmarkLoopback(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts func() []grpc.ServerOption
	}{
		{"chain=bare", func() []grpc.ServerOption { return []grpc.ServerOption{grpc.ChainUnaryInterceptor(bare)} }},
		{"chain=grpclimit/key=peer/metadata=default", func() []grpc.ServerOption {
			m := mustNew(b, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Limiter: allowAll[netip.Prefix](b)}}})
			return []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary())}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cc := serve(b, tc.opts())
			ctx := context.Background()
			if _, err := echo.CallSay(ctx, cc, "hi"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := echo.CallSay(ctx, cc, "hi"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
