package main

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// The accuracy experiment: a limit of 10 per second, offered load at evenly
// spaced instants for a minute of virtual time, for each algorithm. It
// reports what each admitted per second over the minute, and the most it
// admitted in any rolling window of one second (where algorithms differ).
var (
	offeredRates = []int{1, 2, 5, 10, 20, 25, 50, 100}
	accuracyRun  = time.Minute
)

const accuracyLimit = 10 // per second

// An algorithm decides requests at explicit instants.
type algorithm struct {
	name string
	// make returns a fresh limiter's decision function; t0 is the start.
	make func(t0 time.Time) func(t time.Time) bool
}

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

func algorithms() []algorithm {
	ours := func(burst int) func(time.Time) func(time.Time) bool {
		return func(t0 time.Time) func(time.Time) bool {
			l := must(atomiclimit.New(gcra.Per(accuracyLimit, time.Second), burst, atomiclimit.WithClock(&fixedClock{t0})))
			return func(t time.Time) bool { return l.AllowN(t, 1) }
		}
	}
	xr := func(burst int) func(time.Time) func(time.Time) bool {
		return func(time.Time) func(time.Time) bool {
			l := rate.NewLimiter(accuracyLimit, burst)
			return func(t time.Time) bool { return l.AllowN(t, 1) }
		}
	}
	algs := []algorithm{
		{"atomiclimit GCRA, burst 10", ours(accuracyLimit)},
		{"atomiclimit GCRA, burst 1 (hard limit)", ours(1)},
		{"x/time/rate, burst 10", xr(accuracyLimit)},
		{"x/time/rate, burst 1", xr(1)},
	}
	return append(algs, windowAlgorithms()...)
}

// accRow is one algorithm's results, one entry per offered rate.
type accRow struct {
	name     string
	admitted []float64 // per second, over the run, evenly spaced arrivals
	worst    []int     // most admitted in any rolling 1 s window, evenly spaced
	clumped  []int     // the same with clumped arrivals (clumpedArrivals)
}

func measureAccuracy() []accRow {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var rows []accRow
	for _, alg := range algorithms() {
		row := accRow{name: alg.name}
		for _, offered := range offeredRates {
			at := admittedAt(alg, t0, evenArrivals(offered))
			row.admitted = append(row.admitted, float64(len(at))/accuracyRun.Seconds())
			row.worst = append(row.worst, worstWindow(at, time.Second))
			row.clumped = append(row.clumped, worstWindow(admittedAt(alg, t0, clumpedArrivals(offered)), time.Second))
		}
		rows = append(rows, row)
	}
	return rows
}

// admittedAt offers requests at the given instants (after t0) to a fresh
// limiter and returns the instants it admitted.
func admittedAt(alg algorithm, t0 time.Time, arrivals []time.Duration) []time.Duration {
	decide := alg.make(t0)
	var at []time.Duration
	for _, d := range arrivals {
		if decide(t0.Add(d)) {
			at = append(at, d)
		}
	}
	return at
}

// evenArrivals spaces offered requests per second evenly over the run.
func evenArrivals(offered int) []time.Duration {
	var out []time.Duration
	step := time.Second / time.Duration(offered)
	for d := time.Duration(0); d < accuracyRun; d += step {
		out = append(out, d)
	}
	return out
}

// clumpedArrivals puts each second's offered requests in 10 ms: the last
// 10 ms of even seconds and the first 10 ms of odd ones, so that two clumps
// meet at every other second boundary: the traffic that finds a fixed
// window's boundary burst.
func clumpedArrivals(offered int) []time.Duration {
	var out []time.Duration
	step := 10 * time.Millisecond / time.Duration(offered)
	for s := time.Duration(0); s < accuracyRun; s += time.Second {
		start := s
		if s/time.Second%2 == 0 {
			start += 990 * time.Millisecond
		}
		for i := range offered {
			out = append(out, start+time.Duration(i)*step)
		}
	}
	return out
}

// worstWindow returns the most instants of at (sorted) inside any window
// [t, t+w).
func worstWindow(at []time.Duration, w time.Duration) int {
	best, j := 0, 0
	for i := range at {
		for at[i]-at[j] >= w {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}
