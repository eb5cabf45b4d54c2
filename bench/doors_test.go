package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// The doors' scenarios: one request (call) at a time through the whole
// middleware (interceptor) chain, in process, on a prebuilt request, for
// every implementation in doors.go, and the HTTP door from every core
// (BenchmarkHTTPParallel). The main program runs them in rounds, one
// process per benchmark function a round with every implementation in
// turn, at GOGC=100 (go run . in this directory); by hand:
//
//	GOGC=100 go test -run='^$' -bench='^Benchmark(HTTP|GRPC)$' -count=6 > doors.txt && benchstat -col /impl doors.txt

// okHandler is the application behind every chain: a 200 and nothing else.
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

// clientRequests returns n GET requests from n client addresses, taken from
// 198.18.0.0/15, the range set aside for benchmarks (RFC 2544).
func clientRequests(n int) []*http.Request {
	base := httptest.NewRequest("GET", "/", nil)
	rs := make([]*http.Request, n)
	for i := range rs {
		r := new(http.Request)
		*r = *base
		r.RemoteAddr = fmt.Sprintf("198.%d.%d.%d:4711", 18+i>>16, i>>8&255, i&255)
		rs[i] = r
	}
	return rs
}

// resetRecorder makes rec a fresh ResponseRecorder that keeps its header
// map and body buffer, so that what a request allocates is the chain's.
// (WriteHeader still clones the header map into its snapshot, in every
// chain alike, and the more headers, the more that clone costs.)
func resetRecorder(rec *httptest.ResponseRecorder) {
	//lint:ignore SA1019 the deprecated field is the only way to hand the recorder a map it keeps
	h, body := rec.HeaderMap, rec.Body
	clear(h)
	body.Reset()
	//lint:ignore SA1019 as above
	*rec = httptest.ResponseRecorder{HeaderMap: h, Body: body, Code: http.StatusOK}
}

func BenchmarkHTTP(b *testing.B) {
	for _, sc := range httpScenarios {
		reqs := clientRequests(sc.ips)
		for _, d := range httpDoors {
			// One chain per sub-benchmark, made and warmed once: the
			// testing package calls the function again for each b.N.
			var h http.Handler
			done := func() {}
			b.Run(sc.name+"/impl="+d.id, func(b *testing.B) {
				if h == nil {
					h, done = d.wrap(sc.s, okHandler)
					warmHTTP(h, reqs)
				}
				want := http.StatusOK
				if sc.denied && d.name != floorName {
					want = http.StatusTooManyRequests
				}
				benchServe(b, h, reqs, want)
			})
			done()
		}
	}
}

// warmHTTP serves each of reqs once through h, off the clock: it creates
// every key, and spends a denied scenario's one token.
func warmHTTP(h http.Handler, reqs []*http.Request) {
	rec := httptest.NewRecorder()
	for _, r := range reqs {
		resetRecorder(rec)
		h.ServeHTTP(rec, r)
	}
}

// benchServe serves reqs in turn through h, each into a reset recorder,
// and checks that the last request got status want.
func benchServe(b *testing.B, h http.Handler, reqs []*http.Request, want int) {
	rec := httptest.NewRecorder()
	var allowed int64
	j := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		resetRecorder(rec)
		h.ServeHTTP(rec, reqs[j])
		if rec.Code == http.StatusOK {
			allowed++
		}
		if j++; j == len(reqs) {
			j = 0
		}
	}
	b.StopTimer()
	report(b, allowed)
	if rec.Code != want {
		b.Fatalf("status %d, want %d", rec.Code, want)
	}
}

// BenchmarkHTTPParallel: the door from every core, every request admitted.
// b.RunParallel serves the requests of httpParallel's clients from one
// goroutine per GOMAXPROCS, each goroutine with its own recorder (reset
// before each request, as in benchServe) and its own starting point in the
// clients' turn; the chain and its keys are made before timing. The main
// program runs it at every core count of its -cpu list:
//
//	GOGC=100 go test -run='^$' -bench='^BenchmarkHTTPParallel$' -cpu=1,2 -count=6 > par.txt && benchstat -col /impl par.txt
func BenchmarkHTTPParallel(b *testing.B) {
	sc := httpParallel
	reqs := clientRequests(sc.ips)
	for _, d := range httpDoors {
		var h http.Handler
		done := func() {}
		b.Run(sc.name+"/impl="+d.id, func(b *testing.B) {
			if h == nil {
				h, done = d.wrap(sc.s, okHandler)
				warmHTTP(h, reqs)
			}
			var start, allowed atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				rec := httptest.NewRecorder()
				j := int(start.Add(1)*7919) % len(reqs)
				var n int64
				for pb.Next() {
					resetRecorder(rec)
					h.ServeHTTP(rec, reqs[j])
					if rec.Code == http.StatusOK {
						n++
					}
					if j++; j == len(reqs) {
						j = 0
					}
				}
				allowed.Add(n)
			})
			b.StopTimer()
			report(b, allowed.Load())
			if got := allowed.Load(); got != int64(b.N) {
				b.Fatalf("%d of %d requests admitted, want every one", got, b.N)
			}
		})
		done()
	}
}

// grpcMethod is the full method name of the calls.
const grpcMethod = "/bench.Echo/Say"

func grpcHandler(_ context.Context, req any) (any, error) { return req, nil }

func BenchmarkGRPC(b *testing.B) {
	for _, sc := range grpcScenarios {
		for _, d := range grpcDoors {
			b.Run(sc.name+"/impl="+d.id, func(b *testing.B) {
				icpt, done := d.unary(sc.s)
				defer done()
				benchUnary(b, icpt, sc.denied && icpt != nil)
			})
		}
	}
}

// benchUnary calls icpt (nil: the handler alone) as the server does, on a
// call from one peer whose stream does what the HTTP/2 transport's does
// with headers (headerStream), reset before each call. The first call is
// off the clock (it creates the key, and spends a denied scenario's
// token); the last must be denied if denied says so, and admitted if not.
func benchUnary(b *testing.B, icpt grpc.UnaryServerInterceptor, denied bool) {
	hs := &headerStream{}
	ctx := grpcpeer.NewContext(context.Background(), &grpcpeer.Peer{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.9:4711"))})
	ctx = grpc.NewContextWithServerTransportStream(ctx, hs)
	info := &grpc.UnaryServerInfo{FullMethod: grpcMethod}
	call := func() error {
		if icpt == nil {
			_, err := grpcHandler(ctx, nil)
			return err
		}
		_, err := icpt(ctx, nil, info, grpcHandler)
		return err
	}
	call()
	var allowed int64
	var err error
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		hs.reset()
		if err = call(); err == nil {
			allowed++
		}
	}
	b.StopTimer()
	report(b, allowed)
	switch {
	case denied && status.Code(err) != codes.ResourceExhausted:
		b.Fatalf("last call: %v, want ResourceExhausted", err)
	case !denied && err != nil:
		b.Fatalf("last call: %v, want admitted", err)
	}
}

// headerStream is a grpc.ServerTransportStream for calling an interceptor
// in process: SetHeader and SetTrailer do what the HTTP/2 transport's
// stream does (metadata.Join into the stream's fields, under a lock).
type headerStream struct {
	mu              sync.Mutex
	header, trailer metadata.MD // guarded by mu
}

func (s *headerStream) Method() string { return grpcMethod }

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

// reset forgets the fields: the next SetHeader costs what a fresh stream's
// first one does.
func (s *headerStream) reset() {
	s.mu.Lock()
	s.header, s.trailer = nil, nil
	s.mu.Unlock()
}

// TestDoorsDecide: every door admits under the admit-all limit and, under
// one per hour, admits the first request and denies the next with its own
// 429 (ResourceExhausted), the floor excepted: the benchmarks time what
// each implementation was configured to do.
func TestDoorsDecide(t *testing.T) {
	r := clientRequests(1)[0]
	for _, d := range httpDoors {
		for _, sc := range []struct {
			s    setting
			want []int
		}{
			{admitAll, []int{200, 200, 200}},
			{denyAfterOne, []int{200, 429, 429}},
		} {
			h, done := d.wrap(sc.s, okHandler)
			for i, want := range sc.want {
				if d.name == floorName {
					want = http.StatusOK
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, r)
				if rec.Code != want {
					t.Errorf("HTTP %s, %d/%v, request %d: status %d, want %d", d.name, sc.s.n, sc.s.period, i, rec.Code, want)
				}
			}
			done()
		}
	}
	ctx := grpcpeer.NewContext(context.Background(), &grpcpeer.Peer{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort("198.18.0.9:4711"))})
	ctx = grpc.NewContextWithServerTransportStream(ctx, &headerStream{})
	info := &grpc.UnaryServerInfo{FullMethod: grpcMethod}
	for _, d := range grpcDoors {
		for _, sc := range []struct {
			s    setting
			want []codes.Code
		}{
			{admitAll, []codes.Code{codes.OK, codes.OK, codes.OK}},
			{denyAfterOne, []codes.Code{codes.OK, codes.ResourceExhausted, codes.ResourceExhausted}},
		} {
			icpt, done := d.unary(sc.s)
			for i, want := range sc.want {
				var err error
				if icpt == nil {
					_, err = grpcHandler(ctx, nil)
					want = codes.OK
				} else {
					_, err = icpt(ctx, nil, info, grpcHandler)
				}
				if got := status.Code(err); got != want {
					t.Errorf("gRPC %s, %d/%v, call %d: %v, want %v", d.name, sc.s.n, sc.s.period, i, err, want)
				}
			}
			done()
		}
	}
}
