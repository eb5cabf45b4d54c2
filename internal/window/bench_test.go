package window_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// Benchmarks per algorithm, named for benchstat:
//
//	go test ./internal/window -run='^$' -bench=. -count=10 > new.txt
//	benchstat -col /algo new.txt
//
// path=allow admits every call: clock=monotonic calls Allow() on a limiter
// whose limit is never reached in a run (the counter's is renewed, off the
// clock, every 2^23 calls); clock=fixed calls AllowN with an explicit time
// that advances 2W/N per call (no clock read). path=deny calls Allow() on a
// drained limiter. impl=floor is the least any limiter must do: one
// monotonic clock read, one load and one CompareAndSwap (or, for deny, a
// read and a load).

var sink atomic.Uint64

type allower interface {
	Allow() bool
	AllowN(time.Time, int) bool
}

// allowLimiter never denies in a run: fixed 2^30 per hour, counter 2^23 per
// day, log 64 per nanosecond (every admission has left the window by the
// time the 64th after it comes).
func allowLimiter(b *testing.B, algo string) allower {
	var l allower
	var err error
	switch algo {
	case "fixed":
		l, err = atomiclimit.NewRule(atomiclimit.FixedWindow(1<<30, time.Hour))
	case "counter":
		l, err = atomiclimit.NewRule(atomiclimit.SlidingCounter(1<<23, 24*time.Hour))
	case "log":
		l, err = atomiclimit.NewRule(atomiclimit.SlidingLog(64, time.Nanosecond))
	}
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// paced is 1000 per second, driven by explicit times 2ms apart.
func pacedLimiter(b *testing.B, algo string) allower {
	var l allower
	var err error
	switch algo {
	case "fixed":
		l, err = atomiclimit.NewRule(atomiclimit.FixedWindow(1000, time.Second))
	case "counter":
		l, err = atomiclimit.NewRule(atomiclimit.SlidingCounter(1000, time.Second))
	case "log":
		l, err = atomiclimit.NewRule(atomiclimit.SlidingLog(1000, time.Second))
	}
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// denyLimiter has spent its one event for the next hour.
func denyLimiter(b *testing.B, algo string) allower {
	var l allower
	var err error
	switch algo {
	case "fixed":
		l, err = atomiclimit.NewRule(atomiclimit.FixedWindow(1, time.Hour))
	case "counter":
		l, err = atomiclimit.NewRule(atomiclimit.SlidingCounter(1, time.Hour))
	case "log":
		l, err = atomiclimit.NewRule(atomiclimit.SlidingLog(1, time.Hour))
	}
	if err != nil {
		b.Fatal(err)
	}
	if !l.Allow() || l.Allow() {
		b.Fatal("deny limiter not drained")
	}
	return l
}

var algos = []string{"fixed", "counter", "log"}

var epoch = time.Now()

func BenchmarkSerial(b *testing.B) {
	for _, algo := range algos {
		b.Run(fmt.Sprintf("path=allow/clock=monotonic/algo=%s", algo), func(b *testing.B) {
			l := allowLimiter(b, algo)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if algo == "counter" && i&(1<<23-1) == 1<<23-1 {
					b.StopTimer()
					l = allowLimiter(b, algo)
					b.StartTimer()
				}
				if !l.Allow() {
					b.Fatalf("denied at %d", i)
				}
			}
		})
		b.Run(fmt.Sprintf("path=allow/clock=fixed/algo=%s", algo), func(b *testing.B) {
			l := pacedLimiter(b, algo)
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				now = now.Add(2 * time.Millisecond)
				if !l.AllowN(now, 1) {
					b.Fatalf("denied at %d", i)
				}
			}
		})
		b.Run(fmt.Sprintf("path=deny/clock=monotonic/algo=%s", algo), func(b *testing.B) {
			l := denyLimiter(b, algo)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if l.Allow() {
					b.Fatal("admitted")
				}
			}
		})
	}
	b.Run("path=allow/clock=monotonic/algo=floor", func(b *testing.B) {
		var w atomic.Uint64
		b.ReportAllocs()
		for range b.N {
			t := uint64(time.Since(epoch))
			old := w.Load()
			w.CompareAndSwap(old, max(old, t)+1)
		}
	})
	b.Run("path=deny/clock=monotonic/algo=floor", func(b *testing.B) {
		var w atomic.Uint64
		var acc uint64
		b.ReportAllocs()
		for range b.N {
			acc += uint64(time.Since(epoch)) + w.Load()
		}
		sink.Add(acc)
	})
}

// BenchmarkParallel hits one limiter (one hot key) from every P.
func BenchmarkParallel(b *testing.B) {
	for _, algo := range algos {
		b.Run(fmt.Sprintf("path=allow/clock=monotonic/algo=%s", algo), func(b *testing.B) {
			if algo == "counter" {
				b.Skip("2^23 per day would be exhausted; the counter's cost is the fixed window's plus a 128-bit multiply")
			}
			l := allowLimiter(b, algo)
			b.ReportAllocs()
			b.ResetTimer()
			var denied atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !l.Allow() {
						denied.Add(1)
					}
				}
			})
			b.ReportMetric(float64(denied.Load())/float64(b.N), "denied/op")
		})
		b.Run(fmt.Sprintf("path=deny/clock=monotonic/algo=%s", algo), func(b *testing.B) {
			l := denyLimiter(b, algo)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.Allow()
				}
			})
		})
	}
	b.Run("path=allow/clock=monotonic/algo=floor", func(b *testing.B) {
		var w atomic.Uint64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				t := uint64(time.Since(epoch))
				old := w.Load()
				w.CompareAndSwap(old, max(old, t)+1)
			}
		})
	})
}
