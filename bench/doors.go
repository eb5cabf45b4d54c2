package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/didip/tollbooth/v7"
	tblimiter "github.com/didip/tollbooth/v7/limiter"
	"github.com/go-chi/httprate"
	grpcratelimit "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	gohttplimit "github.com/sethvargo/go-limiter/httplimit"
	ululestdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	grpcpeer "google.golang.org/grpc/peer"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/grpclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// The doors: the same limits behind net/http middleware and a gRPC unary
// interceptor. atomiclimit's (httplimit, grpclimit) stand beside the peers'
// own middleware, each keyed on the client's IP address as its own
// documentation shows and writing the headers (metadata) it writes by
// default, and beside a floor: the same chain with no limiter in it.

// doorIPs is the number of client addresses the cycled HTTP scenario takes
// turns with.
const doorIPs = 100_000

// A doorScenario is one HTTP or gRPC scenario: its name in the benchmark
// (less impl=…), the limit every client is held to, the number of client
// addresses the requests take turns with, and whether every timed request
// is denied.
type doorScenario struct {
	name   string
	s      setting
	ips    int
	denied bool
}

var (
	httpScenarios = []doorScenario{
		{name: "ips=1/result=admitted", s: admitAll, ips: 1},
		{name: "ips=1/result=denied", s: denyAfterOne, ips: 1, denied: true},
		{name: fmt.Sprintf("ips=%d/result=admitted", doorIPs), s: admitAll, ips: doorIPs},
	}
	// httpParallel is the door from every core: the requests of doorIPs
	// clients served by one goroutine per core at each core count of the
	// -cpu list (BenchmarkHTTPParallel).
	httpParallel  = doorScenario{name: fmt.Sprintf("ips=%d/result=admitted", doorIPs), s: admitAll, ips: doorIPs}
	grpcScenarios = []doorScenario{
		{name: "result=admitted", s: admitAll, ips: 1},
		{name: "result=denied", s: denyAfterOne, ips: 1, denied: true},
	}
)

// An httpDoor is one net/http middleware under comparison.
type httpDoor struct {
	name string
	id   string // in benchmark names: impl=id
	note string
	// wrap returns next behind the middleware, each client IP held to s,
	// and what releases the middleware's resources (sweepers).
	wrap func(s setting, next http.Handler) (http.Handler, func())
	// headers: a rate-limiting middleware that writes rate-limit headers,
	// as ours does (not the plain baseline, not the floor).
	headers bool
}

// floorName is the implementation with no limiter in every scenario: the
// least any limiter in that scenario must cost.
const floorName = "floor"

// xrateDoorName is the plain baseline's name: a map of x/time/rate limiters
// behind a mutex, no headers.
const xrateDoorName = "x/time/rate map, no headers"

var httpDoors = []httpDoor{
	{
		name:    ours,
		id:      ours,
		note:    "`httplimit.New(Config{Key: httplimit.RemoteIP, Policies: {{Name: \"default\", Limiter: Keyed[netip.Prefix]}}})`, `Handler`: the default headers (`RateLimit-Policy` and `RateLimit` on every response, `Retry-After` and a problem+json body on a 429)",
		headers: true,
		wrap: func(s setting, next http.Handler) (http.Handler, func()) {
			lim := must(atomiclimit.NewKeyed[netip.Prefix](ourLimit(s), s.burst))
			m := must(httplimit.New(httplimit.Config[netip.Prefix]{
				Key:      httplimit.RemoteIP,
				Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "default", Limiter: lim}},
			}))
			return m.Handler(next), lim.Close
		},
	},
	{
		name:    "chi/httprate",
		id:      "chi-httprate",
		note:    "`httprate.LimitBy(burst, burst·period/n, key)` with the key of its (deprecated) `KeyByIP`: `CanonicalizeIP` of `RemoteAddr`'s host, its local counter (a sliding-window counter in maps under a mutex); headers `X-RateLimit-Limit`, `-Remaining`, `-Reset` (and `Retry-After` on a 429)",
		headers: true,
		wrap: func(s setting, next http.Handler) (http.Handler, func()) {
			key := func(r *http.Request) (string, error) {
				ip, _, err := net.SplitHostPort(r.RemoteAddr)
				if err != nil {
					ip = r.RemoteAddr
				}
				return httprate.CanonicalizeIP(ip), nil
			}
			return httprate.LimitBy(s.burst, windowOf(s), key)(next), func() {}
		},
	},
	{
		name:    "go-limiter",
		id:      "go-limiter",
		note:    "`sethvargo/go-limiter/httplimit.NewMiddleware(memorystore, IPKeyFunc())` (`RemoteAddr`), its store configured as in the limiter scenarios; headers `X-RateLimit-Limit`, `-Remaining`, `-Reset` (and `Retry-After` on a 429)",
		headers: true,
		wrap: func(s setting, next http.Handler) (http.Handler, func()) {
			st := newGoLimiterStore(s)
			m := must(gohttplimit.NewMiddleware(st, gohttplimit.IPKeyFunc()))
			return m.Handle(next), func() { st.Close(context.Background()) }
		},
	},
	{
		name:    "ulule",
		id:      "ulule",
		note:    "`ulule/limiter/v3` `drivers/middleware/stdlib.NewMiddleware` over its `memory` store, `Rate{Period: burst·period/n, Limit: burst}`, its default key (`RemoteAddr`); headers `X-RateLimit-Limit`, `-Remaining`, `-Reset`",
		headers: true,
		wrap: func(s setting, next http.Handler) (http.Handler, func()) {
			return ululestdlib.NewMiddleware(newUlule(s).l).Handler(next), func() {}
		},
	},
	{
		name:    "tollbooth",
		id:      "tollbooth",
		note:    "`didip/tollbooth/v7` (v7.0.2) `LimitHandler(NewLimiter(n/s, nil).SetBurst(burst).SetIPLookups({\"RemoteAddr\"}))`: a limiter of its own copy of x/time/rate per key (IP and path) in an expirable cache, under a mutex; headers `X-Rate-Limit-Limit`, `-Duration`, `-Request-Remote-Addr`, `RateLimit-Limit`, `-Reset`, `-Remaining`",
		headers: true,
		wrap: func(s setting, next http.Handler) (http.Handler, func()) {
			lmt := tollbooth.NewLimiter(s.perSecond(), &tblimiter.ExpirableOptions{DefaultExpirationTTL: time.Hour}).
				SetBurst(s.burst).
				SetIPLookups([]string{"RemoteAddr"})
			return tollbooth.LimitHandler(lmt, next), func() {}
		},
	},
	{
		name: xrateDoorName,
		id:   "xrate-map-mutex",
		note: "a baseline, not a library's middleware: `map[string]*rate.Limiter` keyed on `RemoteAddr`'s host behind a `sync.Mutex`, `Allow()`, a bare 429 on a denial; it writes no headers",
		wrap: func(s setting, next http.Handler) (http.Handler, func()) {
			return &xrateHTTP{s: s, m: map[string]*rate.Limiter{}, next: next}, func() {}
		},
	},
	{
		name: floorName,
		id:   floorName,
		note: "not a limiter: the same chain with no middleware, the handler alone",
		wrap: func(_ setting, next http.Handler) (http.Handler, func()) { return next, func() {} },
	},
}

// windowOf is the window in which s admits its burst: burst·period/n.
func windowOf(s setting) time.Duration {
	return max(time.Duration(float64(s.burst)/s.perSecond()*float64(time.Second)), time.Nanosecond)
}

// xrateHTTP is the plain baseline: one x/time/rate limiter per client IP in
// a map under a mutex, and a bare 429.
type xrateHTTP struct {
	s    setting
	mu   sync.Mutex
	m    map[string]*rate.Limiter // guarded by mu
	next http.Handler
}

func (x *xrateHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	x.mu.Lock()
	l, ok := x.m[ip]
	if !ok {
		l = rate.NewLimiter(rate.Limit(x.s.perSecond()), x.s.burst)
		x.m[ip] = l
	}
	ok = l.Allow()
	x.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	x.next.ServeHTTP(w, r)
}

// A grpcDoor is one unary server interceptor under comparison.
type grpcDoor struct {
	name string
	id   string
	note string
	// unary returns the interceptor, each peer IP held to s (nil: the
	// floor, the handler called with no interceptor), and what releases
	// its resources.
	unary func(s setting) (grpc.UnaryServerInterceptor, func())
}

var grpcDoors = []grpcDoor{
	{
		name: ours,
		id:   ours,
		note: "`grpclimit.New(Config{Key: grpclimit.PeerIP, Policies: {{Name: \"default\", Limiter: Keyed[netip.Prefix]}}})`, `Unary()`: the default metadata (`ratelimit` and `ratelimit-policy` on a denial, with a `ResourceExhausted` status carrying `RetryInfo` and `QuotaFailure` details)",
		unary: func(s setting) (grpc.UnaryServerInterceptor, func()) {
			lim := must(atomiclimit.NewKeyed[netip.Prefix](ourLimit(s), s.burst))
			m := must(grpclimit.New(grpclimit.Config[netip.Prefix]{
				Key:      grpclimit.PeerIP,
				Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "default", Limiter: lim}},
			}))
			return m.Unary(), lim.Close
		},
	},
	{
		name: "go-grpc-middleware",
		id:   "go-grpc-middleware",
		note: "`grpc-ecosystem/go-grpc-middleware/v2` `interceptors/ratelimit.UnaryServerInterceptor` over its `Limiter` interface, implemented here the way its docs suggest with x/time/rate: one `rate.Limiter` per peer IP in a map under a `sync.Mutex`, `Allow()`; a denial is its `ResourceExhausted` status with a formatted message, no metadata",
		unary: func(s setting) (grpc.UnaryServerInterceptor, func()) {
			return grpcratelimit.UnaryServerInterceptor(&xratePeers{s: s, m: map[netip.Addr]*rate.Limiter{}}), func() {}
		},
	},
	{
		name:  floorName,
		id:    floorName,
		note:  "not a limiter: the handler called with no interceptor",
		unary: func(setting) (grpc.UnaryServerInterceptor, func()) { return nil, func() {} },
	},
}

// errPeerLimited is xratePeers' denial.
var errPeerLimited = errors.New("rate limit exceeded")

// xratePeers is a go-grpc-middleware ratelimit.Limiter: one x/time/rate
// limiter per peer IP in a map under a mutex.
type xratePeers struct {
	s  setting
	mu sync.Mutex
	m  map[netip.Addr]*rate.Limiter // guarded by mu
}

func (x *xratePeers) Limit(ctx context.Context) error {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return errors.New("no peer")
	}
	var ip netip.Addr
	switch a := p.Addr.(type) {
	case *net.TCPAddr:
		ip = a.AddrPort().Addr().Unmap()
	default:
		return errors.New("peer is not a TCP address")
	}
	x.mu.Lock()
	l, found := x.m[ip]
	if !found {
		l = rate.NewLimiter(rate.Limit(x.s.perSecond()), x.s.burst)
		x.m[ip] = l
	}
	ok = l.Allow()
	x.mu.Unlock()
	if !ok {
		return errPeerLimited
	}
	return nil
}

// httpDoorNames and grpcDoorNames are the implementations' names, in their
// tables' order.
func httpDoorNames() []string {
	var ns []string
	for _, d := range httpDoors {
		ns = append(ns, d.name)
	}
	return ns
}

func grpcDoorNames() []string {
	var ns []string
	for _, d := range grpcDoors {
		ns = append(ns, d.name)
	}
	return ns
}
