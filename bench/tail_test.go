package main

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// The tail-latency scenarios (issue #17): every single decision is timed,
// and each reports p50, p99, p99.9, p99.99 (ns) and the longest (µs), for us
// and every keyed peer in one run. impl=noop times an empty call in the same
// loop: what the machine itself adds. They ignore b.N: run them with
// -benchtime=1x (the main program does not run them):
//
//	go test -run='^$' -bench='Growth|Churn' -benchtime=1x -count=3 -cpu=2 > tail.txt
//
// tailSetting is 10 per second with a burst of 1: a key is idle 100 ms after
// its last admission.
var tailSetting = setting{n: 10, period: time.Second, burst: 1}

// tailPeers is every keyed peer, and impl=noop first.
func tailPeers() []peer {
	ps := []peer{{name: "noop", keyed: func(setting) keyed { return noopKeyed{} }}}
	for _, p := range peers {
		if p.keyed != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

type noopKeyed struct{}

//go:noinline
func (noopKeyed) allow(string) bool { return true }
func (noopKeyed) close()            {}

// BenchmarkGrowth drives each limiter from empty to keysCount keys from
// every P: each key is new once, and each call for a new key is followed by
// one for an older key.
func BenchmarkGrowth(b *testing.B) {
	buildKeys()
	for _, p := range tailPeers() {
		b.Run(fmt.Sprintf("keys=%d/impl=%s", keysCount, p.id()), func(b *testing.B) {
			var h latencies
			for range b.N {
				k := p.keyed(tailSetting)
				workers := runtime.GOMAXPROCS(0)
				hs := make([]latencies, workers)
				var wg sync.WaitGroup
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := w; i < keysCount; i += workers {
							for _, key := range [2]string{newKeyNames[i], newKeyNames[i/2]} {
								t0 := time.Now()
								k.allow(key)
								hs[w].add(time.Since(t0))
							}
						}
					}()
				}
				wg.Wait()
				k.close()
				for w := range hs {
					h.merge(&hs[w])
				}
			}
			h.report(b)
		})
	}
}

// BenchmarkChurn holds keysCount live keys, of which 10% are replaced per
// second: the live keys are a window of the key space that slides by
// keysCount/10 keys a second, and keys that leave it are idle 100 ms after
// their last admission. Ours sweeps one pass a second (WithSweepInterval);
// each peer evicts as it is configured (see the peers' notes: most never
// do, and keep growing). 3 s per run, after a fill that is not timed.
func BenchmarkChurn(b *testing.B) {
	const run = 3 * time.Second
	buildKeys()
	perSecond := keysCount / 10
	names := make([]string, keysCount+perSecond*int(run/time.Second)+1)
	for i := range names {
		names[i] = fmt.Sprintf("churn-%07d", i)
	}
	for _, p := range tailPeers() {
		b.Run(fmt.Sprintf("keys=%d/impl=%s", keysCount, p.id()), func(b *testing.B) {
			var h latencies
			for range b.N {
				var k keyed
				if p.name == "atomiclimit" {
					k = ourKeyed{must(atomiclimit.NewKeyed[string](ourLimit(tailSetting), tailSetting.burst,
						atomiclimit.WithSweepInterval(time.Second)))}
				} else {
					k = p.keyed(tailSetting)
				}
				for _, key := range names[:keysCount] {
					k.allow(key)
				}
				workers := runtime.GOMAXPROCS(0)
				hs := make([]latencies, workers)
				start := time.Now()
				var wg sync.WaitGroup
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						rng := rand.New(rand.NewPCG(uint64(w), 5))
						for {
							since := time.Since(start)
							if since >= run {
								return
							}
							base := int(int64(since) * int64(perSecond) / int64(time.Second))
							key := names[base+rng.IntN(keysCount)]
							t0 := time.Now()
							k.allow(key)
							hs[w].add(time.Since(t0))
						}
					}()
				}
				wg.Wait()
				k.close()
				for w := range hs {
					h.merge(&hs[w])
				}
			}
			h.report(b)
		})
	}
}

// latencies is a histogram of durations in nanoseconds, exact below 64 ns
// and with 32 buckets per power of two above (a percentile is the upper edge
// of its bucket: at most 1/32 above the true value), and the exact maximum.
// (The same as internal/core's, which this module cannot import.)
type latencies struct {
	counts [64 * 32]uint64
	n      uint64
	max    time.Duration
}

func (h *latencies) add(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[latencyBucket(v)]++
	h.n++
	h.max = max(h.max, d)
}

func latencyBucket(v uint64) int {
	if v < 64 {
		return int(v)
	}
	e := bits.Len64(v) - 6 // v >> e is in [32, 64)
	return e*32 + int(v>>e)
}

func latencyUpper(i int) uint64 {
	if i < 64 {
		return uint64(i)
	}
	e := i/32 - 1
	return (uint64(i%32+32)+1)<<e - 1
}

func (h *latencies) merge(o *latencies) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

func (h *latencies) quantile(q float64) uint64 {
	want := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= want {
			return latencyUpper(i)
		}
	}
	return uint64(h.max)
}

func (h *latencies) report(b *testing.B) {
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"p99.9", 0.999}, {"p99.99", 0.9999}} {
		b.ReportMetric(float64(h.quantile(q.q)), q.name+"-ns")
	}
	b.ReportMetric(float64(h.max.Microseconds()), "max-µs")
	b.ReportMetric(float64(h.n)/float64(b.N), "decisions/op")
}
