// Package keyed is the key storage every keyed limiter shares: a sharded
// map from keys to cells (one limiter state per key), create-once insertion,
// exact idle eviction, a size bound with a policy for when it is full, a
// background sweeper and counters. It knows nothing of any algorithm: a
// limiter tells it, through Cells, when a cell is idle and how to retire one.
//
// The hot path of a keyed limiter does not pass through here: it calls
// Store.Map.Load itself and decides on the cell it finds, so that its own
// decision code inlines. A Store is reached only for new keys, retired
// cells, sweeps and counters.
package keyed

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/shardmap"
)

// A FullPolicy says what a keyed limiter with a key bound does with a request
// for a new key when it holds the bound and no key is idle.
type FullPolicy uint8

const (
	// RejectNew denies requests for new keys until a key becomes idle and is
	// removed. Keys already present are unaffected: no key ever loses its
	// state, so no key is ever admitted beyond its limit.
	RejectNew FullPolicy = iota
	// EvictStalest removes the keys closest to idle, a batch of 1/16 of one
	// shard at a time, to make room. An evicted key that was not idle loses
	// its state: its next request finds a fresh one, so it may be admitted
	// more than its limit allows. Choose it when forgetting a key is better
	// than refusing a new one (Stats counts such evictions in EvictedActive).
	EvictStalest
)

func (p FullPolicy) String() string {
	switch p {
	case RejectNew:
		return "reject-new"
	case EvictStalest:
		return "evict-stalest"
	}
	return "FullPolicy(?)"
}

// DefaultSweepInterval is how long the background sweeper takes for one pass
// over every key, unless the limiter is told otherwise.
const DefaultSweepInterval = time.Minute

// roomScanGap is how long a full limiter waits, at least, after a scan of
// every shard found no idle key, before a request for a new key may scan
// again: otherwise a flood of new keys against a limiter full of active ones
// would make every such request scan the whole map. The gap is also at least
// roomScanRatio times that scan's own duration, so that such a flood keeps a
// full limiter scanning (and the requests for new keys waiting on the scan)
// for at most about 1/(roomScanRatio+1) of the time, however many keys it
// holds: a scan of a million keys takes about half a second here. It ends
// sooner when a key the scan saw may have become idle (see room).
const (
	roomScanGap   = 10 * time.Millisecond
	roomScanRatio = 10
)

// minRecent is the least number of cells created after a barren scan that
// a full limiter keeps track of (see room); the bound is MaxKeys/16 above it.
const minRecent = 64

// maxRoomRounds bounds how often one request makes room and then loses the
// room to another new key, so that no request spins for ever.
const maxRoomRounds = 64

// Config is what a keyed limiter's options set.
type Config struct {
	MaxKeys    int           // 0: no bound
	Full       FullPolicy    // what a full limiter does when no key is idle
	SweepEvery time.Duration // one background pass over all keys; ≤ 0: no sweeper
	Shards     int           // 0: shardmap's default
	Hook       EvictHook     // nil: none
	HookName   string
}

// DefaultConfig is the configuration before options.
func DefaultConfig() Config { return Config{SweepEvery: DefaultSweepInterval} }

// Valid reports whether the key bound and policy make sense.
func (c *Config) Valid() bool { return c.MaxKeys >= 0 && c.Full <= EvictStalest }

// MaxShards is the most shards a limiter's map may have (shardmap's own
// bound): 65,536 empty shards already hold about 128 MiB.
const MaxShards = 1 << 16

// ShardsValid reports whether the number of shards is 0 (the default) or
// in [1, MaxShards].
func (c *Config) ShardsValid() bool { return c.Shards >= 0 && c.Shards <= MaxShards }

// maxPresize is the largest key bound the map is presized for: a bound
// of 2^22 keys presizes about 75 MB of tables; a larger bound (a cap set
// far above the keys a server expects) presizes that much, and the map
// grows beyond it only as keys come.
const maxPresize = 1 << 22

// An EvictHook is told how many keys each step removed (atomiclimit.Hook
// implements it).
type EvictHook interface {
	Evicted(policy string, keys int)
}

// Cells is how a Store evicts one kind of cell. Each method runs off the hot
// path, from sweeps and from requests that find the map full.
//
// The protocol every implementation keeps (the proof of exact eviction rests
// on it): RetireIdle first raises the limiter's floor so that a cell created
// later starts no fuller than c is, then moves c to a retired state on which
// every decision is a denial that writes nothing, by a CompareAndSwap from
// the idle state it examined. An admission racing with it either stores
// first, so the retirement fails, or meets the retired state, and the
// limiter then decides again on a fresh cell (Store.Cell).
type Cells[C any] interface {
	// RetireIdle retires c if it is idle at now (no later decision could
	// tell it from a new cell) and reports whether it did.
	RetireIdle(c C, now int64) bool
	// IdleFrom returns the time from which c is idle, and false if c is
	// retired. EvictStalest removes the cells with the earliest. c is idle
	// at now exactly when t ≤ now, and t decreases while c is live only
	// by a give-back, which the limiter reports (GaveBack): a full Store
	// relies on both to know, without looking again, that no cell it has
	// seen is idle yet.
	IdleFrom(c C) (t int64, live bool)
	// RetireStale retires c, idle or not, if its IdleFrom is still at most
	// limit; the floor is raised only if c is idle at now (an active cell
	// loses its state, as EvictStalest says). It reports whether it retired c
	// and whether c was idle.
	RetireStale(c C, limit, now int64) (retired, idle bool)
	// IsRetired reports whether c is retired.
	IsRetired(c C) bool
	// RetireFar retires c, raising no floor, if it is idle (from, its
	// IdleFrom) later than any decision at now or at the clock could have
	// made it (a time stamped ahead of both, a clock that went back): its
	// floor would hold every new key back as far. now is the time the sweep
	// was asked for. It reports whether it retired c.
	RetireFar(c C, from, now int64) bool
}

// A Store holds a keyed limiter's cells. It holds no reference to the
// limiter, so that the background sweeper does not keep an abandoned limiter
// alive.
type Store[K comparable, C comparable] struct {
	// Map holds the cells. Limiters call Map.Load on their hot path and
	// reach the Store only on a miss or a retired cell.
	Map   *shardmap.Map[K, C]
	cells Cells[C]
	src   timebase.Source
	cfg   Config

	room room[K, C] // what a full limiter knows of its idle keys

	created, evicted, evictedActive, rejected atomic.Uint64

	stop      chan struct{} // closed to stop the background sweeper
	done      chan struct{} // closed when it has stopped
	closeOnce sync.Once
}

// room is what a full Store knows of its idle keys between two scans of
// every shard, so that a flood of new keys against a limiter full of active
// ones does not scan the whole map on every request, and yet an idle key,
// wherever it is, is removed before any active one.
//
// A scan that finds no idle key at time e leaves the Store barren: it
// records the earliest IdleFrom of the cells it saw (no cell it saw is idle
// before then, as IdleFrom never decreases) and the clock time when the
// gap ends (roomScanGap, or roomScanRatio times the scan's duration if
// longer). Cells created from the start of that scan on cannot be in that
// minimum: Cell records them in recent, and a barren makeRoom looks
// at each of them once, when it is new, then folds its IdleFrom into the
// minimum (retiring it if it is idle). A makeRoom scans every shard again
// once the gap has ended, once its eviction time reaches the minimum, or
// when recent overflowed its bound (then it stopped recording).
type room[K comparable, C comparable] struct {
	mu       sync.Mutex   // serialises scans; guards the fields up to recording
	barren   atomic.Bool  // the last scan found nothing idle; what follows holds
	gapEnd   int64        // clock time at which the gap after the last scan ends
	idleFrom atomic.Int64 // no cell seen by the scan or in recent[:checked] is idle before this
	checked  int          // recent[:checked] are accounted for in idleFrom

	// lowered is the earliest time from which a cell given back since the
	// last scan began is idle (math.MaxInt64: none): a give-back can make a
	// cell idle sooner than IdleFrom said when the scan saw it. The scan
	// resets it before it looks at any cell; GaveBack lowers it after the
	// give-back's store. So a cell the scan saw before its give-back is
	// counted here, and one it saw after was seen as it is.
	lowered atomic.Int64

	recording atomic.Bool // Cell records new cells in recent
	recentMu  sync.Mutex  // guards recent and overflow
	recent    []recentCell[K, C]
	overflow  bool // recent reached its bound, and lost cells
}

// A recentCell is a cell created since the last scan began.
type recentCell[K comparable, C comparable] struct {
	key  K
	cell C
}

// New returns an empty Store (cfg must be Valid). Call Start to run the
// background sweeper.
func New[K comparable, C comparable](cfg Config, src timebase.Source, cells Cells[C]) *Store[K, C] {
	return assemble(shardmap.New[K, C](mapOptions(cfg)...), cfg, src, cells)
}

// NewHashed is New for keys that are hashes already (shardmap.NewHashed):
// a keyed limiter's seeded hashes of its users' keys.
func NewHashed[C comparable](cfg Config, src timebase.Source, cells Cells[C]) *Store[uint64, C] {
	return assemble(shardmap.NewHashed[C](mapOptions(cfg)...), cfg, src, cells)
}

// mapOptions are the map's options for cfg. A bound also presizes: the map
// never grows (a growth copies a shard while requests for its new keys
// wait), and a full map holds that table anyway.
func mapOptions(cfg Config) []shardmap.Option {
	opts := []shardmap.Option{shardmap.WithLimit(cfg.MaxKeys), shardmap.WithPresize(min(cfg.MaxKeys, maxPresize))}
	if cfg.Shards > 0 {
		opts = append(opts, shardmap.WithShards(cfg.Shards))
	}
	return opts
}

func assemble[K comparable, C comparable](m *shardmap.Map[K, C], cfg Config, src timebase.Source, cells Cells[C]) *Store[K, C] {
	s := &Store[K, C]{Map: m, cells: cells, src: src, cfg: cfg}
	s.room.lowered.Store(math.MaxInt64)
	return s
}

// GaveBack tells the Store that a give-back (a refund, a cancelled
// reservation) made a cell idle from t, which may be sooner than when a scan
// of a full Store saw it: the next request for a new key looks again once
// t has come. It takes no lock.
func (s *Store[K, C]) GaveBack(t int64) {
	r := &s.room
	for {
		cur := r.lowered.Load()
		if t >= cur || r.lowered.CompareAndSwap(cur, t) {
			return
		}
	}
}

// Start runs the background sweeper if the configuration asks for one; it
// stops on Close, or once owner (the limiter) is garbage collected.
func Start[T any, K comparable, C comparable](owner *T, s *Store[K, C]) {
	if s.cfg.SweepEvery <= 0 {
		return
	}
	step := max(s.cfg.SweepEvery/time.Duration(s.Map.Shards()), time.Millisecond)
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go s.run(step)
	// The sweeper references only the Store, never owner.
	runtime.AddCleanup(owner, func(s *Store[K, C]) { s.signalStop() }, s)
}

// Cell returns key's live cell, creating it with create if there is none, or
// false if the limiter is full and finds no room. It never returns a retired
// cell. create runs under the lock of key's map bucket, at most once per
// insertion: it must be quick, must not use the map and must not run the
// user's code (a panic there would leave the bucket locked).
func (s *Store[K, C]) Cell(key K, now int64, create func() C) (c C, ok bool) {
	for attempt := 0; ; attempt++ {
		c, loaded, err := s.Map.LoadOrCreate(key, func() C {
			s.created.Add(1)
			return create()
		})
		if err == nil {
			// Recorded after the insertion: a scan that starts recording
			// after this load of the flag visits the map after the insertion.
			if !loaded && s.room.recording.Load() {
				s.record(key, c)
			}
			if !s.cells.IsRetired(c) {
				return c, true
			}
			// Being removed: finish the removal for whoever retired it, then
			// look again (the next LoadOrCreate creates a fresh cell).
			s.Map.CompareAndDelete(key, c)
			continue
		}
		// Full. Make room, and try again; give up when nothing can be
		// removed, or after rounds lost to other new keys taking the room.
		if attempt >= maxRoomRounds || !s.makeRoom(now) {
			return c, false
		}
	}
}

// Forgot counts a cell a request retired as far ahead of the clock (see
// Cells.RetireFar): an active key removed.
func (s *Store[K, C]) Forgot() { s.evictedActive.Add(1) }

// Refused counts a request for a new key that a full limiter refused.
func (s *Store[K, C]) Refused() { s.rejected.Add(1) }

// RoomAt returns the earliest time at which a full Store can take a new
// key, as its last scan found it: when the first key it saw becomes idle
// (sooner if a give-back made one idle), and false if it has not scanned
// since it last found room. It takes no lock.
func (s *Store[K, C]) RoomAt() (int64, bool) {
	r := &s.room
	if !r.barren.Load() {
		return 0, false
	}
	return min(r.idleFrom.Load(), r.lowered.Load()), true
}

// evictionTime is the time an eviction for a request stamped now decides
// at: now, but never later than the limiter's clock. A key that will be idle
// at a future time is not idle yet: removing it would raise the floor ahead
// of real time (new keys denied until then) or forget an active key. A time
// in the past stays as it is: an earlier time can only retire less.
func (s *Store[K, C]) evictionTime(now int64) int64 { return min(now, s.src.Now()) }

// Sweep removes every key idle at now (at the limiter's clock if now is
// later), shard by shard, and returns how many cells it retired. It takes
// no global lock.
func (s *Store[K, C]) Sweep(now int64) int {
	removed := 0
	for i := range s.Map.Shards() {
		r, _ := s.sweepShard(i, now)
		removed += r
	}
	return removed
}

// sweepShard removes shard i's idle keys at now (at the clock if now is
// later) and the keys far ahead of both, and returns how many cells it
// retired (their removal from the map may be finished by a caller that
// meets them first) and the earliest IdleFrom of the live cells it kept
// (math.MaxInt64 if none).
func (s *Store[K, C]) sweepShard(i int, asked int64) (retired int, minIdle int64) {
	now := s.evictionTime(asked)
	minIdle = math.MaxInt64
	s.Map.SweepShard(i, func(_ K, c C) bool {
		if s.RetireIdle(c, now) {
			retired++
			return true
		}
		if t, live := s.cells.IdleFrom(c); live {
			if s.cells.RetireFar(c, t, asked) {
				s.evictedActive.Add(1) // not idle: its state is lost
				retired++
				return true
			}
			minIdle = min(minIdle, t)
		}
		return false
	})
	s.reportEvicted(retired)
	return retired, minIdle
}

// RetireIdle retires c if it is idle at now, and counts it, without removing
// it from the map (the sweep's first step; tests stop there to show what a
// caller meets between the two).
func (s *Store[K, C]) RetireIdle(c C, now int64) bool {
	if !s.cells.RetireIdle(c, now) {
		return false
	}
	s.evicted.Add(1)
	return true
}

// reportEvicted tells the hook, if any, of n evictions.
func (s *Store[K, C]) reportEvicted(n int) {
	if s.cfg.Hook != nil && n > 0 {
		s.cfg.Hook.Evicted(s.cfg.HookName, n)
	}
}

// makeRoom is called when a new key finds the map full. Idle keys go first,
// wherever they are: it sweeps shards, from the sweep cursor on, until one
// yields an idle key or all have been swept, unless the Store is barren and
// nothing it knows of can be idle yet (see room). If none was idle,
// RejectNew gives up, and EvictStalest removes the stalest sixteenth of the
// next non-empty shard. It reports whether it removed anything.
func (s *Store[K, C]) makeRoom(now int64) bool {
	now = s.evictionTime(now)
	if s.retireSomeIdle(now) {
		return true
	}
	if s.cfg.Full == RejectNew {
		return false
	}
	for range s.Map.Shards() {
		if s.evictStalest(s.Map.NextShard(), now) > 0 {
			return true
		}
	}
	return false
}

// retireSomeIdle retires at least one cell idle at now (no later than the
// clock), if there is one, and reports whether it did.
func (s *Store[K, C]) retireSomeIdle(now int64) bool {
	r := &s.room
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.barren.Load() && s.src.Now() < r.gapEnd && now < min(r.idleFrom.Load(), r.lowered.Load()) {
		r.recentMu.Lock()
		fresh, overflow := r.recent[r.checked:], r.overflow
		r.recentMu.Unlock()
		if !overflow {
			retired := 0
			for _, rc := range fresh {
				t, live := s.cells.IdleFrom(rc.cell)
				if !live {
					continue
				}
				if t <= now && s.RetireIdle(rc.cell, now) {
					s.Map.CompareAndDelete(rc.key, rc.cell)
					retired++
					continue
				}
				// Kept (if it was idle but admitted meanwhile, t ≤ now
				// makes the next call scan).
				r.idleFrom.Store(min(r.idleFrom.Load(), t))
			}
			r.checked += len(fresh)
			s.reportEvicted(retired)
			if retired > 0 || now < min(r.idleFrom.Load(), r.lowered.Load()) {
				return retired > 0
			}
		}
	}
	// Scan every shard. Cells created from here on are recorded, so that
	// those the scan misses are looked at later; give-backs from here on are
	// noted in lowered.
	r.lowered.Store(math.MaxInt64)
	r.recentMu.Lock()
	clear(r.recent)
	r.recent, r.overflow = r.recent[:0], false
	r.recording.Store(true)
	r.recentMu.Unlock()
	minIdle := int64(math.MaxInt64)
	scanStart := s.src.Now()
	for range s.Map.Shards() {
		retired, m := s.sweepShard(s.Map.NextShard(), now)
		if retired > 0 {
			r.barren.Store(false)
			r.recording.Store(false)
			r.recentMu.Lock()
			clear(r.recent)
			r.recent = r.recent[:0]
			r.recentMu.Unlock()
			return true
		}
		minIdle = min(minIdle, m)
	}
	// Nothing is idle: until some time has passed, or a key seen has
	// become idle, nothing will be.
	scanEnd := s.src.Now()
	gap := max(int64(roomScanGap), roomScanRatio*(scanEnd-scanStart))
	r.gapEnd, r.checked = scanEnd+gap, 0
	r.idleFrom.Store(minIdle)
	r.barren.Store(true)
	return false
}

// record notes a cell created while a full Store is barren or scanning.
func (s *Store[K, C]) record(key K, c C) {
	r := &s.room
	r.recentMu.Lock()
	defer r.recentMu.Unlock()
	if !r.recording.Load() {
		return
	}
	if len(r.recent) >= max(minRecent, s.cfg.MaxKeys/16) {
		// Too many to look at one by one: the next makeRoom scans.
		r.overflow = true
		r.recording.Store(false)
		return
	}
	r.recent = append(r.recent, recentCell[K, C]{key, c})
}

// evictStalest retires the sixteenth of shard i's cells that become idle
// first (at least one), idle or not, at now (no later than the clock), and
// returns how many it removed. If any of them is idle, it retires only idle
// ones.
func (s *Store[K, C]) evictStalest(i int, now int64) int {
	var from []int64
	s.Map.RangeShard(i, func(_ K, c C) bool {
		if t, live := s.cells.IdleFrom(c); live {
			from = append(from, t)
		}
		return true
	})
	if len(from) == 0 {
		return 0
	}
	slices.Sort(from)
	want := max(len(from)/16, 1)
	limit := from[want-1]
	if from[0] <= now {
		// Idle cells (created or gone idle since the search for idle
		// keys): retire those only.
		limit = min(limit, now)
	}
	retired := 0
	s.Map.SweepShard(i, func(_ K, c C) bool {
		if want == 0 {
			return false
		}
		ok, idle := s.cells.RetireStale(c, limit, now)
		if !ok {
			return false
		}
		want--
		if idle {
			s.evicted.Add(1)
		} else {
			s.evictedActive.Add(1)
		}
		retired++
		return true
	})
	s.reportEvicted(retired)
	return retired
}

func (s *Store[K, C]) run(step time.Duration) {
	defer close(s.done)
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sweepShard(s.Map.NextShard(), s.src.Now())
		}
	}
}

// signalStop tells the background sweeper, if any, to stop.
func (s *Store[K, C]) signalStop() {
	if s.stop != nil {
		s.closeOnce.Do(func() { close(s.stop) })
	}
}

// Close stops the background sweeper, if any, and waits until it has.
// Close is idempotent.
func (s *Store[K, C]) Close() {
	s.signalStop()
	if s.done != nil {
		<-s.done
	}
}

// Done returns the channel closed when the background sweeper has stopped
// (nil if none was started).
func (s *Store[K, C]) Done() <-chan struct{} { return s.done }

// Stats is the root package's Stats (documented there), which converts it.
type Stats struct {
	Keys                                      int
	Created, Evicted, EvictedActive, Rejected uint64
}

// Stats returns the Store's counters.
func (s *Store[K, C]) Stats() Stats {
	return Stats{
		Keys:          s.Map.Len(),
		Created:       s.created.Load(),
		Evicted:       s.evicted.Load(),
		EvictedActive: s.evictedActive.Load(),
		Rejected:      s.rejected.Load(),
	}
}
