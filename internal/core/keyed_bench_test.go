package core_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/core"
)

// The keyed benchmarks. Each runs the Keyed limiter beside its floor in the
// same process: one xsync MapOf.Load, one clock read, and one load and
// CompareAndSwap on the value found: the least work any keyed limiter on
// that map must do.
//
//	go test ./atomicbucket -run='^$' -bench='Keyed' -count=10 -cpu=2 -timeout=60m > keyed.txt
//	benchstat -col /impl keyed.txt
//
// BenchmarkKeyedMemory and BenchmarkKeyedGrowth report their own metrics and
// run once per count: add -benchtime=1x. With -short (CI's quick mode) every
// keyed benchmark uses 100,000 keys instead of a million.

// benchKeys is the number of pre-generated keys.
var benchKeys = 1_000_000

var (
	keyedFixtureOnce sync.Once
	benchKeyNames    []string // "user-0000000" …
	uniformSeq       []uint32 // key indexes, uniform
	zipfSeq          []uint32 // key indexes, Zipf s = 1.1
	keyedFixture     *core.Keyed[string]
	floorFixture     *xsync.MapOf[string, *atomic.Uint64]
)

// fixtures builds the million keys, both index sequences, a Keyed limiter
// holding every key and the floor's MapOf, once per process.
func fixtures(b *testing.B) {
	keyedFixtureOnce.Do(func() {
		if testing.Short() {
			benchKeys = 100_000
		}
		benchKeyNames = make([]string, benchKeys)
		for i := range benchKeyNames {
			benchKeyNames[i] = fmt.Sprintf("user-%07d", i)
		}
		const seqLen = 1 << 22
		rng := rand.New(rand.NewPCG(1, 2))
		uniformSeq = make([]uint32, seqLen)
		for i := range uniformSeq {
			uniformSeq[i] = uint32(rng.IntN(benchKeys))
		}
		z := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, uint64(benchKeys-1))
		zipfSeq = make([]uint32, seqLen)
		for i := range zipfSeq {
			// Zipf ranks, scattered over the key space so that hot keys
			// are not neighbours in the map.
			zipfSeq[i] = uint32(z.Uint64() * 7919 % uint64(benchKeys))
		}
		k, err := core.NewKeyed[string](core.GCRA(gcra.Every(time.Nanosecond), 1<<30), core.WithSweepInterval(0))
		if err != nil {
			panic(err)
		}
		floorFixture = xsync.NewMapOf[string, *atomic.Uint64]()
		for _, key := range benchKeyNames {
			k.Allow(key)
			floorFixture.Store(key, new(atomic.Uint64))
		}
		keyedFixture = k
	})
	if keyedFixture.Len() != benchKeys {
		b.Fatalf("fixture holds %d keys", keyedFixture.Len())
	}
}

// floorAllow is the floor of one keyed admission.
func floorAllow(m *xsync.MapOf[string, *atomic.Uint64], key string) bool {
	v, ok := m.Load(key)
	if !ok {
		return false
	}
	now := uint64(time.Since(epoch))
	old := v.Load()
	return v.CompareAndSwap(old, max(old, now)+1)
}

func BenchmarkKeyed(b *testing.B) {
	fixtures(b)
	for _, dist := range []struct {
		name string
		seq  []uint32
	}{{"uniform", uniformSeq}, {"zipf", zipfSeq}} {
		for _, impl := range []string{"keyed", "floor"} {
			b.Run(fmt.Sprintf("dist=%s/keys=%d/impl=%s", dist.name, benchKeys, impl), func(b *testing.B) {
				var start atomic.Uint64
				seq, k, m := dist.seq, keyedFixture, floorFixture
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(start.Add(1) * 104729)
					admitted := uint64(0)
					for pb.Next() {
						key := benchKeyNames[seq[i&(len(seq)-1)]]
						i++
						var ok bool
						if impl == "keyed" {
							ok = k.Allow(key)
						} else {
							ok = floorAllow(m, key)
						}
						if ok {
							admitted++
						}
					}
					sink.Add(admitted)
				})
			})
		}
	}
}

// BenchmarkKeyedInsert measures the insert path: every call is a new key
// (integer keys, so that making the key allocates nothing), on a limiter that
// grows from empty as b.N does.
func BenchmarkKeyedInsert(b *testing.B) {
	for _, shards := range []int{1, 16} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			k, err := core.NewKeyed[uint64](core.GCRA(gcra.PerSecond(10), 10), core.WithSweepInterval(0), core.WithShards(shards))
			if err != nil {
				b.Fatal(err)
			}
			var next atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if !k.Allow(next.Add(1)) {
						b.Error("a new key was denied")
						return
					}
				}
			})
		})
	}
}

// BenchmarkKeyedMemory reports the heap bytes per key of a limiter holding a
// million keys, excluding the keys' own bytes: the keys are built before the
// first reading, so only what the limiter adds per key (the map entry with
// the key's string header, the table share, the cell) is counted. Beside it,
// the same keys in one xsync MapOf of *atomic.Uint64 (the floor) and, for
// integer keys, the same limiter.
func BenchmarkKeyedMemory(b *testing.B) {
	fixtures(b)
	type build struct {
		name string
		fill func() any
	}
	// Below the million: the MapOf tables double when a shard passes 3.75
	// keys per bucket, so bytes per key saw-tooth with the key count.
	for _, n := range []int{benchKeys / 4, benchKeys / 2, benchKeys * 9 / 10} {
		b.Run(fmt.Sprintf("impl=keyed/key=string/keys=%d", n), func(b *testing.B) {
			var perKey float64
			for range b.N {
				before := heapInUse()
				k, _ := core.NewKeyed[string](core.GCRA(gcra.PerSecond(10), 10), core.WithSweepInterval(0))
				for _, key := range benchKeyNames[:n] {
					k.Allow(key)
				}
				after := heapInUse()
				runtime.KeepAlive(k)
				perKey = float64(after-before) / float64(n)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
	builds := []build{
		{"impl=keyed/key=string", func() any {
			k, _ := core.NewKeyed[string](core.GCRA(gcra.PerSecond(10), 10), core.WithSweepInterval(0))
			for _, key := range benchKeyNames {
				k.Allow(key)
			}
			return k
		}},
		{"impl=keyed-1-shard/key=string", func() any {
			k, _ := core.NewKeyed[string](core.GCRA(gcra.PerSecond(10), 10), core.WithSweepInterval(0), core.WithShards(1))
			for _, key := range benchKeyNames {
				k.Allow(key)
			}
			return k
		}},
		{"impl=floor/key=string", func() any {
			m := xsync.NewMapOf[string, *atomic.Uint64]()
			for _, key := range benchKeyNames {
				m.Store(key, new(atomic.Uint64))
			}
			return m
		}},
		{"impl=keyed/key=uint64", func() any {
			k, _ := core.NewKeyed[uint64](core.GCRA(gcra.PerSecond(10), 10), core.WithSweepInterval(0))
			for i := range uint64(benchKeys) {
				k.Allow(i)
			}
			return k
		}},
	}
	for _, bl := range builds {
		b.Run(fmt.Sprintf("%s/keys=%d", bl.name, benchKeys), func(b *testing.B) {
			var perKey float64
			for range b.N {
				before := heapInUse()
				v := bl.fill()
				after := heapInUse()
				runtime.KeepAlive(v)
				perKey = float64(after-before) / float64(benchKeys)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkKeyedGrowth times every single decision while goroutines drive a
// limiter from empty to a million keys (each key new once, then decided
// again), and reports the longest and the 99.99th percentile. Writers to a
// MapOf wait while it copies its table to grow; with one shard the last copy
// moves every key, with 16 a sixteenth.
func BenchmarkKeyedGrowth(b *testing.B) {
	fixtures(b)
	for _, shards := range []int{1, 16} {
		b.Run(fmt.Sprintf("keys=%d/shards=%d", benchKeys, shards), func(b *testing.B) {
			var worst, p9999 time.Duration
			for range b.N {
				k, err := core.NewKeyed[string](core.GCRA(gcra.PerSecond(10), 10), core.WithSweepInterval(0), core.WithShards(shards))
				if err != nil {
					b.Fatal(err)
				}
				workers := runtime.GOMAXPROCS(0)
				lat := make([][]time.Duration, workers)
				var wg sync.WaitGroup
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						mine := make([]time.Duration, 0, 2*benchKeys/workers+2)
						for i := w; i < benchKeys; i += workers {
							for _, key := range []string{benchKeyNames[i], benchKeyNames[i/2]} {
								t0 := time.Now()
								k.Allow(key)
								mine = append(mine, time.Since(t0))
							}
						}
						lat[w] = mine
					}()
				}
				wg.Wait()
				all := slices.Concat(lat...)
				slices.Sort(all)
				worst = max(worst, all[len(all)-1])
				p9999 = max(p9999, all[len(all)*9999/10000])
			}
			b.ReportMetric(float64(worst.Microseconds()), "max-µs")
			b.ReportMetric(float64(p9999.Nanoseconds()), "p99.99-ns")
		})
	}
}
