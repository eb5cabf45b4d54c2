package main

import (
	"runtime"
	"slices"
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

// measureLatency times every call of 4×GOMAXPROCS goroutines sharing one
// limiter that admits everything, for each implementation, and a row
// "clock only" that times an empty call: the harness's own cost, included
// in every other row.
func measureLatency(calls int) []latResult {
	type impl struct {
		name string
		fn   func() bool
	}
	impls := []impl{{"clock only", func() bool { return true }}}
	for _, p := range peers {
		if p.single != nil {
			l := p.single(admitAll)
			impls = append(impls, impl{p.name, l.allow})
		}
	}
	workers := 4 * runtime.GOMAXPROCS(0)
	per := max(calls/workers, 1)
	var out []latResult
	for _, im := range impls {
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
					ok := im.fn()
					mine[i] = time.Since(t0)
					if ok {
						allowed[w]++
					}
				}
				lat[w] = mine
			}()
		}
		wg.Wait()
		all := slices.Concat(lat...)
		slices.Sort(all)
		q := func(p float64) time.Duration { return all[min(int(p*float64(len(all))), len(all)-1)] }
		r := latResult{impl: im.name, calls: len(all), p50: q(0.50), p99: q(0.99), p999: q(0.999), pmax: all[len(all)-1]}
		for _, a := range allowed {
			r.allowed += a
		}
		out = append(out, r)
	}
	return out
}
