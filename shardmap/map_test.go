package shardmap

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

func TestBasics(t *testing.T) {
	m := New[string, *int]()
	if _, ok := m.Load("a"); ok {
		t.Fatal("Load on an empty map found a value")
	}
	one, two := new(int), new(int)
	v, loaded, err := m.LoadOrCreate("a", func() *int { return one })
	if v != one || loaded || err != nil {
		t.Fatalf("LoadOrCreate(new) = %p, %v, %v; want %p, false, nil", v, loaded, err, one)
	}
	v, loaded, err = m.LoadOrCreate("a", func() *int { t.Fatal("create ran for an existing key"); return two })
	if v != one || !loaded || err != nil {
		t.Fatalf("LoadOrCreate(existing) = %p, %v, %v; want %p, true, nil", v, loaded, err, one)
	}
	if got, ok := m.Load("a"); !ok || got != one {
		t.Fatalf("Load = %p, %v", got, ok)
	}
	if m.Len() != 1 {
		t.Fatalf("Len = %d, want 1", m.Len())
	}
	if m.CompareAndDelete("a", two) {
		t.Fatal("CompareAndDelete removed an entry holding another value")
	}
	if m.CompareAndDelete("b", one) {
		t.Fatal("CompareAndDelete removed a missing key")
	}
	if !m.CompareAndDelete("a", one) || m.Len() != 0 {
		t.Fatalf("CompareAndDelete(a, its value) failed; Len = %d", m.Len())
	}
	if _, ok := m.Load("a"); ok {
		t.Fatal("entry still there after CompareAndDelete")
	}
	m.LoadOrCreate("c", func() *int { return two })
	if v, ok := m.Delete("c"); !ok || v != two || m.Len() != 0 {
		t.Fatalf("Delete = %p, %v; Len = %d", v, ok, m.Len())
	}
	if _, ok := m.Delete("c"); ok {
		t.Fatal("Delete of a missing key reported a deletion")
	}
}

func TestShardCount(t *testing.T) {
	for _, tc := range []struct{ ask, want int }{{0, 1}, {-3, 1}, {1, 1}, {2, 2}, {3, 4}, {16, 16}, {17, 32}, {1<<16 + 1, 1 << 16}, {math.MaxInt, 1 << 16}} {
		if got := New[int, *int](WithShards(tc.ask)).Shards(); got != tc.want {
			t.Errorf("WithShards(%d): %d shards, want %d", tc.ask, got, tc.want)
		}
	}
	if got := New[int, *int]().Shards(); got != defaultShards {
		t.Errorf("default: %d shards, want %d", got, defaultShards)
	}
}

// TestSpread checks that keys spread over the shards: with 64,000 keys on 16
// shards each shard should hold 4,000 ± a few standard deviations (≈ 61).
func TestSpread(t *testing.T) {
	m := New[string, *int](WithShards(16))
	counts := make([]int, m.Shards())
	for i := range 64000 {
		counts[m.hash(fmt.Sprintf("key-%d", i))>>m.shift]++
	}
	for i, c := range counts {
		if c < 3600 || c > 4400 {
			t.Errorf("shard %d holds %d keys, want 4000 ± 400", i, c)
		}
	}
}

func TestRangeAndSweep(t *testing.T) {
	m := New[int, *int](WithShards(4))
	vals := make([]*int, 1000)
	for i := range vals {
		vals[i] = new(int)
		*vals[i] = i
		m.LoadOrCreate(i, func() *int { return vals[i] })
	}
	seen := 0
	m.Range(func(k int, v *int) bool {
		if *v != k {
			t.Fatalf("Range: key %d holds %d", k, *v)
		}
		seen++
		return true
	})
	if seen != 1000 {
		t.Fatalf("Range visited %d entries, want 1000", seen)
	}
	stopped := 0
	m.Range(func(int, *int) bool { stopped++; return stopped < 10 })
	if stopped != 10 {
		t.Fatalf("Range went on after false: %d calls", stopped)
	}
	// One incremental step per shard removes every even key exactly once.
	even := func(k int, _ *int) bool { return k%2 == 0 }
	visited, removed, shards := 0, 0, map[int]bool{}
	for range m.Shards() {
		s := m.NextShard()
		v, r := m.SweepShard(s, even)
		shards[s] = true
		visited += v
		removed += r
	}
	if len(shards) != m.Shards() || visited != 1000 || removed != 500 || m.Len() != 500 {
		t.Fatalf("SweepShard(NextShard()) ×%d: shards %v, visited %d, removed %d, Len %d; want all shards, 1000, 500, 500",
			m.Shards(), shards, visited, removed, m.Len())
	}
	if r := sweepAll(m, even); r != 0 {
		t.Fatalf("second sweep removed %d", r)
	}
	if r := sweepAll(m, func(int, *int) bool { return true }); r != 500 || m.Len() != 0 {
		t.Fatalf("sweep of all removed %d, Len %d", r, m.Len())
	}
}

// sweepAll sweeps every shard once and returns how many entries it removed.
func sweepAll[K comparable, V comparable](m *Map[K, V], remove func(K, V) bool) (removed int) {
	for i := range m.Shards() {
		_, r := m.SweepShard(i, remove)
		removed += r
	}
	return removed
}

// TestSweepKeepsReplacedValue: the predicate saw one value, the key was
// replaced before the removal; the new value must stay.
func TestSweepKeepsReplacedValue(t *testing.T) {
	m := New[string, *int](WithShards(1))
	old, fresh := new(int), new(int)
	m.LoadOrCreate("k", func() *int { return old })
	removed := sweepAll(m, func(k string, v *int) bool {
		// Replace the entry between the predicate and the removal.
		m.CompareAndDelete(k, v)
		m.LoadOrCreate(k, func() *int { return fresh })
		return true
	})
	if removed != 0 {
		t.Fatalf("Sweep removed %d entries, want 0", removed)
	}
	if v, ok := m.Load("k"); !ok || v != fresh {
		t.Fatalf("Load = %p, %v; want the replacement %p", v, ok, fresh)
	}
	if m.Len() != 1 {
		t.Fatalf("Len = %d, want 1", m.Len())
	}
}

// TestCreateOnce: many goroutines miss on the same keys at once; each key's
// constructor runs exactly once and everybody gets its value.
func TestCreateOnce(t *testing.T) {
	const goroutines, keys, rounds = 16, 64, 50
	for round := range rounds {
		m := New[int, *int](WithShards(4))
		var created [keys]atomic.Int32
		got := make([][keys]*int, goroutines)
		var start, wg sync.WaitGroup
		start.Add(1)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				for k := range keys {
					v, _, err := m.LoadOrCreate(k, func() *int { created[k].Add(1); return new(int) })
					if err != nil {
						t.Error(err)
						return
					}
					got[g][k] = v
				}
			}()
		}
		start.Done()
		wg.Wait()
		for k := range keys {
			if n := created[k].Load(); n != 1 {
				t.Fatalf("round %d: key %d created %d times", round, k, n)
			}
			for g := 1; g < goroutines; g++ {
				if got[g][k] != got[0][k] {
					t.Fatalf("round %d: key %d: goroutines got different values", round, k)
				}
			}
		}
		if m.Len() != keys {
			t.Fatalf("round %d: Len = %d, want %d", round, m.Len(), keys)
		}
	}
}

// TestLimitExact: goroutines race to insert distinct keys into a bounded map;
// exactly the bound gets in, every other insertion fails with ErrFull, and a
// removal makes room for exactly one more.
func TestLimitExact(t *testing.T) {
	const limit, goroutines, perG = 100, 16, 50
	m := New[int, *int](WithLimit(limit), WithShards(8))
	var inserted, full atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perG {
				_, loaded, err := m.LoadOrCreate(g*perG+i, func() *int { return new(int) })
				switch {
				case errors.Is(err, ErrFull):
					full.Add(1)
				case err != nil || loaded:
					t.Errorf("LoadOrCreate: loaded %v, err %v", loaded, err)
				default:
					inserted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if inserted.Load() != limit || full.Load() != goroutines*perG-limit || m.Len() != limit || m.Limit() != limit {
		t.Fatalf("inserted %d, full %d, Len %d; want %d, %d, %d", inserted.Load(), full.Load(), m.Len(), limit, goroutines*perG-limit, limit)
	}
	// Existing keys still load while full.
	count := 0
	m.Range(func(k int, _ *int) bool {
		if _, loaded, err := m.LoadOrCreate(k, func() *int { return nil }); !loaded || err != nil {
			t.Fatalf("existing key %d: loaded %v, err %v", k, loaded, err)
		}
		count++
		return true
	})
	if count != limit {
		t.Fatalf("Range saw %d entries", count)
	}
	var victim int
	m.Range(func(k int, _ *int) bool { victim = k; return false })
	if _, ok := m.Delete(victim); !ok {
		t.Fatal("Delete failed")
	}
	if _, _, err := m.LoadOrCreate(-1, func() *int { return new(int) }); err != nil {
		t.Fatalf("after a removal: %v", err)
	}
	if _, _, err := m.LoadOrCreate(-2, func() *int { return new(int) }); !errors.Is(err, ErrFull) {
		t.Fatalf("second insertion after one removal: err %v, want ErrFull", err)
	}
}

func TestLoadAllocatesNothing(t *testing.T) {
	m := New[string, *int]()
	keys := []string{"alpha", "beta", "gamma"}
	for _, k := range keys {
		m.LoadOrCreate(k, func() *int { return new(int) })
	}
	allocs := testing.AllocsPerRun(1000, func() {
		for _, k := range keys {
			if _, ok := m.Load(k); !ok {
				t.Fatal("missing key")
			}
			m.LoadOrCreate(k, nil) // existing: never calls create
		}
		m.Load("missing")
	})
	if allocs != 0 {
		t.Fatalf("Load/LoadOrCreate on existing keys: %v allocs per run, want 0", allocs)
	}
}

func TestUpdate(t *testing.T) {
	m := New[string, *int]()
	if m.Update("absent", func(*int) { t.Fatal("f ran for an absent key") }) || m.Len() != 0 {
		t.Fatal("Update inserted or reported an absent key")
	}
	v := new(int)
	m.LoadOrCreate("k", func() *int { return v })
	if !m.Update("k", func(p *int) { *p = 7 }) || *v != 7 {
		t.Fatal("Update did not run f on the present value")
	}
	if got, _ := m.Load("k"); got != v || m.Len() != 1 {
		t.Fatal("Update changed the entry")
	}
}

// TestPrehashChoice: a key keeps its hash beside it only where that costs no
// heap (the MapOf entry stays in its size class).
func TestPrehashChoice(t *testing.T) {
	if New[string, *int]().pre != nil {
		t.Error("string keys are prehashed: their entries would grow from 24 to 32 bytes")
	}
	if New[uint64, *int]().pre != nil {
		t.Error("uint64 keys are prehashed: their entries would grow from 16 to 24 bytes")
	}
	// On 64-bit platforms; on 32-bit ones the entry grows from 28 to 36 bytes.
	if unsafe.Sizeof(uintptr(0)) == 8 && New[netip.Prefix, *int]().pre == nil {
		t.Error("netip.Prefix keys are not prehashed, though their entries stay 48 bytes")
	}
}

// TestPrehashedMap runs the map's operations on prehashed shards.
func TestPrehashedMap(t *testing.T) {
	m := New[netip.Prefix, *int](WithShards(4))
	if m.pre == nil {
		t.Skip("netip.Prefix keys are not prehashed on this platform")
	}
	key := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
	}
	vals := make([]*int, 5000)
	for i := range vals {
		vals[i] = new(int)
		v, loaded, err := m.LoadOrCreate(key(i), func() *int { return vals[i] })
		if v != vals[i] || loaded || err != nil {
			t.Fatalf("LoadOrCreate(%d) = %p, %v, %v", i, v, loaded, err)
		}
	}
	for i := range vals {
		if v, ok := m.Load(key(i)); !ok || v != vals[i] {
			t.Fatalf("Load(%d) = %p, %v", i, v, ok)
		}
	}
	if !m.Update(key(7), func(p *int) { *p = 7 }) || *vals[7] != 7 {
		t.Fatal("Update")
	}
	if m.CompareAndDelete(key(1), vals[2]) || !m.CompareAndDelete(key(1), vals[1]) {
		t.Fatal("CompareAndDelete")
	}
	if v, ok := m.Delete(key(2)); !ok || v != vals[2] {
		t.Fatal("Delete")
	}
	seen := 0
	m.Range(func(k netip.Prefix, v *int) bool {
		if v != vals[int(k.Addr().As4()[1])<<16|int(k.Addr().As4()[2])<<8|int(k.Addr().As4()[3])] {
			t.Fatalf("Range: %v holds the wrong value", k)
		}
		seen++
		return true
	})
	if seen != 4998 || m.Len() != 4998 {
		t.Fatalf("Range saw %d, Len %d; want 4998", seen, m.Len())
	}
	if r := sweepAll(m, func(netip.Prefix, *int) bool { return true }); r != 4998 || m.Len() != 0 {
		t.Fatalf("Sweep removed %d, Len %d", r, m.Len())
	}
	allocs := testing.AllocsPerRun(1000, func() { m.Load(key(3)) })
	if allocs != 0 {
		t.Fatalf("Load: %v allocs", allocs)
	}
}

// TestCountersApart: the counters that insertions, removals and sweeps write
// are at least a cache line away from the fields every Load reads, so they
// never share a line whatever the map's alignment.
func TestCountersApart(t *testing.T) {
	var m Map[string, *int]
	lastRead := unsafe.Offsetof(m.limit) + unsafe.Sizeof(m.limit)
	if d := unsafe.Offsetof(m.size) - lastRead; d < cacheLine {
		t.Errorf("size is %d bytes after the read fields, want ≥ %d", d, cacheLine)
	}
	if unsafe.Offsetof(m.cursor) < unsafe.Offsetof(m.size) {
		t.Error("cursor moved above size, among the read fields")
	}
}

// BenchmarkEmpty reports the heap an empty map holds per shard (each shard
// is a MapOf with its smallest table):
//
//	go test ./shardmap -run='^$' -bench=Empty -benchtime=1x
func BenchmarkEmpty(b *testing.B) {
	for _, n := range []int{16, 1024} {
		b.Run(fmt.Sprintf("shards=%d", n), func(b *testing.B) {
			const maps = 16
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.HeapAlloc
			held := make([]*Map[string, *int], maps)
			for i := range held {
				held[i] = New[string, *int](WithShards(n))
			}
			runtime.GC()
			runtime.ReadMemStats(&ms)
			runtime.KeepAlive(held)
			b.ReportMetric(float64(ms.HeapAlloc-before)/maps/float64(n), "B/shard")
		})
	}
}

// A map of keys that are hashes already holds, finds, sweeps and bounds
// them as a map of any key does.
func TestNewHashed(t *testing.T) {
	m := NewHashed[*int](WithShards(4), WithLimit(3))
	vals := []int{1, 2, 3}
	for i, k := range []uint64{0x0123456789abcdef, 0xfedcba9876543210, 0x8000000000000001} {
		v, loaded, err := m.LoadOrCreate(k, func() *int { return &vals[i] })
		if err != nil || loaded || *v != vals[i] {
			t.Fatalf("key %x: %v %v %v", k, *v, loaded, err)
		}
	}
	if _, _, err := m.LoadOrCreate(42, func() *int { return new(int) }); err != ErrFull {
		t.Fatalf("a fourth key in a map of 3: %v", err)
	}
	if v, ok := m.Load(0xfedcba9876543210); !ok || *v != 2 {
		t.Fatalf("Load: %v %v", v, ok)
	}
	if _, ok := m.Load(0xfedcba9876543211); ok {
		t.Fatal("a key never stored was found")
	}
	n := 0
	for i := range m.Shards() {
		m.SweepShard(i, func(k uint64, v *int) bool { n++; return *v == 3 })
	}
	if n != 3 || m.Len() != 2 {
		t.Fatalf("swept %d entries, %d left", n, m.Len())
	}
}
