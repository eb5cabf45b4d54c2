// Package latency times single calls for the tail-latency benchmarks: a
// histogram of durations, a runner that times calls from several goroutines
// at once, and the runtime's own longest waits over the same span, to name
// what a long call waited for. The benchmarks of this module and of bench/
// share it.
package latency

import (
	"math"
	"math/bits"
	"sync"
	"testing"
	"time"
)

// Histogram is a histogram of durations in nanoseconds, exact below 64 ns
// and with 32 buckets per power of two above (a percentile is the upper edge
// of its bucket: at most 1/32 above the true value), with the exact maximum,
// the exact count above Slow, and the runtime's longest waits while the
// calls ran (see Timed).
type Histogram struct {
	counts [64 * 32]uint64
	n      uint64
	slow   uint64
	max    time.Duration
	waits  Waits
}

// Slow is the duration above which Report counts a call as slow: the p99.99
// that issue #17 asks of a decision.
const Slow = 20 * time.Microsecond

// Add records one duration.
func (h *Histogram) Add(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucket(v)]++
	if d > Slow {
		h.slow++
	}
	h.n++
	h.max = max(h.max, d)
}

func bucket(v uint64) int {
	if v < 64 {
		return int(v)
	}
	e := bits.Len64(v) - 6 // v >> e is in [32, 64)
	return e*32 + int(v>>e)
}

// upper is the largest value in bucket i.
func upper(i int) uint64 {
	if i < 64 {
		return uint64(i)
	}
	e := i/32 - 1
	return (uint64(i%32+32)+1)<<e - 1
}

// Merge adds o's durations to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.slow += o.slow
	h.max = max(h.max, o.max)
	h.waits = h.waits.merge(o.waits)
}

// N is the number of durations recorded.
func (h *Histogram) N() uint64 { return h.n }

// Slow is the number of durations recorded above Slow.
func (h *Histogram) Slow() uint64 { return h.slow }

// Max is the longest duration recorded.
func (h *Histogram) Max() time.Duration { return h.max }

// Quantile returns the q-quantile in nanoseconds (the upper edge of its
// bucket).
func (h *Histogram) Quantile(q float64) uint64 {
	want := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= want {
			return upper(i)
		}
	}
	return uint64(h.max)
}

// Report reports p50, p99, p99.9 and p99.99 (ns), the longest (µs), the
// decisions and the slow ones per op, the runtime's longest waits (µs) and
// the process's page faults per op as b's metrics.
func (h *Histogram) Report(b *testing.B) {
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}, {"p99.9", 0.999}, {"p99.99", 0.9999}} {
		b.ReportMetric(float64(h.Quantile(q.q)), q.name+"-ns")
	}
	b.ReportMetric(float64(h.max.Microseconds()), "max-µs")
	b.ReportMetric(float64(h.n)/float64(b.N), "decisions/op")
	b.ReportMetric(float64(h.slow)/float64(b.N), "over-20µs/op")
	b.ReportMetric(float64(h.waits.Sched.Microseconds()), "sched-max-µs")
	b.ReportMetric(float64(h.waits.STW.Microseconds()), "stw-max-µs")
	b.ReportMetric(float64(h.waits.Faults)/float64(b.N), "faults/op")
}

// Timed runs body on workers goroutines at once, each timing its calls into
// a histogram of its own, and merges those, and the runtime's longest waits
// from the start to the end of the run, into h when all have returned.
func Timed(h *Histogram, workers int, body func(w int, hw *Histogram)) {
	before := readWaits()
	hs := make([]Histogram, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body(w, &hs[w])
		}()
	}
	wg.Wait()
	for w := range hs {
		h.Merge(&hs[w])
	}
	h.waits = h.waits.merge(readWaits().since(before))
}
