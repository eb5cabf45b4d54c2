package atomiclimit_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// BenchmarkHotKey admits every call of every rule kind on one key: from one
// goroutine (path=serial) and from every P (path=parallel), on a Keyed
// limiter (impl=keyed, the key "hot") and a Limiter (impl=limiter). Scaling
// with cores is the parallel row against the serial one:
//
//	go test . -run='^$' -bench='^BenchmarkHotKey$' -cpu=1,2,4,8,16 -count=10 > hot.txt
//	benchstat -col /path hot.txt
//
// The goal is parallel ≤ 1.5 × serial at every -cpu.
//
// Every call is meant to be admitted (a denial costs a load where an
// admission costs a CompareAndSwap, so a run that mixes them measures the
// mix): the limiters read hotClock, which runs 2^20 times faster than the
// monotonic clock, so that rules with realistic limits (2^20 per hour, a
// log of 1,000 per second) admit faster than any number of cores can ask.
// A call whose goroutine is preempted between its clock read and its
// decision decides at a stale time, which a rule may deny (stricter, as it
// must be); admitted/op reports how many were admitted, and a run below
// 0.99 fails.
func BenchmarkHotKey(b *testing.B) {
	for _, impl := range []string{"keyed", "limiter"} {
		for _, rule := range hotRuleNames {
			for _, path := range []string{"serial", "parallel"} {
				b.Run(fmt.Sprintf("impl=%s/rule=%s/path=%s", impl, rule, path), func(b *testing.B) {
					allow := hotAllow(b, impl, hotRules[rule])
					var denied atomic.Int64
					b.ReportAllocs()
					b.ResetTimer()
					if path == "serial" {
						for range b.N {
							if !allow() {
								denied.Add(1)
							}
						}
					} else {
						b.RunParallel(func(pb *testing.PB) {
							n := int64(0)
							for pb.Next() {
								if !allow() {
									n++
								}
							}
							denied.Add(n)
						})
					}
					b.StopTimer()
					admitted := 1 - float64(denied.Load())/float64(b.N)
					if admitted < 0.99 {
						b.Fatalf("%d of %d calls denied: the rule does not admit (nearly) every call", denied.Load(), b.N)
					}
					b.ReportMetric(admitted, "admitted/op")
				})
			}
		}
	}
}

// hotRuleNames are the rule kinds of BenchmarkHotKey, in its order.
var hotRuleNames = []string{"gcra", "fixed", "anchored", "counter", "log", "rolling", "bands"}

// hotRules are realistic limits, on hotClock's time: one virtual hour is
// 3.4 ms, so even the sliding counter's 2^20 per hour admits one call every
// 3.3 ns. GCRA's burst of an hour's quota leaves a call 3.4 ms to go stale.
var hotRules = map[string]atomiclimit.Rule{
	"gcra":     atomiclimit.GCRA(atomiclimit.PerHour(1<<30), 1<<30),
	"fixed":    atomiclimit.FixedWindow(1<<24, time.Hour),
	"anchored": atomiclimit.AnchoredWindow(1<<24, time.Hour),
	"counter":  atomiclimit.SlidingCounter(1<<20, time.Hour),
	"log":      atomiclimit.SlidingLog(1_000, time.Second),
	"rolling":  atomiclimit.Rolling(1<<20, time.Hour, time.Minute, 0),
	"bands": atomiclimit.Bands(
		atomiclimit.GCRA(atomiclimit.PerHour(1<<30), 1<<30),
		atomiclimit.FixedWindow(1<<24, time.Hour),
		atomiclimit.SlidingCounter(1<<20, time.Hour),
	),
}

// hotClock is the monotonic clock, 2^20 times faster: each reading is one
// monotonic clock read, a multiply and an add.
type hotClock struct{ base time.Time }

func (c hotClock) Now() time.Time { return c.base.Add(time.Since(c.base) << 20) }

// hotAllow returns the call BenchmarkHotKey makes: Allow on the key "hot" of
// a new Keyed limiter, or Allow on a new Limiter, of rule on hotClock.
func hotAllow(b *testing.B, impl string, rule atomiclimit.Rule) func() bool {
	clk := atomiclimit.WithClock(hotClock{time.Now()})
	if impl == "limiter" {
		l, err := atomiclimit.NewRule(rule, clk)
		if err != nil {
			b.Fatal(err)
		}
		return l.Allow
	}
	k, err := atomiclimit.NewKeyedRule[string](rule, clk, atomiclimit.WithSweepInterval(0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(k.Close)
	return func() bool { return k.Allow("hot") }
}
