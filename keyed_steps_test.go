package atomiclimit

import (
	"fmt"
	"testing"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/atomiclimit/atomiclimit/gcra"
)

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
