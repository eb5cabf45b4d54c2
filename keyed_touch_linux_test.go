package atomiclimit_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/latency"
)

// BenchmarkKeyedFirstTouch takes the slow decisions of growth apart: one
// goroutine, on a thread of its own, fills a presized limiter (no table
// copies, no sweeper) with a million keys, and reads the thread's page
// fault count around every decision. It reports how many decisions took
// longer than latency.Slow, how many took a page fault within the call and
// how many of those were longer than latency.Slow, the faults in all, the
// p99.99 of the decisions that took none, and the time spent within the
// timed calls (the span in which a stop of the machine lands in a decision).
// memory=returned gives the process's free memory back to the operating
// system first, so that the limiter's entries, cells and tables land on
// pages never touched; memory=reused fills and drops a limiter first, so
// that they land on pages the process already holds.
//
//	go test . -run='^$' -bench=KeyedFirstTouch -benchtime=1x -count=3 -cpu=2
func BenchmarkKeyedFirstTouch(b *testing.B) {
	keyNames()
	newLimiter := func() *atomiclimit.Keyed[string] {
		k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(10, time.Second), 10),
			atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(benchKeys, atomiclimit.RejectNew))
		if err != nil {
			b.Fatal(err)
		}
		return k
	}
	for _, memory := range []string{"returned", "reused"} {
		b.Run(fmt.Sprintf("keys=%d/memory=%s", benchKeys, memory), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var all, unfaulted latency.Histogram
			var faulted, slowFaulted, faults int
			var timed time.Duration
			for range b.N {
				if memory == "reused" {
					k := newLimiter()
					for _, key := range benchKeyNames {
						k.Allow(key)
					}
					k.Close()
					runtime.GC()
				} else {
					debug.FreeOSMemory()
				}
				k := newLimiter()
				for _, key := range benchKeyNames {
					f0 := threadFaults()
					t0 := time.Now()
					k.Allow(key)
					d := time.Since(t0)
					df := threadFaults() - f0
					all.Add(d)
					timed += d
					faults += int(df)
					if df == 0 {
						unfaulted.Add(d)
						continue
					}
					faulted++
					if d > latency.Slow {
						slowFaulted++
					}
				}
				k.Close()
			}
			b.ReportMetric(float64(all.Quantile(0.9999)), "p99.99-ns")
			b.ReportMetric(float64(unfaulted.Quantile(0.9999)), "unfaulted-p99.99-ns")
			b.ReportMetric(float64(all.Slow())/float64(b.N), "over-20µs/op")
			b.ReportMetric(float64(faulted)/float64(b.N), "faulted/op")
			b.ReportMetric(float64(slowFaulted)/float64(b.N), "faulted-over-20µs/op")
			b.ReportMetric(float64(timed.Milliseconds())/float64(b.N), "timed-ms/op")
			b.ReportMetric(float64(faults)/float64(b.N), "faults/op")
		})
	}
}

// threadFaults returns the page faults the calling thread has taken.
func threadFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return int64(ru.Minflt) + int64(ru.Majflt)
}
