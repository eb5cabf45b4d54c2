// Command live measures the doors on live servers over loopback: one
// server process per variant, pinned to one core with GOMAXPROCS=1, driven
// from the other core, the variants interleaved over rounds, with every
// request admitted and then with every request denied. It prints requests
// per second, the ratio to the variant with no limiter, and the server's
// CPU time per request (from /proc/PID/stat). It is not part of the main
// job (go run . in bench/) nor of CI: it needs two cores, taskset and wrk.
//
//	go -C bench run ./live                  # 3 rounds of 5 s per variant and mode
//	go -C bench run ./live -d 3s -rounds 5 -grpc=false
//
// HTTP: wrk -t1 -c32 for the run's duration, all requests from 127.0.0.1.
// Variants: no limiter, atomiclimit's httplimit, chi/httprate, go-limiter's
// httplimit, and a map of x/time/rate limiters under a mutex that writes no
// headers. gRPC: a Go client (this program, -client) with 32 goroutines on
// one connection calling grpc.health.v1.Health/Check; variants: no
// interceptor, atomiclimit's grpclimit, go-grpc-middleware's ratelimit over
// a map of x/time/rate limiters. Admitted: a billion per second with a
// burst of 2^30 per client IP; denied: one per hour (spent by the
// readiness probe), so every timed request is denied.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/httprate"
	grpcratelimit "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	gohttplimit "github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// A limit is what each client IP is held to: n per period, burst.
type limit struct {
	n      int
	period time.Duration
	burst  int
}

var (
	admitAll = limit{n: 1_000_000_000, period: time.Second, burst: 1 << 30}
	denyAll  = limit{n: 1, period: time.Hour, burst: 1}
)

func (l limit) perSecond() float64 { return float64(l.n) / l.period.Seconds() }

func limitOf(mode string) limit {
	if mode == "denied" {
		return denyAll
	}
	return admitAll
}

var (
	httpVariants = []string{"none", "atomiclimit", "chi/httprate", "go-limiter", "x/time/rate map, no headers"}
	grpcVariants = []string{"none", "atomiclimit", "go-grpc-middleware"}
	modes        = []string{"admitted", "denied"}
)

func main() {
	serve := flag.String("serve", "", "run one server: http:VARIANT:MODE or grpc:VARIANT:MODE (used by the driver)")
	client := flag.String("client", "", "run the gRPC client against this address for -d, printing its counts (used by the driver)")
	dur := flag.Duration("d", 5*time.Second, "length of each measured run")
	rounds := flag.Int("rounds", 3, "rounds; each runs every variant in every mode once")
	conns := flag.Int("c", 32, "HTTP connections (wrk -c), or gRPC goroutines on one connection")
	doGRPC := flag.Bool("grpc", true, "measure the gRPC variants too")
	flag.Parse()
	var err error
	switch {
	case *serve != "":
		err = runServer(*serve)
	case *client != "":
		err = runClient(*client, *dur, *conns)
	default:
		err = drive(*dur, *rounds, *conns, *doGRPC)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		os.Exit(1)
	}
}

// ---- servers ----

func runServer(spec string) error {
	door, rest, _ := strings.Cut(spec, ":")
	i := strings.LastIndex(rest, ":")
	if i < 0 {
		return fmt.Errorf("-serve=%s: want http:VARIANT:MODE or grpc:VARIANT:MODE", spec)
	}
	variant, mode := rest[:i], rest[i+1:]
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	l := limitOf(mode)
	switch door {
	case "http":
		h, err := httpHandler(variant, l)
		if err != nil {
			return err
		}
		fmt.Println("listening", lis.Addr())
		return (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(lis)
	case "grpc":
		opts, err := grpcOptions(variant, l)
		if err != nil {
			return err
		}
		srv := grpc.NewServer(opts...)
		healthpb.RegisterHealthServer(srv, health.NewServer())
		fmt.Println("listening", lis.Addr())
		return srv.Serve(lis)
	}
	return fmt.Errorf("-serve=%s: unknown door %q", spec, door)
}

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

func httpHandler(variant string, l limit) (http.Handler, error) {
	switch variant {
	case "none":
		return okHandler, nil
	case "atomiclimit":
		lim, err := atomiclimit.NewKeyed[netip.Prefix](gcra.Per(l.n, l.period), l.burst)
		if err != nil {
			return nil, err
		}
		m, err := httplimit.New(httplimit.Config[netip.Prefix]{Key: httplimit.RemoteIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "default", Limiter: lim}}})
		if err != nil {
			return nil, err
		}
		return m.Handler(okHandler), nil
	case "chi/httprate":
		window := max(time.Duration(float64(l.burst)/l.perSecond()*float64(time.Second)), time.Nanosecond)
		key := func(r *http.Request) (string, error) {
			ip, _, err := net.SplitHostPort(r.RemoteAddr)
			if err != nil {
				ip = r.RemoteAddr
			}
			return httprate.CanonicalizeIP(ip), nil
		}
		return httprate.LimitBy(l.burst, window, key)(okHandler), nil
	case "go-limiter":
		// As bench/'s go-limiter: with 2^30 tokens, a 1 h interval (its
		// refill is whole only for tokens ≤ 10^9/rate); one per hour as is.
		interval := time.Hour
		st, err := memorystore.New(&memorystore.Config{Tokens: uint64(l.burst), Interval: interval})
		if err != nil {
			return nil, err
		}
		m, err := gohttplimit.NewMiddleware(st, gohttplimit.IPKeyFunc())
		if err != nil {
			return nil, err
		}
		return m.Handle(okHandler), nil
	case "x/time/rate map, no headers":
		var mu sync.Mutex
		m := map[string]*rate.Limiter{}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ip, _, _ := net.SplitHostPort(r.RemoteAddr)
			mu.Lock()
			lim, ok := m[ip]
			if !ok {
				lim = rate.NewLimiter(rate.Limit(l.perSecond()), l.burst)
				m[ip] = lim
			}
			ok = lim.Allow()
			mu.Unlock()
			if !ok {
				w.WriteHeader(http.StatusTooManyRequests)
				return
			}
			okHandler.ServeHTTP(w, r)
		}), nil
	}
	return nil, fmt.Errorf("unknown HTTP variant %q", variant)
}

func grpcOptions(variant string, l limit) ([]grpc.ServerOption, error) {
	switch variant {
	case "none":
		return nil, nil
	case "atomiclimit":
		lim, err := atomiclimit.NewKeyed[netip.Prefix](gcra.Per(l.n, l.period), l.burst)
		if err != nil {
			return nil, err
		}
		m, err := grpclimit.New(grpclimit.Config[netip.Prefix]{Key: grpclimit.PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "default", Limiter: lim}}})
		if err != nil {
			return nil, err
		}
		return []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary())}, nil
	case "go-grpc-middleware":
		return []grpc.ServerOption{grpc.ChainUnaryInterceptor(grpcratelimit.UnaryServerInterceptor(&peerLimiter{l: l, m: map[netip.Addr]*rate.Limiter{}}))}, nil
	}
	return nil, fmt.Errorf("unknown gRPC variant %q", variant)
}

// peerLimiter is a go-grpc-middleware ratelimit.Limiter: one x/time/rate
// limiter per peer IP in a map under a mutex.
type peerLimiter struct {
	l  limit
	mu sync.Mutex
	m  map[netip.Addr]*rate.Limiter // guarded by mu
}

var errLimited = errors.New("rate limit exceeded")

func (p *peerLimiter) Limit(ctx context.Context) error {
	pr, ok := grpcpeer.FromContext(ctx)
	if !ok {
		return errors.New("no peer")
	}
	a, ok := pr.Addr.(*net.TCPAddr)
	if !ok {
		return errors.New("peer is not a TCP address")
	}
	ip := a.AddrPort().Addr().Unmap()
	p.mu.Lock()
	lim, found := p.m[ip]
	if !found {
		lim = rate.NewLimiter(rate.Limit(p.l.perSecond()), p.l.burst)
		p.m[ip] = lim
	}
	ok = lim.Allow()
	p.mu.Unlock()
	if !ok {
		return errLimited
	}
	return nil
}

// ---- the gRPC client ----

// runClient calls Health/Check from conns goroutines on one connection for
// d and prints "ok N denied N other N".
func runClient(addr string, d time.Duration, conns int) error {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	var ok, denied, other atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &healthpb.HealthCheckRequest{}
			for time.Now().Before(deadline) {
				_, err := hc.Check(context.Background(), req)
				switch status.Code(err) {
				case codes.OK:
					ok.Add(1)
				case codes.ResourceExhausted:
					denied.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("ok %d denied %d other %d\n", ok.Load(), denied.Load(), other.Load())
	return nil
}

// ---- the driver ----

// A result is one measured run of one variant in one mode.
type result struct {
	door, variant, mode  string
	requests, non2xx     int64
	seconds, cpuSeconds  float64
	perSecond, cpuPerReq float64
}

func drive(d time.Duration, rounds, conns int, doGRPC bool) error {
	for _, tool := range []string{"taskset", "wrk"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is needed: %w", tool, err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("server: taskset -c 0, GOMAXPROCS=1; load: taskset -c 1, %d connections, %v a run, %d rounds\n", conns, d, rounds)
	var all []result
	for r := range rounds {
		for _, mode := range modes {
			for _, v := range httpVariants {
				res, err := runHTTP(self, v, mode, d, conns)
				if err != nil {
					return err
				}
				fmt.Printf("round %d  http  %-8s %-28s %9.0f req/s  %6.2f µs CPU/req  (%d requests, %d not 2xx)\n", r+1, mode, v, res.perSecond, 1e6*res.cpuPerReq, res.requests, res.non2xx)
				all = append(all, res)
			}
			if !doGRPC {
				continue
			}
			for _, v := range grpcVariants {
				res, err := runGRPC(self, v, mode, d, conns)
				if err != nil {
					return err
				}
				fmt.Printf("round %d  grpc  %-8s %-28s %9.0f calls/s  %6.2f µs CPU/call  (%d calls, %d not OK)\n", r+1, mode, v, res.perSecond, 1e6*res.cpuPerReq, res.requests, res.non2xx)
				all = append(all, res)
			}
		}
	}
	summarize(all)
	return nil
}

// startServer starts one server process pinned to core 0 and returns it
// and its address.
func startServer(self, spec string) (*exec.Cmd, string, error) {
	cmd := exec.Command("taskset", "-c", "0", self, "-serve="+spec)
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		stop(cmd)
		return nil, "", fmt.Errorf("server %s: %q, %v", spec, line, err)
	}
	return cmd, addr, nil
}

func stop(cmd *exec.Cmd) {
	cmd.Process.Kill()
	cmd.Wait()
}

// cpuSeconds is the user and system CPU time of process pid so far.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which ends with the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	// utime and stime are fields 14 and 15 of stat, 12 and 13 here.
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	const userHZ = 100 // clock ticks per second in /proc on Linux
	return (ut + st) / userHZ, nil
}

var (
	wrkRequests = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m)`)
	wrkNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
)

func runHTTP(self, variant, mode string, d time.Duration, conns int) (result, error) {
	res := result{door: "http", variant: variant, mode: mode}
	cmd, addr, err := startServer(self, "http:"+variant+":"+mode)
	if err != nil {
		return res, err
	}
	defer stop(cmd)
	url := "http://" + addr + "/"
	// Readiness, and in the denied mode the one token.
	r, err := http.Get(url)
	if err != nil {
		return res, err
	}
	r.Body.Close()
	cpu0, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	out, err := exec.Command("taskset", "-c", "1", "wrk", "-t1", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", int(d.Seconds())), url).CombinedOutput()
	if err != nil {
		return res, fmt.Errorf("wrk: %v: %s", err, out)
	}
	cpu1, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	m := wrkRequests.FindSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("wrk output: %s", out)
	}
	res.requests, _ = strconv.ParseInt(string(m[1]), 10, 64)
	secs, _ := strconv.ParseFloat(string(m[2]), 64)
	res.seconds = secs * map[string]float64{"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60}[string(m[3])]
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		res.non2xx, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	res.cpuSeconds = cpu1 - cpu0
	res.perSecond = float64(res.requests) / res.seconds
	res.cpuPerReq = res.cpuSeconds / float64(res.requests)
	return res, nil
}

func runGRPC(self, variant, mode string, d time.Duration, conns int) (result, error) {
	res := result{door: "grpc", variant: variant, mode: mode}
	cmd, addr, err := startServer(self, "grpc:"+variant+":"+mode)
	if err != nil {
		return res, err
	}
	defer stop(cmd)
	// Readiness, and in the denied mode the one token: a short client run.
	probe := exec.Command(self, "-client="+addr, "-d=1ms", "-c=1")
	if out, err := probe.CombinedOutput(); err != nil {
		return res, fmt.Errorf("probe: %v: %s", err, out)
	}
	cpu0, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	client := exec.Command("taskset", "-c", "1", self, "-client="+addr, fmt.Sprintf("-d=%v", d), fmt.Sprintf("-c=%d", conns))
	client.Env = append(os.Environ(), "GOMAXPROCS=1")
	out, err := client.CombinedOutput()
	if err != nil {
		return res, fmt.Errorf("client: %v: %s", err, out)
	}
	res.seconds = d.Seconds()
	cpu1, err := cpuSeconds(cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	var ok, denied, other int64
	if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "ok %d denied %d other %d", &ok, &denied, &other); err != nil {
		return res, fmt.Errorf("client output %q: %v", out, err)
	}
	if other > 0 {
		return res, fmt.Errorf("%s %s: %d calls failed otherwise", variant, mode, other)
	}
	res.requests, res.non2xx = ok+denied, denied
	res.cpuSeconds = cpu1 - cpu0
	res.perSecond = float64(res.requests) / res.seconds
	res.cpuPerReq = res.cpuSeconds / float64(res.requests)
	return res, nil
}

// summarize prints, per door, mode and variant, the medians over the
// rounds of requests per second, its ratio to the variant with no limiter
// (the median of the per-round ratios), and CPU per request.
func summarize(all []result) {
	fmt.Println("\nmedians over the rounds (ratio: per-round req/s ÷ the same round's no-limiter req/s, median):")
	fmt.Printf("%-5s %-9s %-28s %12s %10s %14s %10s\n", "door", "mode", "variant", "req/s", "ratio", "CPU µs/req", "not 2xx/OK")
	for _, door := range []string{"http", "grpc"} {
		variants := httpVariants
		if door == "grpc" {
			variants = grpcVariants
		}
		for _, mode := range modes {
			// The rounds in order: the k-th run of each variant is round k.
			base := pick(all, door, "none", mode)
			if len(base) == 0 {
				continue
			}
			for _, v := range variants {
				runs := pick(all, door, v, mode)
				var rps, cpu, ratio, bad []float64
				for k, r := range runs {
					rps = append(rps, r.perSecond)
					cpu = append(cpu, 1e6*r.cpuPerReq)
					bad = append(bad, float64(r.non2xx)/float64(r.requests))
					if k < len(base) {
						ratio = append(ratio, r.perSecond/base[k].perSecond)
					}
				}
				fmt.Printf("%-5s %-9s %-28s %12.0f %9.2f× %14.2f %9.0f%%\n", door, mode, v, median(rps), median(ratio), median(cpu), 100*median(bad))
			}
		}
	}
}

func pick(all []result, door, variant, mode string) []result {
	var out []result
	for _, r := range all {
		if r.door == door && r.variant == variant && r.mode == mode {
			out = append(out, r)
		}
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
