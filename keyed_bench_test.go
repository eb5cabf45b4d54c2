package atomiclimit_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/latency"
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
	keyedFixture     *atomiclimit.Keyed[string]
	floorFixture     *xsync.MapOf[string, *atomic.Uint64]
)

// fixtures builds the million keys, both index sequences, a Keyed limiter
// holding every key and the floor's MapOf, once per process.
func fixtures(b *testing.B) {
	keyedFixtureOnce.Do(func() {
		keyNames()
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
		k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Every(time.Nanosecond), 1<<30), atomiclimit.WithSweepInterval(0))
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
	if keyedFixture.Stats().Keys != benchKeys {
		b.Fatalf("fixture holds %d keys", keyedFixture.Stats().Keys)
	}
}

var keyNamesOnce sync.Once

// keyNames builds benchKeyNames only, for the benchmarks that build their own
// limiters: the fixture's limiters would add two million keys' worth of
// heap for the garbage collector to mark while they run.
func keyNames() {
	keyNamesOnce.Do(func() {
		if testing.Short() {
			benchKeys = 100_000
		}
		benchKeyNames = make([]string, benchKeys)
		for i := range benchKeyNames {
			benchKeyNames[i] = fmt.Sprintf("user-%07d", i)
		}
	})
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
			k, err := atomiclimit.NewKeyedRule[uint64](atomiclimit.GCRA(gcra.Per(10, time.Second), 10), atomiclimit.WithSweepInterval(0), atomiclimit.WithShards(shards))
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
				k, _ := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(10, time.Second), 10), atomiclimit.WithSweepInterval(0))
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
	// IPv6 /64s, built before the first reading like the strings.
	prefixes := make([]netip.Prefix, benchKeys)
	for i := range prefixes {
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
		prefixes[i] = netip.PrefixFrom(a, 64)
	}
	builds := []build{
		{"impl=keyed/key=string", func() any {
			k, _ := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(10, time.Second), 10), atomiclimit.WithSweepInterval(0))
			for _, key := range benchKeyNames {
				k.Allow(key)
			}
			return k
		}},
		{"impl=keyed-1-shard/key=string", func() any {
			k, _ := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(10, time.Second), 10), atomiclimit.WithSweepInterval(0), atomiclimit.WithShards(1))
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
		{"impl=keyed/key=prefix", func() any {
			k, _ := atomiclimit.NewKeyedRule[netip.Prefix](atomiclimit.GCRA(gcra.Per(10, time.Second), 10), atomiclimit.WithSweepInterval(0))
			for _, key := range prefixes {
				k.Allow(key)
			}
			return k
		}},
		{"impl=keyed/key=uint64", func() any {
			k, _ := atomiclimit.NewKeyedRule[uint64](atomiclimit.GCRA(gcra.Per(10, time.Second), 10), atomiclimit.WithSweepInterval(0))
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
// again), and reports percentiles of one decision and the longest. Writers
// to a MapOf wait while it copies its table to grow; with one shard the last
// copy moves every key, with 16 a sixteenth, and with a key bound
// (cfg=maxkeys, which presizes the map) none. cfg=noop times an empty call
// in the same loop, and cfg=busy a call that computes for 200 ns touching no
// memory (about 300 ns with its clock reads: a decision's length): what the
// machine itself (the hypervisor, the kernel, the scheduler) adds to any
// call, and to one that long. spare=0 runs a goroutine on every P; spare=1 leaves one P free, as a
// server below saturation does, for the runtime's own work (the collector,
// the sweeper).
//
//	go test . -run='^$' -bench='KeyedGrowth|KeyedChurn' -benchtime=1x -count=3 -cpu=2
func BenchmarkKeyedGrowth(b *testing.B) {
	keyNames()
	for _, spare := range latency.Spares {
		for _, cfg := range []struct {
			name string
			opts []atomiclimit.Option
		}{
			{"noop", nil},
			{"busy", nil},
			{"shards=1", []atomiclimit.Option{atomiclimit.WithShards(1)}},
			{"shards=16", nil},
			{"shards=1024", []atomiclimit.Option{atomiclimit.WithShards(1024)}},
			{"maxkeys", []atomiclimit.Option{atomiclimit.WithMaxKeys(benchKeys, atomiclimit.RejectNew)}},
		} {
			b.Run(fmt.Sprintf("keys=%d/spare=%d/cfg=%s", benchKeys, spare, cfg.name), func(b *testing.B) {
				latency.SkipNoSpare(b, spare)
				var h latency.Histogram
				for range b.N {
					opts := append([]atomiclimit.Option{atomiclimit.WithSweepInterval(0)}, cfg.opts...)
					k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(10, time.Second), 10), opts...)
					if err != nil {
						b.Fatal(err)
					}
					allow := floorOr(cfg.name, k.Allow)
					workers := latency.Workers(spare)
					latency.Timed(&h, workers, func(w int, hw *latency.Histogram) {
						for i := w; i < benchKeys; i += workers {
							for _, key := range []string{benchKeyNames[i], benchKeyNames[i/2]} {
								t0 := time.Now()
								allow(key)
								hw.Add(time.Since(t0))
							}
						}
					})
				}
				h.Report(b)
			})
		}
	}
}

// floorOr returns the call a tail benchmark times for cfg: the machine's
// floors for cfg=noop and cfg=busy, else allow.
func floorOr(cfg string, allow func(string) bool) func(string) bool {
	switch cfg {
	case "noop":
		return noopAllow
	case "busy":
		return busyAllow
	}
	return allow
}

// BenchmarkKeyedChurn times every decision of a limiter holding a million
// live keys of which 10% are replaced per second: the live keys are a window
// of the key space that slides by 100,000 keys a second, and the background
// sweeper removes the keys that left it once they are idle (one pass a
// second). Each worker walks the window in laps, so that every live key is
// asked once a lap (every 0.29–0.44 s here). The rule, 1 per 2 s with a
// burst of 2, keeps a key asked more often than every 2 s from going idle
// (each admission adds 2 s, up to 4 s ahead of the clock), and lets one no
// longer asked go idle 2–4 s later: the limiter holds about 1.3M keys, and
// evicts none in the first seconds, then the ~100,000 a second that leave
// (50,000–62,000 a second averaged over the run, measured). It runs 8 s
// after a fill that is not timed, and reports the evictions per second over
// the whole run and the keys held at its end. cfg, spare and the floors
// (noop, busy) as in BenchmarkKeyedGrowth (the floors run no sweeper);
// shards=256 makes each sweep step a sixteenth as long.
func BenchmarkKeyedChurn(b *testing.B) {
	const live, perSecond, run = 1_000_000, 100_000, 8 * time.Second
	if testing.Short() {
		b.Skip("a million keys and 8 s per run")
	}
	names := make([]string, live+perSecond*int(run/time.Second)+1) // the window never passes live+perSecond·run
	for i := range names {
		names[i] = fmt.Sprintf("churn-%07d", i)
	}
	for _, spare := range latency.Spares {
		for _, cfg := range []struct {
			name string
			opts []atomiclimit.Option
		}{
			{"noop", nil},
			{"busy", nil},
			{"shards=16", nil},
			{"shards=256", []atomiclimit.Option{atomiclimit.WithShards(256)}},
			{"maxkeys", []atomiclimit.Option{atomiclimit.WithMaxKeys(live+live/2, atomiclimit.RejectNew)}},
		} {
			b.Run(fmt.Sprintf("keys=%d/spare=%d/cfg=%s", live, spare, cfg.name), func(b *testing.B) {
				latency.SkipNoSpare(b, spare)
				var h latency.Histogram
				for range b.N {
					sweep := time.Second
					if cfg.name == "noop" || cfg.name == "busy" {
						sweep = 0 // the machine alone: no sweeper either
					}
					opts := append([]atomiclimit.Option{atomiclimit.WithSweepInterval(sweep)}, cfg.opts...)
					k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1, 2*time.Second), 2), opts...)
					if err != nil {
						b.Fatal(err)
					}
					for _, key := range names[:live] {
						k.Allow(key)
					}
					allow := floorOr(cfg.name, k.Allow)
					workers := latency.Workers(spare)
					start := time.Now()
					latency.Timed(&h, workers, func(w int, hw *latency.Histogram) {
						latency.Window(start, run, live, perSecond, w, workers, func(j int) {
							t0 := time.Now()
							allow(names[j])
							hw.Add(time.Since(t0))
						})
					})
					k.Close()
					b.ReportMetric(float64(k.Stats().Evicted)/run.Seconds(), "evicted/s")
					b.ReportMetric(float64(k.Stats().Keys), "held-keys")
				}
				h.Report(b)
			})
		}
	}
}

// BenchmarkKeyedSweep times every decision on live keys while one full
// sweep pass runs beside them: 1M keys under 1 per 2 s, burst 2, of which
// the odd half went idle (asked once, more than 2 s ago) and the even half
// are asked by every P in turn while Sweep removes the idle half from
// another goroutine. It
// reports the decisions' percentiles and the runtime's waits (as
// BenchmarkKeyedGrowth), how long the pass took and what it removed.
// cfg=noop and cfg=busy make the same pass beside the machine's floors, and
// spare as in BenchmarkKeyedGrowth.
//
//	go test . -run='^$' -bench=KeyedSweep -benchtime=1x -count=3 -cpu=2
func BenchmarkKeyedSweep(b *testing.B) {
	keyNames()
	for _, spare := range latency.Spares {
		for _, cfg := range []string{"noop", "busy", "shards=16"} {
			b.Run(fmt.Sprintf("keys=%d/spare=%d/cfg=%s", benchKeys, spare, cfg), func(b *testing.B) {
				latency.SkipNoSpare(b, spare)
				var h latency.Histogram
				var pass time.Duration
				removed := 0
				for range b.N {
					k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1, 2*time.Second), 2), atomiclimit.WithSweepInterval(0))
					if err != nil {
						b.Fatal(err)
					}
					// The odd half is asked once, then the even half is kept
					// asked (untimed) until the odd half is idle, 2 s later.
					for i := 1; i < benchKeys; i += 2 {
						k.Allow(benchKeyNames[i])
					}
					idleAt := time.Now().Add(2*time.Second + 100*time.Millisecond)
					for j := 0; time.Now().Before(idleAt); j = (j + 2) % benchKeys {
						k.Allow(benchKeyNames[j])
					}
					allow := floorOr(cfg, k.Allow)
					var done atomic.Bool
					go func() {
						t0 := time.Now()
						removed += k.Sweep()
						pass += time.Since(t0)
						done.Store(true)
					}()
					workers := latency.Workers(spare)
					latency.Timed(&h, workers, func(w int, hw *latency.Histogram) {
						for j := 2 * w; !done.Load(); j += 2 * workers {
							if j >= benchKeys {
								j = 2 * w
							}
							t0 := time.Now()
							allow(benchKeyNames[j])
							hw.Add(time.Since(t0))
						}
					})
				}
				h.Report(b)
				b.ReportMetric(float64(pass.Milliseconds())/float64(b.N), "sweep-ms")
				b.ReportMetric(float64(removed)/float64(b.N), "removed")
			})
		}
	}
}

//go:noinline
func noopAllow(string) bool { return true }

// busyAllow computes for 200 ns touching no memory: timed, about 300 ns, as
// long as a decision at a million keys.
func busyAllow(string) bool {
	latency.Busy(200 * time.Nanosecond)
	return true
}

// BenchmarkKeyedFullScan times the requests for new keys that a full bounded
// limiter (WithMaxKeys(n, RejectNew), n = benchKeys) refuses while none of
// its keys is idle (1 per hour, burst 1: every key stays busy for the run).
// The first refusal scans every shard for an idle key, under the limiter's
// one room lock; refusals within the next 10 ms look only at keys created
// since. The longest is that scan, the wait README's "What can make one
// decision wait" names for a full bounded limiter. 2 goroutines, 200,000
// refusals each.
//
//	go test . -run='^$' -bench=KeyedFullScan -benchtime=1x -count=3
func BenchmarkKeyedFullScan(b *testing.B) {
	keyNames()
	b.Run(fmt.Sprintf("keys=%d", benchKeys), func(b *testing.B) {
		var h latency.Histogram
		for range b.N {
			k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1, time.Hour), 1),
				atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(benchKeys, atomiclimit.RejectNew))
			if err != nil {
				b.Fatal(err)
			}
			for _, key := range benchKeyNames {
				if !k.Allow(key) {
					b.Fatal("a key of the fill was refused")
				}
			}
			const perWorker = 200_000
			latency.Timed(&h, 2, func(w int, hw *latency.Histogram) {
				for i := range perWorker {
					key := fmt.Sprintf("new-%d-%07d", w, i)
					t0 := time.Now()
					if k.Allow(key) {
						panic("a new key admitted past the bound")
					}
					hw.Add(time.Since(t0))
				}
			})
			k.Close()
		}
		h.Report(b)
	})
}

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

// BenchmarkKeyedGC measures what holding keys costs the garbage collector
// of the process that holds them: the time of a forced full collection
// with gcKeys string keys held (the median of five), beside the same keys
// held alone in a slice, in the same run; and the heap objects and bytes
// each key adds. store=keys is the keys alone; store=keyed a Keyed limiter
// that has seen every key (the keys held too, as a server's are not: a
// per-request string is garbage once the request is done, unless the store
// keeps it); store=xsync an xsync MapOf[string, *atomic.Uint64], the
// plainest lock-free store of one word per key; store=xsync-hash and
// store=map-hash the floors of a store keyed by hashes (see below).
//
//	go test -run='^$' -bench=KeyedGC -benchtime=1x -count=5 .
func BenchmarkKeyedGC(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%08d", i)
	}
	for _, store := range []struct {
		name string
		fill func() any
	}{
		{"keys", func() any { return nil }},
		{"keyed", func() any {
			k, _ := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(10), 10, atomiclimit.WithSweepInterval(0))
			for _, key := range keys {
				k.Allow(key)
			}
			return k
		}},
		{"xsync", func() any {
			m := xsync.NewMapOf[string, *atomic.Uint64]()
			for _, key := range keys {
				m.Store(key, new(atomic.Uint64))
			}
			return m
		}},
		// The floors of a store of hashes: an xsync MapOf with no pointer
		// in its keys and values (still an entry object per key), and Go's
		// own map of hash to a cell in one array (no object per key; not
		// safe for concurrent writes).
		{"xsync-hash", func() any {
			m := xsync.NewMapOf[uint64, uint64]()
			for i := range keys {
				m.Store(uint64(i)*0x9E3779B97F4A7C15, uint64(i))
			}
			return m
		}},
		{"map-hash", func() any {
			cells := make([]atomic.Uint64, len(keys))
			m := make(map[uint64]*atomic.Uint64, len(keys))
			for i := range keys {
				m[uint64(i)*0x9E3779B97F4A7C15] = &cells[i]
			}
			return m
		}},
	} {
		b.Run(fmt.Sprintf("keys=%d/store=%s", n, store.name), func(b *testing.B) {
			var gc time.Duration
			var objects, bytes float64
			for range b.N {
				before := memStats()
				v := store.fill()
				after := memStats()
				objects = float64(after.HeapObjects-before.HeapObjects) / float64(n)
				bytes = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
				gc = medianGC(5)
				runtime.KeepAlive(v)
			}
			runtime.KeepAlive(keys)
			b.ReportMetric(float64(gc)/1e6, "gc-ms")
			b.ReportMetric(objects, "objects/key")
			b.ReportMetric(bytes, "B/key")
		})
	}
}

func memStats() runtime.MemStats {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms
}

// medianGC is the median time of k forced full collections.
func medianGC(k int) time.Duration {
	ts := make([]time.Duration, k)
	for i := range ts {
		start := time.Now()
		runtime.GC()
		ts[i] = time.Since(start)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts[k/2]
}
