package shardmap

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"unsafe"
)

// BenchmarkColocated tests one way to cut a dependent cache miss per lookup
// at a million keys: a limiter's cell (a state word and a tier pointer)
// allocated together with a copy of the key's bytes, the map's entry keyed
// by that copy, so that the key compare and the CAS touch one cache line.
// impl=apart keys the entry by the caller's first string, as the keyed
// limiter does; impl=together by the copy inside the cell. Lookups use other
// strings of equal bytes, as a server's requests do (the same string would
// compare by pointer and skip the bytes). Each op is one Load and one CAS on
// a uniformly random key.
//
//	go test ./shardmap -run='^$' -bench=Colocated -cpu=1,2 -count=6
func BenchmarkColocated(b *testing.B) {
	const n = 1_000_000
	//lint:ignore U1000 the tier pointer is there for the cell's size
	type cell struct {
		word atomic.Uint64
		tier *int
	}
	type cellWithKey struct {
		cell
		key [16]byte
	}
	first := make([]string, n)
	lookup := make([]string, n)
	for i := range first {
		first[i] = fmt.Sprintf("user-%07d", i)
		lookup[i] = fmt.Sprintf("user-%07d", i)
	}
	apart := New[string, *cell]()
	together := New[string, *cell]()
	for i, k := range first {
		apart.LoadOrCreate(k, func() *cell { return new(cell) })
		c := new(cellWithKey)
		copy(c.key[:], k)
		stored := unsafe.String(&c.key[0], len(k))
		together.LoadOrCreate(stored, func() *cell { return &c.cell })
		first[i] = ""
	}
	first = nil
	for _, c := range []struct {
		name string
		m    *Map[string, *cell]
	}{{"apart", apart}, {"together", together}} {
		b.Run("impl="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			var seed atomic.Uint64
			b.RunParallel(func(pb *testing.PB) {
				r := rand.New(rand.NewPCG(seed.Add(1), 7))
				for pb.Next() {
					v, ok := c.m.Load(lookup[r.IntN(n)])
					if !ok {
						panic("missing key")
					}
					w := v.word.Load()
					v.word.CompareAndSwap(w, w+1)
				}
			})
		})
	}
}
