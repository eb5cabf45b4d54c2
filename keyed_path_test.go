package atomiclimit

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// BenchmarkKeyedPath takes the keyed hot path apart, for string keys and
// netip.Prefix keys (an IPv6 /64, as a client-IP limiter keys it), on 1,024
// keys that stay in cache:
//
//	step=clock       the limiter's clock read
//	step=hash        one seeded hash of the key (hash/maphash)
//	step=xsync-load  the lookup in one unsharded MapOf (its own hash included)
//	step=map-load    the limiter's lookup (shard choice and MapOf.Load)
//	step=cas         the admission on a cell already found (load, decide, CAS)
//	step=allow       Keyed.Allow: all of the above
//	step=limiter     a single-key Limiter's Allow: clock and CAS, no lookup
//
// step=allow − step=limiter is the serial cost of a keyed lookup. Each step
// is written out, not called through a func value, so it inlines as it does
// in a user's code.
//
//	go test . -run='^$' -bench=KeyedPath -count=6
func BenchmarkKeyedPath(b *testing.B) {
	strs := make([]string, 1024)
	prefixes := make([]netip.Prefix, 1024)
	for i := range strs {
		strs[i] = fmt.Sprintf("user-%07d", i*977)
		a := netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, byte(i >> 8), byte(i), 0, 0, 15: 0x01})
		prefixes[i] = netip.PrefixFrom(a, 64).Masked()
	}
	benchKeyedPath(b, "string", strs)
	benchKeyedPath(b, "prefix", prefixes)
}

func benchKeyedPath[K comparable](b *testing.B, name string, keys []K) {
	spec := GCRA(gcra.Every(time.Nanosecond), 1<<30)
	k, err := NewKeyedRule[K](spec, WithSweepInterval(0))
	if err != nil {
		b.Fatal(err)
	}
	lim, err := NewRule(spec)
	if err != nil {
		b.Fatal(err)
	}
	plain := xsync.NewMapOf[K, *cell]()
	for _, key := range keys {
		k.Allow(key)
		plain.Store(key, k.cells.alloc())
	}
	seed := maphash.MakeSeed()
	c, _ := k.m.Load(k.hash(keys[0]))
	p := &k.cells.rule(c).g
	var acc uint64
	run := func(step string, f func(b *testing.B)) {
		b.Run(fmt.Sprintf("key=%s/step=%s", name, step), func(b *testing.B) {
			b.ReportAllocs()
			f(b)
		})
	}
	run("clock", func(b *testing.B) {
		for range b.N {
			acc += uint64(k.src.Now())
		}
	})
	run("hash", func(b *testing.B) {
		for i := range b.N {
			acc += maphash.Comparable(seed, keys[i&1023])
		}
	})
	run("xsync-load", func(b *testing.B) {
		for i := range b.N {
			if _, ok := plain.Load(keys[i&1023]); ok {
				acc++
			}
		}
	})
	run("map-load", func(b *testing.B) {
		for i := range b.N {
			if _, ok := k.m.Load(k.hash(keys[i&1023])); ok {
				acc++
			}
		}
	})
	run("cas", func(b *testing.B) {
		for i := range b.N {
			if c.bucket().AllowN(p, int64(i), 1) {
				acc++
			}
		}
	})
	run("allow", func(b *testing.B) {
		for i := range b.N {
			if k.Allow(keys[i&1023]) {
				acc++
			}
		}
	})
	run("limiter", func(b *testing.B) {
		for range b.N {
			if lim.Allow() {
				acc++
			}
		}
	})
	pathSink.Add(acc)
}

// BenchmarkKeyedHot offers one key from every P (b.RunParallel; run with
// -cpu=2 and more), every call admitted, beside a single-key Limiter under
// the same load: impl=keyed − impl=limiter is what the lookup costs under
// contention, to compare with the serial cost (mode=serial).
//
//	go test . -run='^$' -bench=KeyedHot -cpu=2 -count=6
func BenchmarkKeyedHot(b *testing.B) {
	spec := GCRA(gcra.Every(time.Nanosecond), 1<<30)
	for _, mode := range []string{"serial", "parallel"} {
		b.Run(fmt.Sprintf("mode=%s/impl=limiter", mode), func(b *testing.B) {
			lim, err := NewRule(spec)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			hotLoop(b, mode, func() bool { return lim.Allow() })
		})
		b.Run(fmt.Sprintf("mode=%s/impl=keyed", mode), func(b *testing.B) {
			k, err := NewKeyedRule[string](spec, WithSweepInterval(0))
			if err != nil {
				b.Fatal(err)
			}
			for i := range 1024 { // a populated map, as in service
				k.Allow(fmt.Sprintf("user-%07d", i*977))
			}
			const key = "user-0500000"
			b.ReportAllocs()
			b.ResetTimer()
			hotLoop(b, mode, func() bool { return k.Allow(key) })
		})
	}
}

func hotLoop(b *testing.B, mode string, allow func() bool) {
	if mode == "serial" {
		n := uint64(0)
		for range b.N {
			if allow() {
				n++
			}
		}
		pathSink.Add(n)
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		n := uint64(0)
		for pb.Next() {
			if allow() {
				n++
			}
		}
		pathSink.Add(n)
	})
}

var pathSink atomic.Uint64

// BenchmarkKeyedSteps takes a keyed admission apart on 1,024 keys that stay
// in cache: the map lookup alone, then with the parameters, the clock read
// and the CompareAndSwap added one at a time, beside the whole Allow, the
// clock alone and the lookup in one unsharded MapOf. The differences say
// where the nanoseconds above the floor go. (Every step is called through a
// func value, which adds the same 1–2 ns to each.)
//
//	go test ./atomicbucket -run='^$' -bench=KeyedSteps -count=5
func BenchmarkKeyedSteps(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%07d", i*977)
	}
	k, err := NewKeyedRule[string](GCRA(gcra.Every(time.Nanosecond), 1<<30), WithSweepInterval(0))
	if err != nil {
		b.Fatal(err)
	}
	plain := xsync.NewMapOf[string, *cell]() // one MapOf, no shards: the floor's lookup
	for _, key := range keys {
		k.Allow(key)
		plain.Store(key, new(cell))
	}
	var sink int
	steps := []struct {
		name string
		step func(key string) bool
	}{
		{"allow", func(key string) bool { return k.Allow(key) }},
		{"lookup", func(key string) bool { _, ok := k.m.Load(k.hash(key)); return ok }},
		{"lookup+params", func(key string) bool { c, _ := k.m.Load(k.hash(key)); return k.cells.rule(c).g.Burst() > 0 }},
		{"lookup+params+clock", func(key string) bool {
			c, _ := k.m.Load(k.hash(key))
			return k.cells.rule(c).g.Burst() > 0 && k.src.Now() > 0
		}},
		{"lookup+params+clock+cas", func(key string) bool {
			c, _ := k.m.Load(k.hash(key))
			ok := c.bucket().AllowN(&k.cells.rule(c).g, k.src.Now(), 1)
			return ok
		}},
		{"clock", func(string) bool { return k.src.Now() > 0 }},
		{"xsync-load", func(key string) bool { _, ok := plain.Load(key); return ok }},
	}
	for _, s := range steps {
		b.Run("step="+s.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if s.step(keys[i&1023]) {
					sink++
				}
			}
		})
	}
	_ = sink
}
