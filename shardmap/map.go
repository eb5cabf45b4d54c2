package shardmap

import (
	"errors"
	"hash/maphash"
	"math"
	"math/bits"
	"sync/atomic"

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
type Map[K comparable, V comparable] struct {
	shards []*xsync.MapOf[K, V]
	shift  uint         // 64 − log2(len(shards)): the hash's top bits pick the shard
	seed   maphash.Seed // random per map: keys cannot be chosen to collide
	limit  int64        // size bound; 0 means none
	// size counts entries: incremented under the MapOf bucket lock by the
	// constructor that inserts, decremented after a removal. With a bound it
	// never exceeds limit.
	size   atomic.Int64
	cursor atomic.Uint64 // the next shard SweepNext visits
}

// New returns an empty map configured by opts.
func New[K comparable, V comparable](opts ...Option) *Map[K, V] {
	cfg := config{shards: DefaultShards}
	for _, o := range opts {
		o(&cfg)
	}
	n := 1 << bits.Len(uint(max(cfg.shards, 1)-1)) // next power of two
	m := &Map[K, V]{
		shards: make([]*xsync.MapOf[K, V], n),
		shift:  uint(64 - bits.TrailingZeros(uint(n))),
		seed:   maphash.MakeSeed(),
		limit:  int64(max(cfg.limit, 0)),
	}
	var mapOpts []func(*xsync.MapConfig)
	if cfg.presize > 0 {
		mapOpts = append(mapOpts, xsync.WithPresize(shardShare(cfg.presize, n)))
	}
	for i := range m.shards {
		// Each shard hashes keys with MapOf's own seeded hash, independent of
		// the one that chose the shard.
		m.shards[i] = xsync.NewMapOf[K, V](mapOpts...)
	}
	return m
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

func (m *Map[K, V]) hash(k K) uint64 { return maphash.Comparable(m.seed, k) }

// shard returns the shard that holds key.
func (m *Map[K, V]) shard(key K) *xsync.MapOf[K, V] {
	// With one shard the shift is 64, and Go defines h>>64 as 0.
	return m.shards[m.hash(key)>>m.shift]
}

// Load returns the value stored for key. It takes no lock and allocates
// nothing.
func (m *Map[K, V]) Load(key K) (value V, ok bool) {
	return m.shard(key).Load(key)
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
	sh := m.shard(key)
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
	sh := m.shard(key)
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
	if deleted {
		m.size.Add(-1)
	}
	return deleted
}

// Update calls f with key's value under the lock of the key's MapOf bucket,
// if the map holds the key, and reports whether it did. It inserts nothing.
// A LoadOrCreate of the same key holds the same lock while it creates, so f
// sees every value created before it and none is created while it runs.
// f must be quick and must not use the map.
func (m *Map[K, V]) Update(key K, f func(V)) (found bool) {
	m.shard(key).Compute(key, func(cur V, loaded bool) (V, bool) {
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
	value, deleted = m.shard(key).LoadAndDelete(key)
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
func (m *Map[K, V]) Shards() int { return len(m.shards) }

// Range calls f for each entry until f returns false, shard by shard. As with
// MapOf.Range, it sees no consistent snapshot: an entry inserted or removed
// during the call may or may not be visited. f may use the map.
func (m *Map[K, V]) Range(f func(key K, value V) bool) {
	for i := range m.shards {
		if !m.RangeShard(i, f) {
			return
		}
	}
}

// RangeShard is Range over shard i only. It reports whether f returned true
// for every entry it visited.
func (m *Map[K, V]) RangeShard(i int, f func(key K, value V) bool) (completed bool) {
	completed = true
	m.shards[i].Range(func(k K, v V) bool {
		completed = f(k, v)
		return completed
	})
	return completed
}
