package atomiclimit_test

import (
	"fmt"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/atomiclimit/atomiclimit"
)

// BenchmarkKeyedGC measures what holding keys costs the garbage collector
// of the process that holds them: the time of a forced full collection
// with gcKeys string keys held (the median of five), beside the same keys
// held alone in a slice, in the same run; and the heap objects and bytes
// each key adds. store=keys is the keys alone; store=keyed a Keyed limiter
// that has seen every key (the keys held too, as a server's are not: a
// per-request string is garbage once the request is done, unless the store
// keeps it); store=xsync an xsync MapOf[string, *atomic.Uint64], the
// plainest lock-free store of one word per key.
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
