package grpclimit

import (
	"context"
	"net/netip"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
)

// The allocations the interceptor adds to an admitted unary call, counted
// against what each one is (the interceptor is called as the server calls
// it; headerStream does what the transport's stream does):
//
//   - key=peer, default metadata (fields on denials only): 0. The peer is
//     read from the context, the key is a netip.Prefix, the limiter's
//     allow path is a map load and a CAS, the outcomes live on the stack.
//   - key=apikey: 1, grpc's metadata.ValueFromIncomingContext copying the
//     value slice (ClientIP behind a trusted proxy: the same one).
//   - MetadataOnAllow: 7 more. Ours: the metadata.MD map (2: its header and
//     its one group of slots) and the two values' backing array (1); the
//     values themselves are kept strings. The transport's SetHeader merges
//     the map into a fresh one with metadata.Join: its map (2) and one
//     slice per key (2).
//
// Hooks add none, and neither does an admitted message on a stream, nor a
// Pacer's Wait that admits.
func TestAllowPathAllocs(t *testing.T) {
	const peer = "203.0.113.9:4711"
	run := func(name string, icpt grpc.UnaryServerInterceptor, want float64, kv ...string) {
		t.Helper()
		ctx, hs := callCtx(peer, kv...)
		info := &grpc.UnaryServerInfo{FullMethod: echo.Say}
		if _, err := icpt(ctx, nil, info, okHandler); err != nil {
			t.Fatal(err)
		}
		got := testing.AllocsPerRun(200, func() {
			hs.header = nil // as a fresh call's stream: no lock, no allocation
			icpt(ctx, nil, info, okHandler)
		})
		if got != want {
			t.Errorf("%s: %v allocs per call, want %v", name, got, want)
		}
	}
	pol := func() []atomiclimit.Policy[netip.Prefix] {
		return []atomiclimit.Policy[netip.Prefix]{{Limiter: allowAll[netip.Prefix](t)}}
	}
	run("key=peer", mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: pol()}).Unary(), 0)
	run("key=peer/hook", mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: pol(), Hook: &atomiclimit.Hook{}}).Unary(), 0)
	run("key=peer/policies=2", mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{
		{Name: "a", Limiter: allowAll[netip.Prefix](t)}, {Name: "b", Limiter: allowAll[netip.Prefix](t)}}}).Unary(), 0)
	run("key=peer/metadata=none", mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: pol(), Metadata: MetadataNone}).Unary(), 0)
	run("key=apikey", mustNew(t, Config[string]{Key: APIKey("x-api-key", nil), Policies: []atomiclimit.Policy[string]{{Limiter: allowAll[string](t)}}}).Unary(), 1, "x-api-key", "k-123")
	run("key=peer/metadata=onallow", mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: pol(), Metadata: MetadataOnAllow}).Unary(), 7)

	// A message admitted on a stream.
	m := mustNew(t, Config[netip.Prefix]{Key: PeerIP, Messages: pol()})
	ctx, _ := callCtx(peer)
	ls := &limitedStream[netip.Prefix]{ServerStream: nopStream{ctx}, m: m, key: mustPrefix("203.0.113.9/32")}
	if got := testing.AllocsPerRun(200, func() { ls.RecvMsg(nil) }); got != 0 {
		t.Errorf("admitted message: %v allocs, want 0", got)
	}
	// A Pacer's admitted Wait.
	p, err := NewPacer(PacerConfig[string]{Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Limiter: allowAll[string](t)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := testing.AllocsPerRun(200, func() { p.Wait(context.Background(), echo.Say) }); got != 0 {
		t.Errorf("Pacer.Wait: %v allocs, want 0", got)
	}
}

// nopStream is a grpc.ServerStream whose RecvMsg receives nothing, at once.
type nopStream struct{ ctx context.Context }

func (s nopStream) SetHeader(md metadata.MD) error  { return nil }
func (s nopStream) SendHeader(md metadata.MD) error { return nil }
func (s nopStream) SetTrailer(md metadata.MD)       {}
func (s nopStream) Context() context.Context        { return s.ctx }
func (s nopStream) SendMsg(any) error               { return nil }
func (s nopStream) RecvMsg(any) error               { return nil }
