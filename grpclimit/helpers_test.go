package grpclimit

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// fakeClock is a Clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newKeyed returns a Keyed limiter on clock c (nil: the real one) without a
// background sweeper.
func newKeyed[K comparable](t testing.TB, c *fakeClock, limit gcra.Limit, burst int) *atomiclimit.Keyed[K] {
	t.Helper()
	opts := []atomiclimit.Option{atomiclimit.WithSweepInterval(0)}
	if c != nil {
		opts = append(opts, atomiclimit.WithClock(c))
	}
	lim, err := atomiclimit.NewKeyed[K](limit, burst, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

func mustNew[K comparable](t testing.TB, c Config[K]) *Interceptor[K] {
	t.Helper()
	m, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// headerStream is a grpc.ServerTransportStream for calling an interceptor
// in process. SetHeader and SetTrailer do what the HTTP/2 transport's
// stream does (metadata.Join into the stream's fields, under a lock), so
// that allocation counts and timings include the transport's share.
type headerStream struct {
	mu      sync.Mutex
	header  metadata.MD
	trailer metadata.MD
}

func (s *headerStream) Method() string { return echo.Say }

func (s *headerStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	s.header = metadata.Join(s.header, md)
	s.mu.Unlock()
	return nil
}

func (s *headerStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }

func (s *headerStream) SetTrailer(md metadata.MD) error {
	s.mu.Lock()
	s.trailer = metadata.Join(s.trailer, md)
	s.mu.Unlock()
	return nil
}

// reset forgets the header: the next SetHeader costs what a fresh stream's
// first one does.
func (s *headerStream) reset() {
	s.mu.Lock()
	s.header, s.trailer = nil, nil
	s.mu.Unlock()
}

// callCtx returns the context of a call from peer addr ("ip:port") with
// incoming metadata kv (pairs), and the stream its header goes to.
func callCtx(addr string, kv ...string) (context.Context, *headerStream) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))})
	if len(kv) > 0 {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(kv...))
	}
	hs := &headerStream{}
	return grpc.NewContextWithServerTransportStream(ctx, hs), hs
}

// callCtxOnly is callCtx's context without a stream.
func callCtxOnly(addr string) context.Context {
	return peer.NewContext(context.Background(), &peer.Peer{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))})
}

var okHandler grpc.UnaryHandler = func(ctx context.Context, req any) (any, error) { return req, nil }

// unary runs m's unary interceptor on a call of method in ctx.
func unary[K comparable](m *Interceptor[K], ctx context.Context, method string) error {
	_, err := m.Unary()(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, okHandler)
	return err
}

// serve starts a real gRPC server with the echo service on a TCP loopback
// port, with the given interceptors, and returns a client connection to it
// (dialled with dopts). Both are closed when the test ends.
func serve(t testing.TB, sopts []grpc.ServerOption, dopts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(sopts...)
	echo.Register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	cc, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		srv.Stop()
		<-done
	})
	return cc
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }

// countingHook counts the events per policy.
type countingHook struct {
	mu                     sync.Mutex
	allowed, denied, error map[string]int
	evicted, overloaded    map[string]int
	waited                 map[string]int
	errs                   []error
}

func newCountingHook() *countingHook {
	return &countingHook{allowed: map[string]int{}, denied: map[string]int{}, error: map[string]int{}, evicted: map[string]int{}, overloaded: map[string]int{}, waited: map[string]int{}}
}

func (h *countingHook) Waited(p string, cost int, _ time.Duration) {
	h.mu.Lock()
	h.waited[p]++
	h.mu.Unlock()
}

func (h *countingHook) Allowed(p string, cost int) {
	h.mu.Lock()
	h.allowed[p] += cost
	h.mu.Unlock()
}

func (h *countingHook) Denied(p string, cost int, _ time.Duration) {
	h.mu.Lock()
	h.denied[p]++
	h.mu.Unlock()
}

func (h *countingHook) Overloaded(p string, cost int) {
	h.mu.Lock()
	h.overloaded[p]++
	h.mu.Unlock()
}

func (h *countingHook) Evicted(p string, keys int) {
	h.mu.Lock()
	h.evicted[p] += keys
	h.mu.Unlock()
}

func (h *countingHook) Error(p string, err error) {
	h.mu.Lock()
	h.error[p]++
	h.errs = append(h.errs, err)
	h.mu.Unlock()
}

// hook returns h as a Hook.
func (h *countingHook) hook() *atomiclimit.Hook {
	return &atomiclimit.Hook{Allowed: h.Allowed, Denied: h.Denied, Overloaded: h.Overloaded, Evicted: h.Evicted, Error: h.Error, Waited: h.Waited}
}
