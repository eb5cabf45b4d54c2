package shardmap

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// BenchmarkBytesPerKey shows where each byte per key goes in a Map of
// string keys to pointers to 16-byte values (a keyed limiter's cell: a state
// word and a tier pointer), keys' own bytes excluded (they are built before
// the first reading):
//
//	entry-B/key  the MapOf entry: the key's string header and the pointer
//	             (24 bytes, its own allocation)
//	value-B/key  the value the pointer points to (16 bytes)
//	table-B/key  the shards' buckets, root and chained, 64 bytes each, over
//	             the keys: 64/3.75 ≈ 17 just after a table doubles, twice
//	             that just before
//	counted-B/key the three above; measured-B/key is the heap's own figure
//
//	go test ./shardmap -run='^$' -bench=BytesPerKey -benchtime=1x
func BenchmarkBytesPerKey(b *testing.B) {
	//lint:ignore U1000 only the size of the type is read
	type value struct {
		word uint64
		tier *int
	}
	//lint:ignore U1000 only the size of the type is read
	type entry struct { // xsync's entryOf[string, *value]
		key   string
		value *value
	}
	for _, n := range []int{250_000, 500_000, 900_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("user-%07d", i)
			}
			var measured, table float64
			for range b.N {
				before := heapBytes()
				m := New[string, *value]()
				for _, k := range keys {
					if _, _, err := m.LoadOrCreate(k, func() *value { return new(value) }); err != nil {
						b.Fatal(err)
					}
				}
				after := heapBytes()
				buckets := 0
				for _, sh := range m.shards {
					buckets += sh.Stats().TotalBuckets
				}
				runtime.KeepAlive(m)
				measured = float64(after-before) / float64(n)
				table = float64(buckets*cacheLine) / float64(n)
			}
			e := float64(sizeClass(unsafe.Sizeof(entry{})))
			v := float64(sizeClass(unsafe.Sizeof(value{})))
			b.ReportMetric(e, "entry-B/key")
			b.ReportMetric(v, "value-B/key")
			b.ReportMetric(table, "table-B/key")
			b.ReportMetric(e+v+table, "counted-B/key")
			b.ReportMetric(measured, "measured-B/key")
		})
	}
}

func heapBytes() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
