package redislimit_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// Benchmarks. BenchmarkRedis runs this package and go-redis/redis_rate
// (the closest peer: a GCRA in one Lua script) on the same redis-server in
// one run, serially (goroutines=1: latency) and from 8·GOMAXPROCS goroutines
// (throughput), on the admit path and the deny path, and reports
// decisions/s and the p50/p99 latency of one decision. BenchmarkDenyLocal
// compares the over-limit cache's deny path with the in-process
// atomicbucket deny path. Compare with
//
//	go test ./ -run='^$' -bench=. -count=5 > new.txt
//	benchstat -col /impl new.txt
//
// (redis_rate is a benchmark-only dependency of this module; the root
// module does not depend on it.)

const benchKeys = 1000

func benchKeyNames(prefix string) []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return keys
}

// decider is one implementation under test: it decides one request for key
// and reports whether it was admitted.
type decider func(ctx context.Context, key string) bool

func BenchmarkRedis(b *testing.B) {
	s := sharedServer(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), PoolSize: 64, MaxRetries: -1})
	defer rdb.Close()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	rr := redis_rate.NewLimiter(rdb)

	impls := []struct {
		name string
		make func(b *testing.B, path string) decider
	}{
		{"redislimit", func(b *testing.B, path string) decider {
			limit, burst := gcra.Every(time.Microsecond), 1<<30 // admits everything
			if path == "deny" {
				limit, burst = gcra.Every(time.Hour), 1
			}
			l, err := redislimit.New(rdb, limit, burst, redislimit.WithKeyPrefix("bench:"+path+":"))
			if err != nil {
				b.Fatal(err)
			}
			return func(ctx context.Context, key string) bool {
				d, _, err := l.Take(ctx, key, 1)
				if err != nil {
					panic(err)
				}
				return d.Allowed
			}
		}},
		{"redis_rate", func(b *testing.B, path string) decider {
			limit := redis_rate.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1 << 30}
			if path == "deny" {
				limit = redis_rate.Limit{Rate: 1, Period: time.Hour, Burst: 1}
			}
			return func(ctx context.Context, key string) bool {
				r, err := rr.Allow(ctx, key, limit)
				if err != nil {
					panic(err)
				}
				return r.Allowed > 0
			}
		}},
	}
	for _, path := range []string{"allow", "deny"} {
		for _, g := range []int{1, 8 * runtime.GOMAXPROCS(0)} {
			for _, impl := range impls {
				b.Run(fmt.Sprintf("impl=%s/path=%s/goroutines=%d", impl.name, path, g), func(b *testing.B) {
					d := impl.make(b, path)
					keys := benchKeyNames(impl.name + ":" + path + ":")
					// Warm: load the script, create the keys, drain them for
					// the deny path.
					for _, k := range keys {
						d(ctx, k)
					}
					if path == "deny" && d(ctx, keys[0]) {
						b.Fatal("deny path admits")
					}
					runTimed(b, g, func(i int) bool { return d(ctx, keys[i%benchKeys]) }, path == "allow")
				})
			}
		}
	}
}

// runTimed runs op b.N times from g goroutines (1: serially), checks every
// outcome is want, and reports decisions/s and p50/p99 latency.
func runTimed(b *testing.B, g int, op func(i int) bool, want bool) {
	hists := make([]histogram, g)
	var next, bad atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	if g == 1 {
		h := &hists[0]
		for i := range b.N {
			t := time.Now()
			if op(i) != want {
				bad.Add(1)
			}
			h.add(time.Since(t))
		}
	} else {
		b.SetParallelism(g / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			h := &hists[int(next.Add(1)-1)%g]
			i := int(next.Load()) * 7919 // spread goroutines over the keys
			for pb.Next() {
				t := time.Now()
				if op(i) != want {
					bad.Add(1)
				}
				h.add(time.Since(t))
				i++
			}
		})
	}
	b.StopTimer()
	if bad.Load() != 0 {
		b.Fatalf("%d unexpected outcomes", bad.Load())
	}
	var all histogram
	for i := range hists {
		all.merge(&hists[i])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(all.quantile(0.50)), "p50-ns")
	b.ReportMetric(float64(all.quantile(0.99)), "p99-ns")
}

// histogram counts latencies in log buckets 1% wide, from 1ns to ~10s.
type histogram struct {
	n      uint64
	counts [histBuckets]uint32
}

const (
	histGrowth  = 1.01
	histBuckets = 2400 // 1.01^2400 ns > 10s
)

var logGrowth = math.Log(histGrowth)

func (h *histogram) add(d time.Duration) {
	i := 0
	if d > 1 {
		i = min(int(math.Log(float64(d))/logGrowth), histBuckets-1)
	}
	h.counts[i]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the upper edge of the bucket holding the q-quantile.
func (h *histogram) quantile(q float64) time.Duration {
	rank := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += uint64(c)
		if seen >= rank && seen > 0 {
			return time.Duration(math.Pow(histGrowth, float64(i+1)))
		}
	}
	return 0
}

// BenchmarkDenyLocal: the over-limit cache answering a denial, against the
// in-process atomicbucket limiters denying, over 1000 drained keys (one for
// the single-key Limiter), from GOMAXPROCS goroutines. op=decide returns
// the whole decision (Take), op=allow only the boolean (Allow).
func BenchmarkDenyLocal(b *testing.B) {
	ctx := context.Background()
	keys := benchKeyNames("deny:")
	type impl struct {
		name string
		make func(b *testing.B) (decide, allow func(i int) bool)
	}
	impls := []impl{
		{"redislimit-cache", func(b *testing.B) (func(int) bool, func(int) bool) {
			s := sharedServer(b)
			rdb := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
			b.Cleanup(func() { rdb.Close() })
			l, err := redislimit.New(rdb, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix("benchcache:"), redislimit.WithOverLimitCache(2*benchKeys))
			if err != nil {
				b.Fatal(err)
			}
			for _, k := range keys {
				l.Allow(ctx, k)
				if r := l.TakeResult(ctx, k, 1); r.Allowed || r.Err != nil {
					b.Fatal("not drained", r.Err)
				}
				if l.TakeResult(ctx, k, 1).Source != redislimit.SourceCache {
					b.Fatal("not cached")
				}
			}
			return func(i int) bool { return allowN(l, ctx, keys[i%benchKeys], 1) },
				func(i int) bool { return l.Allow(ctx, keys[i%benchKeys]) }
		}},
		{"atomicbucket-keyed", func(b *testing.B) (func(int) bool, func(int) bool) {
			k, err := atomiclimit.NewKeyed[string](gcra.Every(time.Hour), 1)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(k.Close)
			for _, key := range keys {
				k.Allow(key)
			}
			return func(i int) bool { return takeLocal(k, keys[i%benchKeys], 1).Allowed },
				func(i int) bool { return k.Allow(keys[i%benchKeys]) }
		}},
		{"atomicbucket-limiter", func(b *testing.B) (func(int) bool, func(int) bool) {
			l, err := atomiclimit.New(gcra.Every(time.Hour), 1)
			if err != nil {
				b.Fatal(err)
			}
			l.Allow()
			return func(int) bool { return l.Take(1).Allowed }, func(int) bool { return l.Allow() }
		}},
	}
	for _, op := range []string{"decide", "allow"} {
		for _, im := range impls {
			b.Run(fmt.Sprintf("impl=%s/op=%s", im.name, op), func(b *testing.B) {
				decide, allow := im.make(b)
				f := decide
				if op == "allow" {
					f = allow
				}
				var seq, bad atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(1)) * 7919
					for pb.Next() {
						if f(i) {
							bad.Add(1)
						}
						i++
					}
				})
				if bad.Load() != 0 {
					b.Fatal("admitted on the deny path")
				}
			})
		}
	}
}
