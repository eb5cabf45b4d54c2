package atomicbucket

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/shardmap"
)

// roomScanGap is how long a full Keyed limiter waits, after a scan of every
// shard found no idle key, before a request for a new key may scan again:
// otherwise a flood of new keys against a limiter full of active ones would
// make every such request scan the whole map.
const roomScanGap = 10 * time.Millisecond

// evictor removes a Keyed limiter's idle keys and makes room when it is full.
// It holds no reference to the Keyed limiter, so that the background sweeper
// does not keep an abandoned limiter alive.
type evictor[K comparable] struct {
	m      *shardmap.Map[K, *cell]
	src    timebase.Source
	policy FullPolicy

	// floor is the largest time at which a cell was retired as idle; every
	// retired idle cell had TAT ≤ floor, and new cells start at TAT = floor.
	// It only grows.
	floor       atomic.Int64
	barrenUntil atomic.Int64 // no scan for idle keys before this time

	created, evicted, evictedActive, rejected atomic.Uint64

	hook     Hook // nil: none; told of each step's evictions
	hookName string

	stop      chan struct{} // closed to stop the background sweeper
	done      chan struct{} // closed when it has stopped
	closeOnce sync.Once
}

func newEvictor[K comparable](m *shardmap.Map[K, *cell], src timebase.Source, policy FullPolicy) *evictor[K] {
	return &evictor[K]{m: m, src: src, policy: policy}
}

// raiseFloor makes floor at least tat. First the floor, then the retiring
// CompareAndSwap: a cell created after a retired cell's removal reads a
// floor ≥ that cell's TAT.
func (e *evictor[K]) raiseFloor(tat int64) {
	for {
		f := e.floor.Load()
		if f >= tat || e.floor.CompareAndSwap(f, tat) {
			return
		}
	}
}

// sweepShard removes shard i's idle keys at now and returns how many cells
// it retired (their removal from the map may be finished by a caller that
// meets them first).
func (e *evictor[K]) sweepShard(i int, now int64) int {
	retired := 0
	e.m.SweepShard(i, func(_ K, c *cell) bool {
		if e.retireIdle(c, now) {
			retired++
			return true
		}
		return false
	})
	e.reportEvicted(retired)
	return retired
}

// reportEvicted tells the hook, if any, of n evictions.
func (e *evictor[K]) reportEvicted(n int) {
	if e.hook != nil && n > 0 {
		e.hook.Evicted(e.hookName, n)
	}
}

// retireIdle retires c if it is idle at now (TAT ≤ now) and counts it. It
// raises the floor to the cell's own TAT, not to now: the floor is what new
// cells start from, and a floor ahead of the requests' times would put every
// new key in debt.
func (e *evictor[K]) retireIdle(c *cell, now int64) bool {
	tat := c.TAT()
	if tat > now || tat == gcra.Retired {
		return false // active, or already retired by someone else
	}
	e.raiseFloor(tat)
	if !c.retireFrom(tat) {
		return false // admitted meanwhile: active again
	}
	e.evicted.Add(1)
	return true
}

// sweep removes every idle key at now, shard by shard, and returns how many
// cells it retired.
func (e *evictor[K]) sweep(now int64) int {
	removed := 0
	for i := range e.m.Shards() {
		removed += e.sweepShard(i, now)
	}
	return removed
}

// makeRoom is called when a new key finds the map full. Idle keys go first:
// it sweeps shards, from the sweep cursor on, until one yields an idle key
// or all have been swept. If none was idle, RejectNew gives up (and skips
// that scan for roomScanGap), and EvictStalest removes the stalest sixteenth
// of the next non-empty shard. It reports whether it removed anything.
func (e *evictor[K]) makeRoom(now int64) bool {
	// The gap is measured on the limiter's own clock: a request's time may
	// be anything.
	if e.src.Now() >= e.barrenUntil.Load() {
		for range e.m.Shards() {
			if e.sweepShard(e.m.NextShard(), now) > 0 {
				return true
			}
		}
		// Nothing is idle: until some time has passed, nothing will be.
		until := e.src.Now() + int64(roomScanGap)
		for {
			b := e.barrenUntil.Load()
			if b >= until || e.barrenUntil.CompareAndSwap(b, until) {
				break
			}
		}
	}
	if e.policy == RejectNew {
		return false
	}
	for range e.m.Shards() {
		if e.evictStalest(e.m.NextShard(), now) > 0 {
			return true
		}
	}
	return false
}

// evictStalest retires the sixteenth of shard i's cells with the smallest
// TAT (at least one), idle or not, and returns how many it removed.
func (e *evictor[K]) evictStalest(i int, now int64) int {
	var tats []int64
	e.m.RangeShard(i, func(_ K, c *cell) bool {
		if t := c.TAT(); t != gcra.Retired {
			tats = append(tats, t)
		}
		return true
	})
	if len(tats) == 0 {
		return 0
	}
	slices.Sort(tats)
	want := max(len(tats)/16, 1)
	limit := tats[want-1]
	retired := 0
	e.m.SweepShard(i, func(_ K, c *cell) bool {
		if want == 0 {
			return false
		}
		t := c.TAT()
		if t > limit || t == gcra.Retired {
			return false
		}
		if t <= now {
			// Idle: the floor must cover it (see retireIdle). An active
			// cell loses its debt instead, as EvictStalest says.
			e.raiseFloor(t)
		}
		if !c.retireFrom(t) {
			return false
		}
		want--
		if t <= now {
			e.evicted.Add(1)
		} else {
			e.evictedActive.Add(1)
		}
		retired++
		return true
	})
	e.reportEvicted(retired)
	return retired
}

// start runs the background sweeper: every every/shards it sweeps one shard,
// so one pass over all keys takes every. It stops on close.
func (e *evictor[K]) start(every time.Duration) {
	step := max(every/time.Duration(e.m.Shards()), time.Millisecond)
	e.stop, e.done = make(chan struct{}), make(chan struct{})
	go e.run(step)
}

func (e *evictor[K]) run(step time.Duration) {
	defer close(e.done)
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			e.sweepShard(e.m.NextShard(), e.src.Now())
		}
	}
}

// signalStop tells the background sweeper, if any, to stop.
func (e *evictor[K]) signalStop() {
	if e.stop != nil {
		e.closeOnce.Do(func() { close(e.stop) })
	}
}

// close stops the background sweeper, if any, and waits until it has.
func (e *evictor[K]) close() {
	e.signalStop()
	if e.done != nil {
		<-e.done
	}
}

// stopWhenUnreachable stops the sweeper once owner is garbage collected: the
// sweeper references only the evictor, never the limiter, so an abandoned
// limiter is collected and its goroutine ends.
func stopWhenUnreachable[T any, K comparable](owner *T, e *evictor[K]) {
	runtime.AddCleanup(owner, func(e *evictor[K]) { e.signalStop() }, e)
}
