// Command demo runs atomicbucket limiters on real goroutines and prints a
// table of what they admitted beside the bound each must respect:
// admitted ≤ burst + elapsed/interval.
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

	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/gcra"
)

type scenario struct {
	name       string
	limit      gcra.Limit
	burst      int
	opts       []atomicbucket.Option
	goroutines int
	// call makes one attempt and reports how many tokens it was granted.
	call func(ctx context.Context, l *atomicbucket.Limiter) int
}

type result struct {
	attempts, admitted int64
	elapsed            time.Duration
	bound              int64
}

func run(s scenario, d time.Duration) result {
	lim, err := atomicbucket.New(s.limit, s.burst, s.opts...)
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
	p := lim.Params()
	return result{
		attempts: attempts.Load(),
		admitted: admitted.Load(),
		elapsed:  elapsed,
		bound:    int64(p.Burst()) + int64(elapsed/p.Interval()),
	}
}

func main() {
	d := flag.Duration("d", time.Second, "how long each scenario runs")
	flag.Parse()

	allow := func(_ context.Context, l *atomicbucket.Limiter) int {
		if l.Allow() {
			return 1
		}
		return 0
	}
	weighted := func(_ context.Context, l *atomicbucket.Limiter) int {
		if l.Decide(5).Allowed {
			return 5
		}
		return 0
	}
	wait := func(ctx context.Context, l *atomicbucket.Limiter) int {
		if l.Wait(ctx) == nil {
			return 1
		}
		return 0
	}
	g := 4 * runtime.GOMAXPROCS(0)
	scenarios := []scenario{
		{"Allow, 1000/s burst 50", gcra.PerSecond(1000), 50, nil, g, allow},
		{"Allow, coarse clock", gcra.PerSecond(1000), 50, []atomicbucket.Option{atomicbucket.WithCoarseClock()}, g, allow},
		{"Allow, 100k/s burst 1 (hard limit)", gcra.PerSecond(100_000), 1, nil, g, allow},
		{"Decide(5), 10k tokens/s burst 100", gcra.PerSecond(10_000), 100, nil, g, weighted},
		{"Wait (pacing), 200/s burst 1", gcra.PerSecond(200), 1, nil, g, wait},
	}
	fmt.Printf("atomicbucket demo: %d goroutines per scenario, %v each, GOMAXPROCS=%d\n\n", g, *d, runtime.GOMAXPROCS(0))
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
	if !ok {
		fmt.Println("\nFAIL: a limiter admitted more than its bound")
		os.Exit(1)
	}
	fmt.Println("\nEvery limiter stayed within burst + elapsed/interval.")
}
