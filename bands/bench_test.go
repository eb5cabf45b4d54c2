package bands_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit/bands"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/window"
)

// Benchmarks for 1 to 4 bands on one key, named for benchstat:
//
//	go test ./bands -run='^$' -bench=. -count=10 > new.txt
//	benchstat -col /bands new.txt
//
// path=allow admits every call (limits never reached in a run: GCRA 1/ns
// with a burst of 2^30, fixed 2^30 per hour, counter 2^23 per day, renewed
// off the clock every 2^22 calls, log 64 per ns); path=deny is denied by
// the last band, after every band's check.

func benchSpecs(k int, deny bool) []bands.Band {
	all := []bands.Band{
		bands.GCRA(gcra.Every(time.Nanosecond), 1<<30),
		bands.Fixed(1<<30, time.Hour, window.AlignUTC(0)),
		bands.Counter(1<<23, 24*time.Hour),
		bands.Log(64, time.Nanosecond),
	}
	specs := append([]bands.Band(nil), all[:k]...)
	if deny {
		specs[k-1] = []bands.Band{
			bands.GCRA(gcra.Every(time.Hour), 1),
			bands.Fixed(1, time.Hour, window.AlignStart),
			bands.Counter(1, time.Hour),
			bands.Log(1, time.Hour),
		}[k-1]
	}
	return specs
}

func benchLimiter(b *testing.B, k int, deny bool) *bands.Limiter {
	l, err := bands.New(benchSpecs(k, deny))
	if err != nil {
		b.Fatal(err)
	}
	if deny && (!l.Allow() || l.Allow()) {
		b.Fatal("not drained")
	}
	return l
}

func BenchmarkSerial(b *testing.B) {
	for _, path := range []string{"allow", "deny"} {
		for k := 1; k <= 4; k++ {
			b.Run(fmt.Sprintf("path=%s/bands=%d", path, k), func(b *testing.B) {
				l := benchLimiter(b, k, path == "deny")
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if k >= 3 && path == "allow" && i&(1<<22-1) == 1<<22-1 {
						b.StopTimer()
						l = benchLimiter(b, k, false)
						b.StartTimer()
					}
					if l.Allow() != (path == "allow") {
						b.Fatalf("call %d: wrong decision", i)
					}
				}
			})
		}
	}
}

// BenchmarkParallel hits one Limiter (one hot key) from every P; the
// allow path skips the counter band, whose quota the run would exhaust.
func BenchmarkParallel(b *testing.B) {
	for _, path := range []string{"allow", "deny"} {
		for _, k := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("path=%s/bands=%d", path, k), func(b *testing.B) {
				specs := benchSpecs(k, path == "deny")
				if k == 4 && path == "allow" {
					specs = append(specs[:2], specs[3]) // gcra, fixed, log
				}
				l, err := bands.New(specs)
				if err != nil {
					b.Fatal(err)
				}
				if path == "deny" && (!l.Allow() || l.Allow()) {
					b.Fatal("not drained")
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						l.Allow()
					}
				})
			})
		}
	}
}
