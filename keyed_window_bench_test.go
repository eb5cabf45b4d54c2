package atomiclimit_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// The keyed algorithms side by side, for the choice table in the root
// package's doc: each as a atomiclimit.Keyed on string keys, Allow on the monotonic
// clock.
//
//	go test . -run='^$' -bench='KeyedAlgo' -count=10 -cpu=2 > algo.txt
//	benchstat -col /algo algo.txt
//
// path=serial is one goroutine on one key; path=hot is every P on one key;
// path=spread is every P over 1,000,000 keys (100,000 with -short), uniform.
// The limits are wide enough that most calls are admitted where the
// algorithm allows it; allowed/op says how many were. BenchmarkKeyedAlgoMemory
// reports heap bytes per key (keys' own bytes excluded: the names exist
// before the limiter); run it with -benchtime=1x.

// keyedAlgoNames are the algorithms newKeyedAlgo builds as keyed limiters:
// GCRA, the fixed window, the sliding counter, the sliding log (N = 16) and
// three bands (GCRA + fixed + counter).
var keyedAlgoNames = []string{"gcra", "fixed", "counter", "log", "bands"}

type keyedAllower interface {
	Allow(key string) bool
	Stats() atomiclimit.Stats
}

func newKeyedAlgo(algo string) keyedAllower {
	const noSweep = 0
	var rule atomiclimit.Rule
	switch algo {
	case "gcra":
		rule = atomiclimit.GCRA(gcra.Every(time.Nanosecond), 1<<30)
	case "fixed":
		rule = atomiclimit.FixedWindow(1<<30, time.Hour)
	case "counter":
		rule = atomiclimit.SlidingCounter(1<<21, time.Hour)
	case "log":
		rule = atomiclimit.SlidingLog(16, time.Millisecond)
	case "bands":
		rule = atomiclimit.Bands(
			atomiclimit.GCRA(gcra.Every(time.Nanosecond), 1<<30),
			atomiclimit.FixedWindow(1<<30, time.Hour),
			atomiclimit.SlidingCounter(1<<21, time.Hour),
		)
	}
	k, err := atomiclimit.NewKeyedRule[string](rule, atomiclimit.WithSweepInterval(noSweep))
	if err != nil {
		panic(err)
	}
	return k
}

var (
	algoKeyNames []string
	algoSeq      []uint32
)

func algoFixtures() {
	if algoKeyNames != nil {
		return
	}
	keys := 1_000_000
	if testing.Short() {
		keys = 100_000
	}
	algoKeyNames = make([]string, keys)
	for i := range algoKeyNames {
		algoKeyNames[i] = fmt.Sprintf("user-%07d", i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	algoSeq = make([]uint32, 1<<22)
	for i := range algoSeq {
		algoSeq[i] = uint32(rng.IntN(keys))
	}
}

func BenchmarkKeyedAlgo(b *testing.B) {
	algoFixtures()
	for _, path := range []string{"serial", "hot", "spread"} {
		for _, algo := range keyedAlgoNames {
			name := fmt.Sprintf("path=%s/algo=%s", path, algo)
			if path == "spread" {
				name = fmt.Sprintf("path=spread/keys=%d/algo=%s", len(algoKeyNames), algo)
			}
			b.Run(name, func(b *testing.B) {
				k := newKeyedAlgo(algo)
				if path == "spread" {
					for _, key := range algoKeyNames {
						k.Allow(key)
					}
				} else {
					k.Allow("hot")
				}
				var allowed atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				if path == "serial" {
					n := int64(0)
					for range b.N {
						if k.Allow("hot") {
							n++
						}
					}
					allowed.Add(n)
				} else {
					var start atomic.Uint64
					b.RunParallel(func(pb *testing.PB) {
						i, n := int(start.Add(1)*104729), int64(0)
						for pb.Next() {
							key := "hot"
							if path == "spread" {
								key = algoKeyNames[algoSeq[i&(len(algoSeq)-1)]]
								i++
							}
							if k.Allow(key) {
								n++
							}
						}
						allowed.Add(n)
					})
				}
				b.StopTimer()
				b.ReportMetric(float64(allowed.Load())/float64(b.N), "allowed/op")
				runtime.KeepAlive(k)
			})
		}
	}
}

// BenchmarkKeyedAlgoMemory fills each keyed limiter with every key and
// reports the heap it holds per key. (It was window's BenchmarkKeyedMemory;
// that name is this package's GCRA memory benchmark.)
func BenchmarkKeyedAlgoMemory(b *testing.B) {
	algoFixtures()
	for _, algo := range keyedAlgoNames {
		b.Run(fmt.Sprintf("keys=%d/algo=%s", len(algoKeyNames), algo), func(b *testing.B) {
			var perKey float64
			for range b.N {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				k := newKeyedAlgo(algo)
				for _, key := range algoKeyNames {
					k.Allow(key)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if k.Stats().Keys != len(algoKeyNames) {
					b.Fatalf("holds %d keys", k.Stats().Keys)
				}
				perKey = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(algoKeyNames))
				runtime.KeepAlive(k)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}
