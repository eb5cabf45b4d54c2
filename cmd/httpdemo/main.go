// Command httpdemo starts an HTTP server on 127.0.0.1 behind the httplimit
// middleware and drives it with concurrent clients, then prints, per client,
// the requests admitted beside each policy's bound, and the headers a
// client sees on an admitted and on a denied response. It plays three user
// stories:
//
//   - every client IP is held to 60 requests per 60 s and 10,000 per rolling
//     24 h, both at once and both advertised (stacked policies); POST /login
//     adds 3 per minute;
//   - GET /reports is limited per authenticated user to 100 per rolling
//     minute, exactly (a sliding log);
//   - a hard limit (10 per second per API key, burst 1) that three server
//     processes share through Redis, each with its own redislimit.Limiter
//     behind the middleware, driven round-robin by concurrent clients; it
//     prints what each process admitted and the fleet's total beside the
//     limit's bound. This part needs a Redis: with redis-server on PATH the
//     demo starts one (on a free loopback port, persistence off), or -redis
//     names one; without either it says so and skips it. The processes are
//     this binary, started again with a flag of their own.
//
// The demo client plays a trusted reverse proxy (127.0.0.0/8 is trusted): it
// sends X-Forwarded-For naming the client it stands for, so one loopback
// connection can show several client IPs, a spoofed leftmost entry that is
// ignored, and two IPv6 clients of one /64 sharing their limits.
//
// It is a module of its own (it needs go-redis, which the root module does
// not depend on); from the repository root:
//
//	go -C cmd/httpdemo run .            # about 4 seconds
//	go -C cmd/httpdemo run . -d 500ms   # quicker
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// The policies, with what the table needs to state their bounds.
type policyDef struct {
	name  string
	rule  atomiclimit.Rule
	quota float64 // admitted at once (the burst, the window's count)
	rate  float64 // admitted per second after that (0: none within the run)
	what  string
}

var (
	minutePolicy = policyDef{"minute", atomiclimit.GCRA(atomiclimit.PerMinute(60), 60), 60, 1, "60 per 60 s (token bucket)"}
	dayPolicy    = policyDef{"day", atomiclimit.Rolling(10_000, 24*time.Hour, time.Hour, 0), 10_000, 0, "10,000 per rolling 24 h, by the hour"}
	loginPolicy  = policyDef{"login", atomiclimit.GCRA(atomiclimit.PerMinute(3), 3), 3, 3.0 / 60, "3 per minute on POST /login"}
	userPolicy   = policyDef{"per-user", atomiclimit.SlidingLog(100, time.Minute), 100, 0, "100 per rolling minute per user, exactly"}
)

// A client stands for one end user behind the proxy.
type client struct {
	name    string // what the table shows
	xff     string // the X-Forwarded-For the proxy sends
	user    string // the Authorization bearer token, if any
	method  string
	path    string
	every   time.Duration // 0: as fast as its workers can
	workers int
	binding policyDef // the policy that binds it, for the bound column

	tally
}

// tally counts the responses one client or process got.
type tally struct {
	sent, ok, denied, other atomic.Int64
}

// count tallies a response with status.
func (t *tally) count(status int) {
	t.sent.Add(1)
	switch status {
	case http.StatusOK:
		t.ok.Add(1)
	case http.StatusTooManyRequests:
		t.denied.Add(1)
	default:
		t.other.Add(1)
	}
}

func main() {
	redis.SetLogger(quietLogger{})
	if len(os.Args) > 1 && os.Args[1] == serveFleetFlag {
		// One of the fleet's server processes, started by the demo itself.
		if err := serveFleet(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "httpdemo fleet process:", err)
			os.Exit(1)
		}
		return
	}
	d := flag.Duration("d", 2*time.Second, "how long the clients run, in each part")
	redisAddr := flag.String("redis", "", "host:port of the Redis for the fleet part (default: start a redis-server from PATH)")
	flag.Parse()
	if *d <= 0 {
		fmt.Fprintln(os.Stderr, "httpdemo: -d must be positive")
		os.Exit(2)
	}
	if err := run(*d); err != nil {
		fmt.Fprintln(os.Stderr, "httpdemo:", err)
		os.Exit(1)
	}
	// On an interrupt the fleet part stops its processes before it returns.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := runFleet(ctx, *d, *redisAddr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpdemo:", err)
		os.Exit(1)
	}
}

type hook struct {
	allowed, denied sync.Map // policy -> *atomic.Int64
}

func (h *hook) add(m *sync.Map, policy string, n int) {
	v, _ := m.LoadOrStore(policy, new(atomic.Int64))
	v.(*atomic.Int64).Add(int64(n))
}
func (h *hook) Allowed(p string, cost int)                 { h.add(&h.allowed, p, 1) }
func (h *hook) Denied(p string, cost int, _ time.Duration) { h.add(&h.denied, p, 1) }

// Hook returns h as the middleware's Hook.
func (h *hook) Hook() *atomiclimit.Hook {
	return &atomiclimit.Hook{Allowed: h.Allowed, Denied: h.Denied}
}

func newLimiter[K comparable](p policyDef) (*atomiclimit.Keyed[K], error) {
	return atomiclimit.NewKeyedRule[K](p.rule, atomiclimit.WithSweepInterval(time.Second))
}

// byUser keys a request on its bearer token: the demo's stand-in for an
// authenticated user.
func byUser(r *http.Request) (string, error) {
	if u, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && u != "" {
		return u, nil
	}
	return "", httplimit.ErrNoKey
}

func run(d time.Duration) error {
	minute, err := newLimiter[netip.Prefix](minutePolicy)
	if err != nil {
		return err
	}
	defer minute.Close()
	day, err := newLimiter[netip.Prefix](dayPolicy)
	if err != nil {
		return err
	}
	defer day.Close()
	login, err := newLimiter[netip.Prefix](loginPolicy)
	if err != nil {
		return err
	}
	defer login.Close()
	perUser, err := newLimiter[string](userPolicy)
	if err != nil {
		return err
	}
	defer perUser.Close()
	key, err := httplimit.ClientIP(httplimit.IPOptions{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	})
	if err != nil {
		return err
	}
	h := &hook{}
	mux := http.NewServeMux()
	perIP, err := httplimit.New(httplimit.Config[netip.Prefix]{
		Key: key,
		Policies: []atomiclimit.Policy[netip.Prefix]{
			{Name: minutePolicy.name, Limiter: minute},
			{Name: dayPolicy.name, Limiter: day},
		},
		Routes:  map[string]atomiclimit.Policy[netip.Prefix]{"POST /login": {Name: loginPolicy.name, Limiter: login}},
		Mux:     mux,
		Exclude: func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/reports") },
		Hook:    h.Hook(),
	})
	if err != nil {
		return err
	}
	users, err := httplimit.New(httplimit.Config[string]{
		Key:      byUser,
		Policies: []atomiclimit.Policy[string]{{Name: userPolicy.name, Limiter: perUser}},
		Hook:     h.Hook(),
	})
	if err != nil {
		return err
	}
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "item %s\n", r.PathValue("id"))
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "welcome\n")
	})
	mux.Handle("GET /reports", users.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "report\n")
	})))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: perIP.Handler(mux), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	fmt.Printf("server on %s\n", base)
	for _, p := range []policyDef{minutePolicy, dayPolicy, loginPolicy} {
		fmt.Printf("  per client IP, %-9q %s\n", p.name, p.what)
	}
	fmt.Printf("  per user,      %-9q %s, on GET /reports\n\n", userPolicy.name, userPolicy.what)

	clients := []*client{
		{name: "198.51.100.10 (polite, 10/s)", xff: "198.51.100.10", method: "GET", path: "/items/1", every: 100 * time.Millisecond, workers: 1, binding: minutePolicy},
		{name: "198.51.100.20 (greedy)", xff: "198.51.100.20", method: "GET", path: "/items/2", workers: 4, binding: minutePolicy},
		{name: "198.51.100.30 (greedy, spoofs XFF)", xff: "6.6.6.6, 198.51.100.30", method: "GET", path: "/items/3", workers: 4, binding: minutePolicy},
		{name: "2001:db8:1::a (greedy)", xff: "2001:db8:1::a", method: "GET", path: "/items/4", workers: 2, binding: minutePolicy},
		{name: "2001:db8:1::b (same /64)", xff: "2001:db8:1::b", method: "GET", path: "/items/5", workers: 2, binding: minutePolicy},
		{name: "198.51.100.40 (login)", xff: "198.51.100.40", method: "POST", path: "/login", workers: 2, binding: loginPolicy},
		{name: "user alice (greedy)", xff: "198.51.100.50", user: "alice", method: "GET", path: "/reports", workers: 4, binding: userPolicy},
	}
	transport := &http.Transport{MaxIdleConnsPerHost: 32}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 5 * time.Second}

	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range clients {
		for range c.workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.drive(ctx, hc, base)
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "client\tbinding policy\tsent\tadmitted\tdenied\tbound\tday charged\t\n")
	for _, c := range clients {
		p := c.binding
		bound := int(p.quota + elapsed.Seconds()*p.rate)
		charged := "-"
		if c.user == "" {
			ip, _ := key(&http.Request{RemoteAddr: "127.0.0.1:1", Header: http.Header{"X-Forwarded-For": {c.xff}}})
			left := day.PeekN(ip, time.Now(), 0)
			charged = fmt.Sprint(10_000 - left.Remaining)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t\n", c.name, p.name, c.sent.Load(), c.ok.Load(), c.denied.Load(), bound, charged)
	}
	tw.Flush()
	fmt.Printf("\nran %v; bound: the most the binding policy admits in that time (burst + elapsed × rate for a token\n"+
		"bucket, the count for the log). The two 2001:db8:1:: clients share one /64, so together they get one\n"+
		"client's limit; the spoofed leftmost X-Forwarded-For entry (6.6.6.6) gave 198.51.100.30 nothing extra.\n"+
		"Day charged: what the rolling day counts for the client IP. It is exactly what was admitted (the two\n"+
		"2001:db8:1:: rows share one count): a request the minute or the login policy denied was given back.\n"+
		"(A token bucket gives an admission back only if nothing was admitted on the key since: under\n"+
		"contention on one key it may stay charged, stricter, never looser.)\n", elapsed.Round(time.Millisecond))
	fmt.Printf("hook: admitted %s; denied %s\n", sum(&h.allowed), sum(&h.denied))

	// What a client sees.
	fmt.Println("\n--- what a fresh client sees (GET /items/9 as 192.0.2.99)")
	if err := show(hc, base, "GET", "/items/9", "192.0.2.99", ""); err != nil {
		return err
	}
	fmt.Println("\n--- a client over its login limit (POST /login as 198.51.100.40)")
	if err := show(hc, base, "POST", "/login", "198.51.100.40", ""); err != nil {
		return err
	}
	fmt.Println("\n--- a user over the rolling minute (GET /reports as alice)")
	return show(hc, base, "GET", "/reports", "198.51.100.50", "alice")
}

func (c *client) drive(ctx context.Context, hc *http.Client, base string) {
	var tick *time.Ticker
	if c.every > 0 {
		tick = time.NewTicker(c.every)
		defer tick.Stop()
	}
	for ctx.Err() == nil {
		if tick != nil {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		req, _ := http.NewRequestWithContext(ctx, c.method, base+c.path, nil)
		req.Header.Set("X-Forwarded-For", c.xff)
		if c.user != "" {
			req.Header.Set("Authorization", "Bearer "+c.user)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				c.other.Add(1)
			}
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.count(resp.StatusCode)
	}
}

func show(hc *http.Client, base, method, path, clientIP, user string) error {
	req, _ := http.NewRequest(method, base+path, nil)
	req.Header.Set("X-Forwarded-For", clientIP)
	if user != "" {
		req.Header.Set("Authorization", "Bearer "+user)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s %s\n", resp.Proto, resp.Status)
	var names []string
	for k := range resp.Header {
		if k != "Date" {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range resp.Header[k] {
			fmt.Printf("%s: %s\n", k, v)
		}
	}
	fmt.Printf("\n%s", body)
	return nil
}

func sum(m *sync.Map) string {
	var parts []string
	m.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
