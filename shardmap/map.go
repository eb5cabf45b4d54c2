package shardmap

import (
	"errors"
	"hash/maphash"
	"math"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/puzpuzpuz/xsync/v3"
)

// ErrFull is returned by LoadOrCreate for a new key when the map holds its
// size bound.
var ErrFull = errors.New("shardmap: map is full")

// A Map is a sharded concurrent map. Its zero value is not usable: create one
// with New. It is safe for concurrent use and must not be copied.
//
// Values are compared with == when an entry is removed conditionally, so they
// are usually pointers to state that lives as long as the entry (the map
// never copies or moves what they point to).
//
// One hash per operation where it costs no memory: the shard is picked by the
// top bits of a seeded hash, and a MapOf hashes the key again with its own
// hasher (MapOf.Load always calls it). Where an 8-byte copy of the hash fits
// in the size class of the MapOf entry that holds the key (netip.Prefix keys:
// 40 bytes either way in the 48-byte class), each shard is keyed by the key
// and its hash, and its hasher returns the stored hash: one hash per lookup,
// and a growth copies entries without reading or hashing the keys again.
// Where it would not fit (string keys: 24 bytes would become 32), the shards
// hash the key themselves: one hash more per operation, no byte more per key.
type Map[K comparable, V comparable] struct {
	shards []*xsync.MapOf[K, V]       // the shards, unless prehashed
	pre    []*xsync.MapOf[hkey[K], V] // the shards when prehashed; else nil
	shift  uint                       // 64 − log2(shard count): the hash's top bits pick the shard
	seed   maphash.Seed               // random per map: keys cannot be chosen to collide
	hashed bool                       // the keys are hashes already (NewHashed): used as they are
	limit  int64                      // size bound; 0 means none

	// Every insertion and removal writes size, and every sweep step cursor:
	// the padding keeps them off the cache lines of the fields above, which
	// every Load reads, so that new keys and sweeps on other cores do not
	// make each lookup fetch its line again (false sharing).
	//lint:ignore U1000 prevents false sharing
	_ [cacheLine]byte
	// size counts entries: incremented under the MapOf bucket lock by the
	// constructor that inserts, decremented after a removal. With a bound it
	// never exceeds limit.
	size   atomic.Int64
	cursor atomic.Uint64 // the next shard SweepNext visits
}

// cacheLine is the size the padding assumes: 64 bytes on amd64 and most
// arm64 cores (xsync and the runtime use the same figure).
const cacheLine = 64

// hkey is a key with its hash: the key of a prehashed shard. Its == compares
// the hash first, then the key.
type hkey[K comparable] struct {
	key  K
	hash uint64
}

// hkeyHash is a prehashed shard's hasher: the stored hash, seeded per map.
// MapOf picks a bucket from bits 7 and up and matches bits 0–6; the shard
// was picked by the top bits, which no table below 2^47 buckets reaches.
func hkeyHash[K comparable](k hkey[K], _ uint64) uint64 { return k.hash }

// New returns an empty map configured by opts.
func New[K comparable, V comparable](opts ...Option) *Map[K, V] {
	return newMap[K, V](opts, false)
}

// NewHashed returns an empty map whose keys are hashes already: uniformly
// distributed words, such as a seeded hash of the caller's own key
// (hash/maphash.Comparable). It hashes them no further (the top bits pick
// the shard, the others the MapOf bucket), and an entry holds no key of the
// caller's: two keys of the caller's with the same hash are one key here.
func NewHashed[V comparable](opts ...Option) *Map[uint64, V] {
	return newMap[uint64, V](opts, true)
}

func newMap[K comparable, V comparable](opts []Option, hashed bool) *Map[K, V] {
	cfg := config{shards: defaultShards}
	for _, o := range opts {
		o(&cfg)
	}
	n := 1 << bits.Len(uint(min(max(cfg.shards, 1), maxShards)-1)) // next power of two
	m := &Map[K, V]{
		shift:  uint(64 - bits.TrailingZeros(uint(n))),
		seed:   maphash.MakeSeed(),
		hashed: hashed,
		limit:  int64(max(cfg.limit, 0)),
	}
	var mapOpts []func(*xsync.MapConfig)
	if cfg.presize > 0 {
		mapOpts = append(mapOpts, xsync.WithPresize(shardShare(cfg.presize, n)))
	}
	if hashed {
		// K is uint64 (NewHashed): each shard takes the key as its hash.
		m.shards = make([]*xsync.MapOf[K, V], n)
		for i := range m.shards {
			m.shards[i] = xsync.NewMapOfWithHasher[K, V](keyAsHash[K], mapOpts...)
		}
		return m
	}
	if prehashFree[K, V]() {
		m.pre = make([]*xsync.MapOf[hkey[K], V], n)
		for i := range m.pre {
			m.pre[i] = xsync.NewMapOfWithHasher[hkey[K], V](hkeyHash[K], mapOpts...)
		}
		return m
	}
	m.shards = make([]*xsync.MapOf[K, V], n)
	for i := range m.shards {
		// Each shard hashes keys with MapOf's own seeded hash, independent of
		// the one that chose the shard.
		m.shards[i] = xsync.NewMapOf[K, V](mapOpts...)
	}
	return m
}

// prehashFree reports whether a MapOf entry of an hkey[K] and a V takes no
// more heap than one of a K and a V: both in the same size class.
func prehashFree[K comparable, V comparable]() bool {
	//lint:ignore U1000 only the size of the type is read
	type entry struct {
		k K
		v V
	}
	//lint:ignore U1000 only the size of the type is read
	type hentry struct {
		k hkey[K]
		v V
	}
	return sizeClass(unsafe.Sizeof(hentry{})) == sizeClass(unsafe.Sizeof(entry{}))
}

// smallSizeClasses are the Go allocator's size classes up to 1 KiB, as
// internal/runtime/gc/sizeclasses.go lists them (Go 1.26). Should they change, only the
// choice of prehashing changes, never what the map does.
var smallSizeClasses = [...]uintptr{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024}

// sizeClass returns the size of the allocation that holds n bytes, or n
// itself above 1 KiB (where prehashing is then never free).
func sizeClass(n uintptr) uintptr {
	for _, c := range smallSizeClasses {
		if n <= c {
			return c
		}
	}
	return n
}

// shardShare is what one of n shards is sized for when the map is presized
// for total entries: its mean share plus four standard deviations of the
// binomial spread of a random hash over the shards, so that no shard of a map
// holding total entries grows (a growth copies the shard while its writers
// wait), except with odds below one in 30,000 per shard.
func shardShare(total, n int) int {
	mean := float64(total) / float64(n)
	return int(mean+4*math.Sqrt(mean*(1-1/float64(n)))) + 1
}

func (m *Map[K, V]) hash(k K) uint64 {
	if m.hashed {
		return keyAsHash(k, 0)
	}
	return maphash.Comparable(m.seed, k)
}

// keyAsHash is the hash of a key that is one already: a NewHashed map's
// uint64 key, as it is.
func keyAsHash[K comparable](k K, _ uint64) uint64 { return *(*uint64)(unsafe.Pointer(&k)) }

// Load returns the value stored for key. It takes no lock and allocates
// nothing.
func (m *Map[K, V]) Load(key K) (value V, ok bool) {
	// With one shard the shift is 64, and Go defines h>>64 as 0.
	h := m.hash(key)
	if m.pre != nil {
		return m.pre[h>>m.shift].Load(hkey[K]{key, h})
	}
	return m.shards[h>>m.shift].Load(key)
}

// LoadOrCreate returns the value stored for key or, if there is none, stores
// and returns create(). create runs at most once per insertion, under the
// lock of the key's MapOf bucket: when goroutines race on a new key, one runs
// it and the others get its result. create must be quick and must not use the
// map. loaded reports whether the value was already there.
//
// With a size bound, a new key that would exceed it is not inserted: create
// does not run and the error is ErrFull.
func (m *Map[K, V]) LoadOrCreate(key K, create func() V) (value V, loaded bool, err error) {
	h := m.hash(key)
	if m.pre != nil {
		return loadOrCreate(m, m.pre[h>>m.shift], hkey[K]{key, h}, create)
	}
	return loadOrCreate(m, m.shards[h>>m.shift], key, create)
}

func loadOrCreate[KK, K comparable, V comparable](m *Map[K, V], sh *xsync.MapOf[KK, V], key KK, create func() V) (value V, loaded bool, err error) {
	if v, ok := sh.Load(key); ok {
		return v, true, nil
	}
	full := false
	v, loaded := sh.LoadOrTryCompute(key, func() (V, bool) {
		if !m.reserve() {
			full = true
			var zero V
			return zero, true // cancel: nothing is stored
		}
		return create(), false
	})
	if full {
		return v, false, ErrFull
	}
	return v, loaded, nil
}

// reserve counts one more entry, unless that would pass the bound.
func (m *Map[K, V]) reserve() bool {
	if m.limit == 0 {
		m.size.Add(1)
		return true
	}
	for {
		n := m.size.Load()
		if n >= m.limit {
			return false
		}
		if m.size.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// CompareAndDelete removes key's entry if it holds old, and reports whether it
// did. It never removes a value stored after the caller read old.
func (m *Map[K, V]) CompareAndDelete(key K, old V) (deleted bool) {
	h := m.hash(key)
	if m.pre != nil {
		deleted = compareAndDelete(m.pre[h>>m.shift], hkey[K]{key, h}, old)
	} else {
		deleted = compareAndDelete(m.shards[h>>m.shift], key, old)
	}
	if deleted {
		m.size.Add(-1)
	}
	return deleted
}

func compareAndDelete[KK comparable, V comparable](sh *xsync.MapOf[KK, V], key KK, old V) (deleted bool) {
	if v, ok := sh.Load(key); !ok || v != old {
		return false // the common miss, without taking the bucket lock
	}
	sh.Compute(key, func(cur V, loaded bool) (V, bool) {
		if !loaded {
			return cur, true // nothing there; delete=true on a miss inserts nothing
		}
		if cur != old {
			return cur, false // replaced meanwhile: keep it (MapOf stores it again)
		}
		deleted = true
		return cur, true
	})
	return deleted
}

// Update calls f with key's value under the lock of the key's MapOf bucket,
// if the map holds the key, and reports whether it did. It inserts nothing.
// A LoadOrCreate of the same key holds the same lock while it creates, so f
// sees every value created before it and none is created while it runs.
// f must be quick and must not use the map.
func (m *Map[K, V]) Update(key K, f func(V)) (found bool) {
	h := m.hash(key)
	if m.pre != nil {
		return update(m.pre[h>>m.shift], hkey[K]{key, h}, f)
	}
	return update(m.shards[h>>m.shift], key, f)
}

func update[KK comparable, V comparable](sh *xsync.MapOf[KK, V], key KK, f func(V)) (found bool) {
	sh.Compute(key, func(cur V, loaded bool) (V, bool) {
		if !loaded {
			return cur, true // delete=true on a miss inserts nothing
		}
		found = true
		f(cur)
		return cur, false // keep it (MapOf stores the same value again)
	})
	return found
}

// Delete removes key's entry, and returns the value it held.
func (m *Map[K, V]) Delete(key K) (value V, deleted bool) {
	h := m.hash(key)
	if m.pre != nil {
		value, deleted = m.pre[h>>m.shift].LoadAndDelete(hkey[K]{key, h})
	} else {
		value, deleted = m.shards[h>>m.shift].LoadAndDelete(key)
	}
	if deleted {
		m.size.Add(-1)
	}
	return value, deleted
}

// Len returns the number of entries. It is exact when no insertion or removal
// is in progress.
func (m *Map[K, V]) Len() int { return int(m.size.Load()) }

// Limit returns the size bound, 0 if there is none.
func (m *Map[K, V]) Limit() int { return int(m.limit) }

// Shards returns the number of shards.
func (m *Map[K, V]) Shards() int { return len(m.shards) + len(m.pre) }

// Range calls f for each entry until f returns false, shard by shard. As with
// MapOf.Range, it sees no consistent snapshot: an entry inserted or removed
// during the call may or may not be visited. f may use the map.
func (m *Map[K, V]) Range(f func(key K, value V) bool) {
	for i := range m.Shards() {
		if !m.RangeShard(i, f) {
			return
		}
	}
}

// RangeShard is Range over shard i only. It reports whether f returned true
// for every entry it visited.
func (m *Map[K, V]) RangeShard(i int, f func(key K, value V) bool) (completed bool) {
	completed = true
	if m.pre != nil {
		m.pre[i].Range(func(k hkey[K], v V) bool {
			completed = f(k.key, v)
			return completed
		})
		return completed
	}
	m.shards[i].Range(func(k K, v V) bool {
		completed = f(k, v)
		return completed
	})
	return completed
}
