package atomiclimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// Benchmarks for 1 to 4 bands on one key (the old package bands'
// BenchmarkSerial and BenchmarkParallel, renamed: core already has
// benchmarks of those names), named for benchstat:
//
//	go test . -run='^$' -bench=Bands -count=10 > new.txt
//	benchstat -col /bands new.txt
//
// path=allow admits every call (limits never reached in a run: GCRA 1/ns
// with a burst of 2^30, fixed 2^30 per hour, counter 2^23 per day, renewed
// off the clock every 2^22 calls, log 64 per ns); path=deny is denied by
// the last band, after every band's check. bands=1 is one rule, as
// Bands(rule) is.

func benchBandRules(k int, deny bool) []atomiclimit.Rule {
	all := []atomiclimit.Rule{
		atomiclimit.GCRA(gcra.Every(time.Nanosecond), 1<<30),
		atomiclimit.FixedWindowUTC(1<<30, time.Hour, 0),
		atomiclimit.SlidingCounter(1<<23, 24*time.Hour),
		atomiclimit.SlidingLog(64, time.Nanosecond),
	}
	rules := append([]atomiclimit.Rule(nil), all[:k]...)
	if deny {
		rules[k-1] = []atomiclimit.Rule{
			atomiclimit.GCRA(gcra.Every(time.Hour), 1),
			atomiclimit.FixedWindow(1, time.Hour),
			atomiclimit.SlidingCounter(1, time.Hour),
			atomiclimit.SlidingLog(1, time.Hour),
		}[k-1]
	}
	return rules
}

func benchBandsLimiter(b *testing.B, k int, deny bool) *atomiclimit.Limiter {
	l, err := atomiclimit.NewRule(atomiclimit.Bands(benchBandRules(k, deny)...))
	if err != nil {
		b.Fatal(err)
	}
	if deny && (!l.Allow() || l.Allow()) {
		b.Fatal("not drained")
	}
	return l
}

func BenchmarkBandsSerial(b *testing.B) {
	for _, path := range []string{"allow", "deny"} {
		for k := 1; k <= 4; k++ {
			b.Run(fmt.Sprintf("path=%s/bands=%d", path, k), func(b *testing.B) {
				l := benchBandsLimiter(b, k, path == "deny")
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if k >= 3 && path == "allow" && i&(1<<22-1) == 1<<22-1 {
						b.StopTimer()
						l = benchBandsLimiter(b, k, false)
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

// BenchmarkBandsParallel hits one Limiter (one hot key) from every P; the
// allow path skips the counter band, whose quota the run would exhaust.
func BenchmarkBandsParallel(b *testing.B) {
	for _, path := range []string{"allow", "deny"} {
		for _, k := range []int{1, 2, 4} {
			b.Run(fmt.Sprintf("path=%s/bands=%d", path, k), func(b *testing.B) {
				rules := benchBandRules(k, path == "deny")
				if k == 4 && path == "allow" {
					rules = append(rules[:2], rules[3]) // gcra, fixed, log
				}
				l, err := atomiclimit.NewRule(atomiclimit.Bands(rules...))
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
