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

	stop      chan struct{} // closed to stop the background sweeper
	done      chan struct{} // closed when it has stopped
	closeOnce sync.Once
}

func newEvictor[K comparable](m *shardmap.Map[K, *cell], src timebase.Source, policy FullPolicy) *evictor[K] {
	return &evictor[K]{m: m, src: src, policy: policy}
}

// raiseFloor makes floor at least now. First the floor, then the retiring
// CompareAndSwaps: a cell created after a retired cell's removal reads a
// floor ≥ that cell's TAT.
func (e *evictor[K]) raiseFloor(now int64) {
	for {
		f := e.floor.Load()
		if f >= now || e.floor.CompareAndSwap(f, now) {
			return
		}
	}
}

// sweepShard removes shard i's idle keys at now and returns how many.
func (e *evictor[K]) sweepShard(i int, now int64) int {
	e.raiseFloor(now)
	_, removed := e.m.SweepShard(i, func(_ K, c *cell) bool { return e.retireIdle(c, now) })
	return removed
}

// retireIdle retires c if it is idle at now and counts it.
func (e *evictor[K]) retireIdle(c *cell, now int64) bool {
	if c.Retire(now) {
		e.evicted.Add(1)
		return true
	}
	// Already retired by someone else (its removal is theirs to count), or
	// active.
	return false
}

// sweep removes every idle key at now, shard by shard.
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
	if now >= e.barrenUntil.Load() {
		for range e.m.Shards() {
			if e.sweepShard(e.m.NextShard(), now) > 0 {
				return true
			}
		}
		// Nothing is idle: until some time has passed, nothing will be.
		e.barrenUntil.Store(now + int64(roomScanGap))
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
	// Some of the cells it retires may be idle: the floor must cover them
	// (see raiseFloor). Active ones lose their debt, as EvictStalest says.
	e.raiseFloor(now)
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
	_, removed := e.m.SweepShard(i, func(_ K, c *cell) bool {
		if want == 0 {
			return false
		}
		t := c.TAT()
		if t > limit || !c.retireFrom(t) {
			return false
		}
		want--
		if t <= now {
			e.evicted.Add(1)
		} else {
			e.evictedActive.Add(1)
		}
		return true
	})
	return removed
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
