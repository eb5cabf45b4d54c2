// Command demo runs atomiclimit limiters on real goroutines and prints a
// table of what they admitted beside the bound each must respect:
// admitted ≤ burst + elapsed/interval; then the same per key for Keyed
// limiters whose idle keys are swept away while they run.
//
//	go run ./cmd/demo            # about 4 seconds
//	go run ./cmd/demo -d 200ms   # quicker
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

type scenario struct {
	name       string
	limit      gcra.Limit
	burst      int
	opts       []atomiclimit.Option
	goroutines int
	// slack is added to the elapsed time in the bound: one tick of the
	// coarse clock, whose readings at the start and the end may lag real
	// time by different amounts (less than a tick each).
	slack time.Duration
	// call makes one attempt and reports how many tokens it was granted.
	call func(ctx context.Context, l *atomiclimit.Limiter) int
}

type result struct {
	attempts, admitted int64
	elapsed            time.Duration
	bound              int64
}

func run(s scenario, d time.Duration) result {
	lim, err := atomiclimit.New(s.limit, s.burst, s.opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var attempts, admitted atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < s.goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var tries, got int64
			for i := 0; ; i++ {
				if i%64 == 0 && ctx.Err() != nil {
					break
				}
				tries++
				got += int64(s.call(ctx, lim))
			}
			attempts.Add(tries)
			admitted.Add(got)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	p, _ := gcra.NewParams(s.limit, s.burst)
	return result{
		attempts: attempts.Load(),
		admitted: admitted.Load(),
		elapsed:  elapsed,
		bound:    int64(p.Burst()) + int64((elapsed+s.slack)/p.Interval()),
	}
}

type keyedScenario struct {
	name  string
	keys  int // keys in use at a time
	churn bool
	limit gcra.Limit
	burst int
	opts  []atomiclimit.Option
}

// churnSlot is how long a set of keys is in use when keys churn: every
// churnSlot the goroutines move on to s.keys new keys, as users of a service
// come and go, and the old ones go idle.
const churnSlot = 10 * time.Millisecond

type keyedResult struct {
	attempts, admitted int64
	worst, bound       int64 // the most any key was admitted, and the per-key bound
	elapsed            time.Duration
	stats              atomiclimit.Stats
}

// runKeyed hammers a Keyed limiter with random keys for d and counts what
// each key was admitted.
func runKeyed(s keyedScenario, goroutines int, d time.Duration) keyedResult {
	lim, err := atomiclimit.NewKeyed[int](s.limit, s.burst, s.opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer lim.Close()
	slots := 1
	if s.churn {
		slots = int(d/churnSlot) + 2
	}
	perKey := make([]atomic.Int64, s.keys*slots)
	var attempts atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(g)*0x9E3779B97F4A7C15 + 1
			var tries int64
			for i := 0; ; i++ {
				if i%64 == 0 && ctx.Err() != nil {
					break
				}
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				key := int(x % uint64(s.keys))
				if s.churn {
					slot := min(int(time.Since(start)/churnSlot), slots-1)
					key += slot * s.keys
				}
				tries++
				if lim.Allow(key) {
					perKey[key].Add(1)
				}
			}
			attempts.Add(tries)
		}()
	}
	wg.Wait()
	r := keyedResult{attempts: attempts.Load(), elapsed: time.Since(start), stats: lim.Stats()}
	for i := range perKey {
		n := perKey[i].Load()
		r.admitted += n
		r.worst = max(r.worst, n)
	}
	p, _ := gcra.NewParams(s.limit, s.burst)
	r.bound = int64(p.Burst()) + int64(r.elapsed/p.Interval())
	return r
}

func main() {
	d := flag.Duration("d", time.Second, "how long each scenario runs")
	flag.Parse()

	allow := func(_ context.Context, l *atomiclimit.Limiter) int {
		if l.Allow() {
			return 1
		}
		return 0
	}
	weighted := func(_ context.Context, l *atomiclimit.Limiter) int {
		if l.Take(5).Allowed {
			return 5
		}
		return 0
	}
	wait := func(ctx context.Context, l *atomiclimit.Limiter) int {
		if l.Wait(ctx) == nil {
			return 1
		}
		return 0
	}
	g := 4 * runtime.GOMAXPROCS(0)
	scenarios := []scenario{
		{"Allow, 1000/s burst 50", gcra.Per(1000, time.Second), 50, nil, g, 0, allow},
		{"Allow, coarse clock (bound + 1 tick)", gcra.Per(1000, time.Second), 50, []atomiclimit.Option{atomiclimit.WithCoarseClock()}, g, time.Millisecond, allow},
		{"Allow, 100k/s burst 1 (hard limit)", gcra.Per(100_000, time.Second), 1, nil, g, 0, allow},
		{"Decide(5), 10k tokens/s burst 100", gcra.Per(10_000, time.Second), 100, nil, g, 0, weighted},
		{"Wait (pacing), 200/s burst 1", gcra.Per(200, time.Second), 1, nil, g, 0, wait},
	}
	fmt.Printf("atomiclimit demo: %d goroutines per scenario, %v each, GOMAXPROCS=%d\n\n", g, *d, runtime.GOMAXPROCS(0))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tattempts/s\tadmitted\tbound B+d/T\tadmitted/s\t")
	ok := true
	for _, s := range scenarios {
		r := run(s, *d)
		secs := r.elapsed.Seconds()
		fmt.Fprintf(w, "%s\t%.0f\t%d\t%d\t%.0f\t\n", s.name, float64(r.attempts)/secs, r.admitted, r.bound, float64(r.admitted)/secs)
		ok = ok && r.admitted <= r.bound
	}
	w.Flush()

	fmt.Printf("\nKeyed limiters: %d goroutines pick random keys; the bound holds per key\n\n", g)
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tdecisions/s\tadmitted\tworst key / its bound\tkeys held\tevicted\tevicted active\trejected\t")
	sweep := atomiclimit.WithSweepInterval(50 * time.Millisecond)
	for _, s := range []keyedScenario{
		{"10k keys, 100/s burst 10", 10_000, false, gcra.Per(100, time.Second), 10, []atomiclimit.Option{sweep}},
		{"1k new keys every 10ms, swept every 50ms", 1000, true, gcra.Per(100, time.Second), 10, []atomiclimit.Option{sweep}},
		{"same, at most 5k keys, reject new", 1000, true, gcra.Per(100, time.Second), 10,
			[]atomiclimit.Option{sweep, atomiclimit.WithMaxKeys(5000, atomiclimit.RejectNew)}},
		{"same, at most 2k keys, evict stalest", 1000, true, gcra.Per(100, time.Second), 10,
			[]atomiclimit.Option{sweep, atomiclimit.WithMaxKeys(2000, atomiclimit.EvictStalest)}},
	} {
		r := runKeyed(s, g, *d)
		fmt.Fprintf(w, "%s\t%.0f\t%d\t%d / %d\t%d\t%d\t%d\t%d\t\n", s.name, float64(r.attempts)/r.elapsed.Seconds(), r.admitted,
			r.worst, r.bound, r.stats.Keys, r.stats.Evicted, r.stats.EvictedActive, r.stats.Rejected)
		// EvictStalest may forget a key that is not idle (documented): its
		// bound is then B more per such eviction, so only the others must
		// hold it exactly.
		ok = ok && (r.worst <= r.bound || r.stats.EvictedActive > 0)
	}
	w.Flush()
	if !ok {
		fmt.Println("\nFAIL: a limiter admitted more than its bound")
		os.Exit(1)
	}
	fmt.Println("\nEvery limiter, and every key, stayed within burst + elapsed/interval.")
}
