package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// latResult is the distribution of single-decision latencies of one
// implementation on one hot key under contention.
type latResult struct {
	impl                 string
	calls, allowed       int
	p50, p99, p999, pmax time.Duration
}

// latScenario is the latency harness's results for one hot-key scenario,
// the row "clock only" first.
type latScenario struct {
	hotScenario
	procs int // GOMAXPROCS of the harness
	rows  []latResult
}

// latencyWorkers is the number of goroutines of the latency harness: more
// than the cores, as in a server whose handlers outnumber them.
func latencyWorkers() int { return 4 * runtime.GOMAXPROCS(0) }

// latencyRounds: the calls of each implementation are made in this many
// rounds, every implementation of the scenario in turn within a round, so
// that a slow moment of a shared machine falls on all of them alike rather
// than on whichever ran then.
const latencyRounds = 4

// measureLatency times every call of latencyWorkers goroutines sharing one
// limiter, for each hot-key scenario and each implementation that takes part
// in it, and a row "clock only" that times an empty call: the harness's own
// cost, included in every other row.
func measureLatency(calls int) ([]latScenario, error) {
	type impl struct {
		name    string
		fn      func() bool
		lat     []time.Duration
		allowed int
	}
	var out []latScenario
	for _, h := range hotScenarios {
		impls := []*impl{{name: "clock only", fn: func() bool { return true }}}
		for _, p := range peers {
			if !h.runs(p) {
				continue
			}
			l, err := h.start(p)
			if err != nil {
				return nil, err
			}
			impls = append(impls, &impl{name: p.name, fn: l.allow})
		}
		for range latencyRounds {
			for _, im := range impls {
				lat, allowed := timeCalls(max(calls/latencyRounds, 1), im.fn)
				im.lat = append(im.lat, lat...)
				im.allowed += allowed
			}
		}
		ls := latScenario{hotScenario: h, procs: runtime.GOMAXPROCS(0)}
		for _, im := range impls {
			all := im.lat
			slices.Sort(all)
			q := func(p float64) time.Duration { return all[min(int(p*float64(len(all))), len(all)-1)] }
			ls.rows = append(ls.rows, latResult{impl: im.name, calls: len(all), allowed: im.allowed,
				p50: q(0.50), p99: q(0.99), p999: q(0.999), pmax: all[len(all)-1]})
		}
		out = append(out, ls)
	}
	return out, nil
}

// timeCalls makes about calls calls of fn from latencyWorkers goroutines
// and returns their latencies and the number admitted.
func timeCalls(calls int, fn func() bool) ([]time.Duration, int) {
	workers := latencyWorkers()
	per := max(calls/workers, 1)
	lat := make([][]time.Duration, workers)
	allowed := make([]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, per)
			for i := range mine {
				t0 := time.Now()
				ok := fn()
				mine[i] = time.Since(t0)
				if ok {
					allowed[w]++
				}
			}
			lat[w] = mine
		}()
	}
	wg.Wait()
	n := 0
	for _, a := range allowed {
		n += a
	}
	return slices.Concat(lat...), n
}

// writeLatencyRaw writes the harness's results as go test benchmark lines
// (one run each), so that benchstat and a later run can read them:
// BenchmarkLatency/<scenario>/impl=… with p50-ns, p99-ns, p99.9-ns, max-ns
// and allowed/op.
func writeLatencyRaw(path string, lat []latScenario) error {
	var b strings.Builder
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\npkg: github.com/atomiclimit/atomiclimit/bench\n", runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "note: latency harness, %d goroutines on one limiter, each call timed\n", latencyWorkers())
	for _, ls := range lat {
		for _, r := range ls.rows {
			fmt.Fprintf(&b, "BenchmarkLatency/%s/impl=%s-%d\t%d\t%d p50-ns\t%d p99-ns\t%d p99.9-ns\t%d max-ns\t%.4f allowed/op\n",
				ls.bench, strings.NewReplacer("/", "-", " ", "-").Replace(r.impl), runtime.GOMAXPROCS(0), r.calls,
				r.p50.Nanoseconds(), r.p99.Nanoseconds(), r.p999.Nanoseconds(), r.pmax.Nanoseconds(), float64(r.allowed)/float64(r.calls))
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
