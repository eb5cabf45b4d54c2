// Command httpdemo starts an HTTP server on 127.0.0.1 behind the httplimit
// middleware and drives it with concurrent clients, then prints, per client
// and policy, the requests admitted beside the limit and the bound
// B + elapsed/T, and the headers a client sees on an admitted and on a
// denied response.
//
// The demo client plays a trusted reverse proxy (127.0.0.0/8 is trusted): it
// sends X-Forwarded-For naming the client it stands for, so one loopback
// connection can show several client IPs, a spoofed leftmost entry that is
// ignored, and two IPv6 clients of one /64 sharing a bucket.
//
//	go run ./cmd/httpdemo            # about 2 seconds
//	go run ./cmd/httpdemo -d 500ms   # quicker
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
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

type policyDef struct {
	name  string
	limit atomiclimit.Limit
	rate  float64 // per second, for the table
	burst int
}

var (
	apiPolicy   = policyDef{"api", atomiclimit.PerSecond(20), 20, 20}
	loginPolicy = policyDef{"login", atomiclimit.PerSecond(5), 5, 5}
)

// A client stands for one end user behind the proxy.
type client struct {
	name    string // what the table shows
	xff     string // the X-Forwarded-For the proxy sends
	method  string
	path    string
	every   time.Duration // 0: as fast as its workers can
	workers int

	sent, ok, denied, other atomic.Int64
}

func main() {
	d := flag.Duration("d", 2*time.Second, "how long the clients run")
	flag.Parse()
	if *d <= 0 {
		fmt.Fprintln(os.Stderr, "httpdemo: -d must be positive")
		os.Exit(2)
	}
	if err := run(*d); err != nil {
		fmt.Fprintln(os.Stderr, "httpdemo:", err)
		os.Exit(1)
	}
}

type hook struct {
	atomiclimit.NopHook
	allowed, denied sync.Map // policy -> *atomic.Int64
}

func (h *hook) add(m *sync.Map, policy string, n int) {
	v, _ := m.LoadOrStore(policy, new(atomic.Int64))
	v.(*atomic.Int64).Add(int64(n))
}
func (h *hook) Allowed(p string, cost int)                 { h.add(&h.allowed, p, 1) }
func (h *hook) Denied(p string, cost int, _ time.Duration) { h.add(&h.denied, p, 1) }

func newLimiter(p policyDef) (*atomiclimit.Keyed[netip.Prefix], error) {
	return atomiclimit.NewKeyed[netip.Prefix](p.limit, p.burst, atomiclimit.WithSweepInterval(time.Second))
}

func run(d time.Duration) error {
	api, err := newLimiter(apiPolicy)
	if err != nil {
		return err
	}
	defer api.Close()
	login, err := newLimiter(loginPolicy)
	if err != nil {
		return err
	}
	defer login.Close()
	key, err := httplimit.ClientIP(httplimit.IPOptions{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
	})
	if err != nil {
		return err
	}
	h := &hook{}
	mux := http.NewServeMux()
	mw, err := httplimit.New(httplimit.Config[netip.Prefix]{
		Key:      key,
		Policies: []httplimit.Policy[netip.Prefix]{{Name: apiPolicy.name, Limiter: api}},
		Routes:   map[string]httplimit.Policy[netip.Prefix]{"POST /login": {Name: loginPolicy.name, Limiter: login}},
		Mux:      mux,
		Headers:  httplimit.AllHeaders,
		Hook:     h,
	})
	if err != nil {
		return err
	}
	mux.Handle("GET /items/{id}", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "item %s\n", r.PathValue("id"))
	})))
	mux.Handle("POST /login", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "welcome\n")
	})))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	fmt.Printf("server on %s: policy %q %v/s burst %d on GET /items/{id}, %q %v/s burst %d on POST /login, per client IP\n\n",
		base, apiPolicy.name, apiPolicy.rate, apiPolicy.burst, loginPolicy.name, loginPolicy.rate, loginPolicy.burst)

	clients := []*client{
		{name: "198.51.100.10 (polite, 10/s)", xff: "198.51.100.10", method: "GET", path: "/items/1", every: 100 * time.Millisecond, workers: 1},
		{name: "198.51.100.20 (greedy)", xff: "198.51.100.20", method: "GET", path: "/items/2", workers: 4},
		{name: "198.51.100.30 (greedy, spoofs XFF)", xff: "6.6.6.6, 198.51.100.30", method: "GET", path: "/items/3", workers: 4},
		{name: "2001:db8:1::a (greedy)", xff: "2001:db8:1::a", method: "GET", path: "/items/4", workers: 2},
		{name: "2001:db8:1::b (same /64)", xff: "2001:db8:1::b", method: "GET", path: "/items/5", workers: 2},
		{name: "198.51.100.20 (login)", xff: "198.51.100.20", method: "POST", path: "/login", workers: 2},
	}
	transport := &http.Transport{MaxIdleConnsPerHost: 16}
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
	fmt.Fprintf(tw, "client\tpolicy\tsent\tadmitted\tdenied\tadmitted/s\tlimit/s\tB + elapsed/T\t\n")
	for _, c := range clients {
		p := apiPolicy
		if c.path == "/login" {
			p = loginPolicy
		}
		bound := float64(p.burst) + elapsed.Seconds()*p.rate
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.1f\t%.0f\t%.1f\t\n", c.name, p.name,
			c.sent.Load(), c.ok.Load(), c.denied.Load(), float64(c.ok.Load())/elapsed.Seconds(), p.rate, bound)
	}
	tw.Flush()
	fmt.Printf("\nran %v. The two 2001:db8:1:: clients share one /64 bucket, so together they get one client's rate;\n"+
		"the spoofed leftmost X-Forwarded-For entry (6.6.6.6) gave 198.51.100.30 no extra bucket.\n", elapsed.Round(time.Millisecond))
	fmt.Printf("hook: admitted %s, denied %s\n", sum(&h.allowed), sum(&h.denied))

	// What a client sees.
	fmt.Println("\n--- what a fresh client sees (GET /items/9 as 192.0.2.99)")
	if err := show(hc, base, "GET", "/items/9", "192.0.2.99"); err != nil {
		return err
	}
	fmt.Println("\n--- and a client over its limit (POST /login as 198.51.100.20)")
	for range loginPolicy.burst + 1 {
		req, _ := http.NewRequest("POST", base+"/login", nil)
		req.Header.Set("X-Forwarded-For", "198.51.100.20")
		if resp, err := hc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	return show(hc, base, "POST", "/login", "198.51.100.20")
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
		resp, err := hc.Do(req)
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				c.other.Add(1)
			}
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.sent.Add(1)
		switch resp.StatusCode {
		case http.StatusOK:
			c.ok.Add(1)
		case http.StatusTooManyRequests:
			c.denied.Add(1)
		default:
			c.other.Add(1)
		}
	}
}

func show(hc *http.Client, base, method, path, clientIP string) error {
	req, _ := http.NewRequest(method, base+path, nil)
	req.Header.Set("X-Forwarded-For", clientIP)
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
