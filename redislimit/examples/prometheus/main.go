// Command prometheus exports a redislimit.Limiter's hook events as
// Prometheus metrics with the official client library, which lives in this
// separate module so that redislimit itself does not depend on it.
//
//	go run . -addr localhost:6379             # serves /hello and /metrics on 127.0.0.1:8080
//	go run . -addr localhost:6379 -selftest   # decides a few requests, prints the metrics, exits
//	go run . -network unix -addr /run/redis.sock -selftest
//
// The metrics, labelled by policy and source (bounded sets; never by key):
//
//	redislimit_decisions_total{policy, source, outcome="allowed"|"denied"}
//	redislimit_retry_after_seconds{policy, source}   histogram of denials' waits
//	redislimit_errors_total{policy, source, class}   class: outage, circuit-open,
//	                                                rejected, corrupt, caller
//
// source is who decided: redis, cache, static, fail-open, fail-closed,
// fallback, caller (redislimit.Source's String).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// sources are every Source a Limiter reports.
var sources = []redislimit.Source{
	redislimit.SourceRedis, redislimit.SourceCache, redislimit.SourceStatic, redislimit.SourceFailOpen,
	redislimit.SourceFailClosed, redislimit.SourceFallback, redislimit.SourceCaller,
}

// classes are the error classes, as errors.Is tells them apart.
var classes = []string{"outage", "circuit-open", "rejected", "corrupt", "caller"}

// class returns err's class.
func class(err error) string {
	switch {
	case errors.Is(err, redislimit.ErrCircuitOpen):
		return "circuit-open"
	case errors.Is(err, redislimit.ErrUnavailable):
		return "outage"
	case errors.Is(err, redislimit.ErrRejected):
		return "rejected"
	case errors.Is(err, redislimit.ErrCorrupt):
		return "corrupt"
	}
	return "caller"
}

// PromHook counts a Limiter's hook events in Prometheus metrics (Hook
// returns it as a redislimit.Hook). Every child
// of every declared policy is created up front, so an event is a map read,
// two slice indexes and an atomic add: no label hashing, no allocation.
type PromHook struct {
	byPolicy map[string]*policyMetrics // read-only after NewPromHook
	vecs     vecs
}

type vecs struct {
	decisions, errors *prometheus.CounterVec
	retry             *prometheus.HistogramVec
}

// policyMetrics are one policy's children, indexed by Source (and outcome
// 0 allowed, 1 denied; or class).
type policyMetrics struct {
	decisions [][2]prometheus.Counter
	retry     []prometheus.Observer
	errors    []map[string]prometheus.Counter
}

// NewPromHook registers the metrics with reg and prepares the policies.
func NewPromHook(reg prometheus.Registerer, policies ...string) *PromHook {
	v := vecs{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redislimit_decisions_total", Help: "Requests decided, by who decided and the outcome.",
		}, []string{"policy", "source", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "redislimit_errors_total", Help: "Calls that Redis did not decide normally, by class.",
		}, []string{"policy", "source", "class"}),
		retry: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "redislimit_retry_after_seconds", Help: "Wait after which a denied request would be admitted.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
		}, []string{"policy", "source"}),
	}
	reg.MustRegister(v.decisions, v.errors, v.retry)
	h := &PromHook{byPolicy: map[string]*policyMetrics{}, vecs: v}
	for _, p := range policies {
		h.byPolicy[p] = v.forPolicy(p)
	}
	return h
}

func (v vecs) forPolicy(p string) *policyMetrics {
	m := &policyMetrics{}
	for _, s := range sources {
		src := s.String()
		m.decisions = append(m.decisions, [2]prometheus.Counter{
			v.decisions.WithLabelValues(p, src, "allowed"), v.decisions.WithLabelValues(p, src, "denied"),
		})
		m.retry = append(m.retry, v.retry.WithLabelValues(p, src))
		byClass := map[string]prometheus.Counter{}
		for _, c := range classes {
			byClass[c] = v.errors.WithLabelValues(p, src, c)
		}
		m.errors = append(m.errors, byClass)
	}
	return m
}

func (h *PromHook) metrics(p string) *policyMetrics {
	if m, ok := h.byPolicy[p]; ok {
		return m
	}
	return h.vecs.forPolicy(p) // a policy not declared: slower, still correct
}

// Allowed counts an admission by src.
func (h *PromHook) Allowed(policy string, src redislimit.Source, n int) {
	h.metrics(policy).decisions[src][0].Inc()
}

// Denied counts a denial by src, and its wait.
func (h *PromHook) Denied(policy string, src redislimit.Source, n int, retryAfter time.Duration) {
	m := h.metrics(policy)
	m.decisions[src][1].Inc()
	if retryAfter != gcra.Never {
		m.retry[src].Observe(retryAfter.Seconds())
	}
}

// Error counts an error by its class.
func (h *PromHook) Error(policy string, src redislimit.Source, err error) {
	h.metrics(policy).errors[src][class(err)].Inc()
}

// Hook returns h as a Limiter's Hook, every event heard.
func (h *PromHook) Hook() *redislimit.Hook {
	return &redislimit.Hook{Allowed: h.Allowed, Denied: h.Denied, Error: h.Error}
}

func main() {
	network := flag.String("network", "tcp", "how to reach Redis: tcp or unix")
	addr := flag.String("addr", "localhost:6379", "Redis address (a socket path with -network unix)")
	listen := flag.String("listen", "127.0.0.1:8080", "HTTP listen address")
	selftest := flag.Bool("selftest", false, "decide a few requests, print the metrics and exit")
	flag.Parse()

	reg := prometheus.NewRegistry()
	hook := NewPromHook(reg, "per-ip", "unreachable")
	rdb := redis.NewClient(&redis.Options{Network: *network, Addr: *addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	lim, err := redislimit.New(rdb, gcra.Per(5, time.Second), 5,
		redislimit.WithKeyPrefix(fmt.Sprintf("prom-example:%d:", time.Now().UnixNano())),
		redislimit.WithTimeout(50*time.Millisecond),
		redislimit.WithOverLimitCache(10_000),
		redislimit.WithBreaker(5, time.Second),
		redislimit.WithHook("per-ip", hook.Hook()))
	if err != nil {
		log.Fatal(err)
	}
	if *selftest {
		redis.SetLogger(quiet{}) // the outages below are on purpose
		selfTest(lim, rdb, hook)
		fmt.Print(scrape(reg))
		return
	}

	mux := http.NewServeMux()
	mux.Handle("GET /hello", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		d, _, err := lim.Take(r.Context(), ip, 1)
		switch {
		case d.Allowed:
			io.WriteString(w, "hello\n")
		case err != nil && !errors.Is(err, redislimit.ErrCorrupt) && !errors.Is(err, atomiclimit.ErrFallback):
			// Redis did not decide (a corrupt state it repaired and decided
			// on is its denial, and a FallbackTo limiter's is that
			// limiter's): the limit could not be checked.
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
		default:
			w.Header().Set("Retry-After", fmt.Sprint(int((d.RetryAfter+time.Second-1)/time.Second)))
			http.Error(w, "too many requests", http.StatusTooManyRequests)
		}
	}))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Printf("serving /hello and /metrics on http://%s", *listen)
	log.Fatal(srv.ListenAndServe())
}

// selfTest makes each kind of event happen once or more: admissions and
// denials by Redis, denials by the over-limit cache, a corrupt state
// repaired, and outages on a port where nothing listens, until the breaker
// opens.
func selfTest(lim *redislimit.Limiter[string], rdb *redis.Client, hook *PromHook) {
	ctx := context.Background()
	for range 8 {
		lim.Allow(ctx, "192.0.2.1") // 5 admitted, then denied (Redis once, then the cache)
	}
	if err := rdb.Set(ctx, lim.Key("192.0.2.2"), "garbage", 0).Err(); err != nil {
		log.Fatal(err)
	}
	if _, _, err := lim.Take(ctx, "192.0.2.2", 1); !errors.Is(err, redislimit.ErrCorrupt) {
		log.Fatalf("want a repaired corrupt state, got %v: is Redis at -addr?", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	down := redis.NewClient(&redis.Options{Addr: closed, MaxRetries: -1, DialerRetries: 1})
	defer down.Close()
	unreachable, err := redislimit.New(down, gcra.Per(5, time.Second), 5,
		redislimit.WithBreaker(2, time.Minute), redislimit.WithHook("unreachable", hook.Hook()))
	if err != nil {
		log.Fatal(err)
	}
	for range 4 {
		unreachable.Take(ctx, "192.0.2.1", 1) // 2 outages, then the breaker skips Redis
	}
}

// scrape returns the non-zero redislimit_ samples of reg, histogram buckets
// left out.
func scrape(reg *prometheus.Registry) string {
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var out strings.Builder
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "redislimit_") && !strings.Contains(line, "_bucket{") && !strings.HasSuffix(line, " 0") {
			out.WriteString(line + "\n")
		}
	}
	return out.String()
}

// quiet is a go-redis logger that logs nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
