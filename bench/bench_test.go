package main

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The scenarios, each run for every implementation that has the form it
// needs, with benchstat-friendly names (scenario/…/impl=name). Each reports
// allowed/op, the share of calls the implementation admitted, so that one
// that errors or decides differently shows.
//
// The main program runs them (go run . in this directory); by hand:
//
//	go test -run='^$' -bench=. -count=5 > raw.txt && benchstat -col /impl raw.txt

var (
	fixtureOnce sync.Once
	keyNames    []string // "user-0000000" …
	newKeyNames []string // "new-0000000" …, never in a fixture
	uniformSeq  []uint32
	zipfSeq     []uint32
)

func buildKeys() {
	fixtureOnce.Do(func() {
		keyNames = make([]string, keysCount)
		newKeyNames = make([]string, keysCount)
		for i := range keyNames {
			keyNames[i] = fmt.Sprintf("user-%07d", i)
			newKeyNames[i] = fmt.Sprintf("new-%07d", i)
		}
		const seqLen = 1 << 22
		rng := rand.New(rand.NewPCG(1, 2))
		uniformSeq = make([]uint32, seqLen)
		for i := range uniformSeq {
			uniformSeq[i] = uint32(rng.IntN(keysCount))
		}
		z := rand.NewZipf(rand.New(rand.NewPCG(3, 4)), 1.1, 1, uint64(keysCount-1))
		zipfSeq = make([]uint32, seqLen)
		for i := range zipfSeq {
			zipfSeq[i] = uint32(z.Uint64() * 7919 % uint64(keysCount))
		}
	})
}

// filled returns a keyed limiter of p holding every key.
func filled(p peer) keyed {
	buildKeys()
	k := p.keyed(admitAll)
	for _, key := range keyNames {
		k.allow(key)
	}
	return k
}

func report(b *testing.B, allowed int64) {
	b.ReportMetric(float64(allowed)/float64(b.N), "allowed/op")
}

func BenchmarkSerial(b *testing.B) {
	for _, p := range peers {
		if p.single == nil {
			continue
		}
		b.Run("impl="+p.id(), func(b *testing.B) {
			l := p.single(admitAll)
			var allowed int64
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if l.allow() {
					allowed++
				}
			}
			report(b, allowed)
		})
	}
}

func BenchmarkHotKey(b *testing.B) { benchHot(b, "HotKey") }

// benchHot runs every implementation that takes part in the hot-key
// scenarios whose name starts with prefix, as sub-benchmarks named by the
// rest of the scenario's name and impl=….
func benchHot(b *testing.B, prefix string) {
	for _, h := range hotScenarios {
		rest, ok := strings.CutPrefix(h.bench, prefix)
		if !ok {
			continue
		}
		rest = strings.TrimPrefix(rest+"/", "/")
		for _, p := range peers {
			if !h.runs(p) {
				continue
			}
			b.Run(rest+"impl="+p.id(), func(b *testing.B) {
				l, err := h.start(p)
				if err != nil {
					b.Fatal(err)
				}
				allowed := parallelAllow(b, l)
				if h.s != admitAll && !h.drain {
					b.ReportMetric(float64(allowed)/b.Elapsed().Seconds(), "allowed/s")
				}
			})
		}
	}
}

// parallelAllow calls l.allow from every goroutine of b.RunParallel and
// reports the share of calls admitted.
func parallelAllow(b *testing.B, l single) int64 {
	var allowed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var n int64
		for pb.Next() {
			if l.allow() {
				n++
			}
		}
		allowed.Add(n)
	})
	report(b, allowed.Load())
	return allowed.Load()
}

// BenchmarkContended: all goroutines (b.RunParallel) on one key whose limit
// admits part of what they offer, 10^6/s (mostly denials) and 10^8/s (mostly
// admissions); BenchmarkHotKey is the case where every call is admitted, and
// BenchmarkDeny the one where every call is denied. Besides allowed/op it
// reports allowed/s, which no limiter should take beyond its rate (plus its
// burst once over the run).
func BenchmarkContended(b *testing.B) { benchHot(b, "Contended") }

// BenchmarkDeny: one call per hour, spent before the timer starts; every
// call is a denial. (uber/ratelimit blocks instead of denying: not run.)
func BenchmarkDeny(b *testing.B) { benchHot(b, "Deny") }

// BenchmarkKeys runs one implementation at a time on both distributions,
// then drops its million keys, so that only one fixture is alive and the
// garbage collections between runs stay short.
func BenchmarkKeys(b *testing.B) {
	buildKeys()
	for _, p := range peers {
		if p.keyed == nil {
			continue
		}
		var k keyed
		for _, dist := range []struct {
			name string
			seq  []uint32
		}{{"uniform", uniformSeq}, {"zipf", zipfSeq}} {
			b.Run(fmt.Sprintf("dist=%s/keys=%d/impl=%s", dist.name, keysCount, p.id()), func(b *testing.B) {
				if k == nil {
					k = filled(p)
				}
				seq := dist.seq
				var start, allowed atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(start.Add(1) * 104729)
					var n int64
					for pb.Next() {
						if k.allow(keyNames[seq[i&(len(seq)-1)]]) {
							n++
						}
						i++
					}
					allowed.Add(n)
				})
				report(b, allowed.Load())
			})
		}
		if k != nil {
			k.close()
		}
	}
}

// BenchmarkInsert: every call is a key the limiter has not seen. A fresh
// limiter takes over (off the clock) when the pre-built new keys run out.
func BenchmarkInsert(b *testing.B) {
	buildKeys()
	for _, p := range peers {
		if p.keyed == nil {
			continue
		}
		b.Run("impl="+p.id(), func(b *testing.B) {
			k := p.keyed(admitAll)
			var allowed int64
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				j := i % len(newKeyNames)
				if j == 0 && i > 0 {
					b.StopTimer()
					k.close()
					k = p.keyed(admitAll)
					b.StartTimer()
				}
				if k.allow(newKeyNames[j]) {
					allowed++
				}
			}
			b.StopTimer()
			k.close()
			report(b, allowed)
		})
	}
}

var (
	heldKeysOnce sync.Once
	heldKeyNames []string
)

// heldKeys returns the keys of the heap and GC pass, "user-0000000" …,
// keysCount of them, built once and apart from the other benchmarks'
// fixtures, which BenchmarkMemory leaves unmade.
func heldKeys() []string {
	heldKeysOnce.Do(func() {
		heldKeyNames = make([]string, keysCount)
		for i := range heldKeyNames {
			heldKeyNames[i] = fmt.Sprintf("user-%07d", i)
		}
	})
	return heldKeyNames
}

// BenchmarkMemory measures what holding keys costs the process that holds
// them, for every store of heldStores: keysCount string keys, built before
// the first reading and held in a slice throughout (so that a store that
// keeps the caller's strings adds nothing for them, and one that copies
// them pays for the copy), each given one call, which every limiter admits
// and whose state it keeps for an hour (heldSetting). It reports per key
// the heap bytes (B/key) and heap objects (objects/key) the store adds,
// from runtime.MemStats after two collections before and after filling it;
// then the median time of five forced full collections with the store
// holding the keys (gc-ms), the median of five with the keys alone, taken
// in the same run just before the store was filled (keys-gc-ms), and the
// ratio of the two (gc/keys): the collector's work for the store against
// its work for the keys themselves. The row keys-alone has no store: its
// ratio shows the method's own noise.
//
// It ignores b.N: run it with -benchtime=1x, in a process of its own (the
// main program does), so that no other fixture is in the heap it measures.
func BenchmarkMemory(b *testing.B) {
	keys := heldKeys()
	for _, st := range heldStores() {
		b.Run(fmt.Sprintf("keys=%d/impl=%s", len(keys), st.id), func(b *testing.B) {
			var m heldCost
			for range b.N {
				var err error
				if m, err = measureHeld(keys, st); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(m.bytes, "B/key")
			b.ReportMetric(m.objects, "objects/key")
			b.ReportMetric(float64(m.gc)/1e6, "gc-ms")
			b.ReportMetric(float64(m.keysGC)/1e6, "keys-gc-ms")
			b.ReportMetric(float64(m.gc)/float64(m.keysGC), "gc/keys")
		})
	}
	runtime.KeepAlive(keys)
}

// heldCost is what a store holding keys costs: heap bytes and objects per
// key, and the median forced collection with it (gc) and without it
// (keysGC).
type heldCost struct {
	bytes, objects float64
	gc, keysGC     time.Duration
}

// measureHeld fills a new st with keys and measures what it costs.
func measureHeld(keys []string, st heldStore) (heldCost, error) {
	var c heldCost
	before := memStats()
	c.keysGC = medianGC(5)
	held, release, err := st.fill(keys)
	if err != nil {
		return c, err
	}
	after := memStats()
	c.gc = medianGC(5)
	runtime.KeepAlive(held)
	release()
	n := float64(len(keys))
	c.bytes = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
	c.objects = (float64(after.HeapObjects) - float64(before.HeapObjects)) / n
	return c, nil
}

// memStats returns the heap's statistics after two full collections: the
// first may leave objects with finalizers or in sync.Pools to the second.
func memStats() runtime.MemStats {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms
}

// medianGC returns the median time of k forced full collections.
func medianGC(k int) time.Duration {
	ts := make([]time.Duration, k)
	for i := range ts {
		start := time.Now()
		runtime.GC()
		ts[i] = time.Since(start)
	}
	slices.Sort(ts)
	return ts[k/2]
}

// TestFloorKeyed: the keyed floor finds each benchmark key's own cell (by
// the number its name ends in) and admits on it.
func TestFloorKeyed(t *testing.T) {
	f := newFloorKeyed()
	for _, key := range []string{"user-0000000", "user-0000042", "new-0000042", "churn-0000007"} {
		if !f.allow(key) {
			t.Errorf("allow(%q) = false", key)
		}
	}
	if got := f.cells[42].Load(); got == 0 {
		t.Errorf("cell 42 untouched")
	}
	if got := f.cells[7].Load(); got == 0 {
		t.Errorf("cell 7 untouched")
	}
	if got := f.cells[1].Load(); got != 0 {
		t.Errorf("cell 1 = %d, touched by no key", got)
	}
}
