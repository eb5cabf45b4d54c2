package latency

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkBusy is the machine's own floor under the tail benchmarks: every
// P times calls that compute for a fixed time (call=0 is an empty call) for
// 2 s, and reports their percentiles, the longest and how many exceeded
// Slow. A call of a decision's length, doing none of its work, shows what
// the hypervisor, the kernel and the scheduler take from any such call.
//
//	go test ./internal/latency -run='^$' -bench=Busy -benchtime=1x -cpu=1,2
func BenchmarkBusy(b *testing.B) {
	const run = 2 * time.Second
	for _, d := range []time.Duration{0, 200 * time.Nanosecond, time.Microsecond} {
		b.Run(fmt.Sprintf("call=%dns", d.Nanoseconds()), func(b *testing.B) {
			var h Histogram
			for range b.N {
				var done atomic.Bool
				t := time.AfterFunc(run, func() { done.Store(true) })
				Timed(&h, runtime.GOMAXPROCS(0), func(_ int, hw *Histogram) {
					for !done.Load() {
						t0 := time.Now()
						Busy(d)
						hw.Add(time.Since(t0))
					}
				})
				t.Stop()
			}
			h.Report(b)
		})
	}
}
