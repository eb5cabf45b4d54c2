package latency

import (
	"math"
	"runtime/metrics"
	"time"
)

// Waits are the longest waits the runtime itself reports between two reads
// of its metrics, to set beside a benchmark's longest decision:
//
//	Sched  the longest a goroutine stood runnable before it ran
//	       (/sched/latencies:seconds): a call that was descheduled
//	STW    the longest stop-the-world pause (/sched/pauses/total/gc:seconds
//	       and /sched/pauses/total/other:seconds): every goroutine waited
//
// Each is the upper edge of the highest runtime histogram bucket that gained
// a count: an upper bound, at most 25% above the true wait (the runtime's
// buckets are a quarter of a power of two wide). Faults counts the page
// faults the whole process took meanwhile (0 where it is not measured): on
// a virtual machine each can cost tens of microseconds.
type Waits struct {
	Sched, STW time.Duration
	Faults     int64
}

// merge returns the longer of each wait, and the faults of both.
func (w Waits) merge(o Waits) Waits {
	return Waits{max(w.Sched, o.Sched), max(w.STW, o.STW), w.Faults + o.Faults}
}

var waitMetrics = [...]string{
	"/sched/latencies:seconds",
	"/sched/pauses/total/gc:seconds",
	"/sched/pauses/total/other:seconds",
}

// waitReadings are copies of the histograms behind waits, and the page
// fault count, read at one instant (metrics.Read reuses its histograms, so
// they are copied).
type waitReadings struct {
	hists  [len(waitMetrics)]metrics.Float64Histogram
	faults int64
}

func readWaits() (r waitReadings) {
	r.faults = pageFaults()
	var s [len(waitMetrics)]metrics.Sample
	for i, name := range waitMetrics {
		s[i].Name = name
	}
	metrics.Read(s[:])
	for i := range s {
		if s[i].Value.Kind() == metrics.KindFloat64Histogram {
			h := s[i].Value.Float64Histogram()
			r.hists[i] = metrics.Float64Histogram{Counts: append([]uint64(nil), h.Counts...), Buckets: h.Buckets}
		}
	}
	return r
}

// since returns the waits recorded after before was read.
func (r waitReadings) since(before waitReadings) Waits {
	top := func(i int) time.Duration {
		now, old := r.hists[i], before.hists[i]
		for j := len(now.Counts) - 1; j >= 0; j-- {
			if j < len(old.Counts) && now.Counts[j] == old.Counts[j] || now.Counts[j] == 0 {
				continue
			}
			up := now.Buckets[j+1]
			if math.IsInf(up, 1) {
				up = now.Buckets[j] // the open-ended top bucket: its lower edge
			}
			return time.Duration(up * float64(time.Second))
		}
		return 0
	}
	return Waits{Sched: top(0), STW: max(top(1), top(2)), Faults: r.faults - before.faults}
}
