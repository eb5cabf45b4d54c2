// Command prometheus exports httplimit's hook events as Prometheus metrics
// with the official client library, which lives in this separate module so
// that atomiclimit itself does not depend on it.
//
//	go run .                 # serves /hello and /metrics on 127.0.0.1:8080
//	go run . -selftest       # sends a few requests, prints the metrics, exits
//
// The metrics, all labelled by policy name (a bounded set; never by key):
//
//	httplimit_requests_total{policy, outcome="allowed"|"denied"}
//	httplimit_tokens_total{policy, outcome}      tokens asked for (the cost)
//	httplimit_retry_after_seconds{policy}        histogram of denials' waits
//	httplimit_errors_total{policy}               key or cost failures
//	httplimit_evicted_keys_total{policy}         idle keys removed
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// PromHook implements atomiclimit.Hook with Prometheus counters. The
// per-policy children are created up front, so an event is a map read and an
// atomic add: no label hashing, no allocation.
type PromHook struct {
	byPolicy map[string]*policyMetrics // read-only after NewPromHook
	vecs     vecs
}

type vecs struct {
	requests, tokens, errors, evicted *prometheus.CounterVec
	retry                             *prometheus.HistogramVec
}

type policyMetrics struct {
	allowed, denied, overloaded, allowedTokens, deniedTokens, errors, evicted prometheus.Counter
	retry                                                                     prometheus.Observer
}

// NewPromHook registers the metrics with reg and prepares the given policies.
func NewPromHook(reg prometheus.Registerer, policies ...string) *PromHook {
	v := vecs{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "httplimit_requests_total", Help: "Requests decided by the rate limiter.",
		}, []string{"policy", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "httplimit_tokens_total", Help: "Tokens (request costs) asked of the rate limiter.",
		}, []string{"policy", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "httplimit_errors_total", Help: "Requests that could not be keyed or costed.",
		}, []string{"policy"}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "httplimit_evicted_keys_total", Help: "Keys removed from the limiter.",
		}, []string{"policy"}),
		retry: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "httplimit_retry_after_seconds", Help: "Exact wait after which a denied request would be admitted.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}, []string{"policy"}),
	}
	reg.MustRegister(v.requests, v.tokens, v.errors, v.evicted, v.retry)
	h := &PromHook{byPolicy: map[string]*policyMetrics{}, vecs: v}
	for _, p := range policies {
		h.byPolicy[p] = v.forPolicy(p)
	}
	return h
}

func (v vecs) forPolicy(p string) *policyMetrics {
	return &policyMetrics{
		allowed:       v.requests.WithLabelValues(p, "allowed"),
		denied:        v.requests.WithLabelValues(p, "denied"),
		overloaded:    v.requests.WithLabelValues(p, "overloaded"),
		allowedTokens: v.tokens.WithLabelValues(p, "allowed"),
		deniedTokens:  v.tokens.WithLabelValues(p, "denied"),
		errors:        v.errors.WithLabelValues(p),
		evicted:       v.evicted.WithLabelValues(p),
		retry:         v.retry.WithLabelValues(p),
	}
}

func (h *PromHook) metrics(p string) *policyMetrics {
	if m, ok := h.byPolicy[p]; ok {
		return m
	}
	return h.vecs.forPolicy(p) // a policy not declared: slower, still correct
}

func (h *PromHook) Allowed(policy string, cost int) {
	m := h.metrics(policy)
	m.allowed.Inc()
	m.allowedTokens.Add(float64(cost))
}

func (h *PromHook) Denied(policy string, cost int, retryAfter time.Duration) {
	m := h.metrics(policy)
	m.denied.Inc()
	m.deniedTokens.Add(float64(cost))
	if retryAfter != gcra.Never {
		m.retry.Observe(retryAfter.Seconds())
	}
}

// Overloaded counts the requests for new keys that a full limiter had no
// room for: the server's capacity, not a client's quota.
func (h *PromHook) Overloaded(policy string, cost int) { h.metrics(policy).overloaded.Inc() }

func (h *PromHook) Evicted(policy string, keys int) { h.metrics(policy).evicted.Add(float64(keys)) }
func (h *PromHook) Error(policy string, err error)  { h.metrics(policy).errors.Inc() }

// Hook returns h as the middleware's Hook.
func (h *PromHook) Hook() *atomiclimit.Hook {
	return &atomiclimit.Hook{Allowed: h.Allowed, Denied: h.Denied, Overloaded: h.Overloaded, Evicted: h.Evicted, Error: h.Error}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	selftest := flag.Bool("selftest", false, "send a few requests to itself, print the metrics and exit")
	flag.Parse()

	reg := prometheus.NewRegistry()
	hook := NewPromHook(reg, "per-ip")
	lim, err := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerSecond(5), 5, atomiclimit.WithSweepInterval(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := httplimit.New(httplimit.Config[netip.Prefix]{
		Key:      httplimit.RemoteIP,
		Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "per-ip", Limiter: lim}},
		Hook:     hook.Hook(),
	})
	if err != nil {
		log.Fatal(err)
	}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	mux := http.NewServeMux()
	mux.Handle("GET /hello", mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	})))
	// Evictions are counted by the limiter; forward them before each scrape.
	mux.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mw.ReportEvictions()
		metrics.ServeHTTP(w, r)
	}))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	if !*selftest {
		log.Printf("serving /hello and /metrics on http://%s", ln.Addr())
		log.Fatal(srv.Serve(ln))
	}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	for range 8 {
		get(base + "/hello")
	}
	time.Sleep(1500 * time.Millisecond) // the key goes idle; the sweeper removes it
	body := get(base + "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "httplimit_") && !strings.Contains(line, "_bucket{") {
			fmt.Println(line)
		}
	}
}

func get(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
