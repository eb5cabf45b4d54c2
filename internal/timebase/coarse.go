package timebase

import (
	"sync"
	"sync/atomic"
	"time"
)

// CoarseTick is the period of the process-wide coarse clock.
const CoarseTick = time.Millisecond

// coarseClock is one cached reading of time.Since(processEpoch), advanced by
// one ticker goroutine that runs only while some Source holds a reference.
//
// Invariant: the reading only grows. Every writer raises it to a fresh
// monotonic reading with a CompareAndSwap that never lowers it: the ticker
// goroutine, acquire (under mu, before any Source reads it), and a denial
// that refreshes it (Source.Refresh).
type coarseClock struct {
	now  atomic.Int64
	tick atomic.Int64 // the reading the ticker stored last (Source.Recheck)

	mu   sync.Mutex // guards the fields below; never taken on a read
	refs int
	stop chan struct{}
	done chan struct{}
}

var coarse coarseClock

// Coarse returns a Source that reads the process-wide coarse clock, starting
// its ticker if this is the only reference, and the function that gives the
// reference back. The reading lags real time by up to one CoarseTick plus
// however long the scheduler delays the ticker goroutine; a lag of δ makes
// each decision as if taken δ earlier.
func Coarse() (Source, func()) {
	coarse.acquire()
	var once sync.Once
	return Source{mode: modeCoarse, coarse: &coarse.now, tick: &coarse.tick, epoch: processEpoch},
		func() { once.Do(coarse.release) }
}

func (c *coarseClock) acquire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs++
	if c.refs > 1 {
		return
	}
	// First reference: publish a fresh reading before any Source can read
	// it, then start the ticker.
	raise(&c.now, int64(time.Since(processEpoch)))
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.run(c.stop, c.done)
}

func (c *coarseClock) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs > 0 {
		return
	}
	close(c.stop)
	<-c.done // join: the next acquire's store cannot race with this goroutine
}

func (c *coarseClock) run(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(CoarseTick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			// First the reading, then the mark that the ticker stored it: a
			// denial that sees both equal knows the ticker ran. (If a
			// denial raised the reading past it, they differ until the
			// next tick, and denials read the precise clock meanwhile.)
			now := int64(time.Since(processEpoch))
			raise(&c.now, now)
			c.tick.Store(now)
		}
	}
}

// raise makes *p at least t.
func raise(p *atomic.Int64, t int64) {
	for {
		// Fails only if another writer raised it meanwhile; the retry sees
		// the larger reading.
		cur := p.Load()
		if cur >= t || p.CompareAndSwap(cur, t) {
			return
		}
	}
}

// CoarseRunning reports whether the ticker goroutine runs (for tests).
func CoarseRunning() bool {
	coarse.mu.Lock()
	defer coarse.mu.Unlock()
	return coarse.refs > 0
}

// ManualCoarse returns a Source in coarse mode that reads now, which the
// caller advances as the ticker would, storing each tick's reading in tick
// too (nil: no ticker, every denial reads fresh), and refreshes it from
// fresh: tests use it to drive the coarse path tick by tick. A denial at
// the ticker's reading reads fresh once in recheckEvery denials exactly
// (the last of each run of recheckEvery), not at random, so that what a
// test asserts of a stalled ticker does not depend on the draw.
func ManualCoarse(now, tick *atomic.Int64, fresh func() int64) Source {
	var n atomic.Uint32
	draw := func() uint32 { return n.Add(1) }
	return Source{mode: modeCoarse, coarse: now, tick: tick, fresh: fresh, draw: draw, epoch: processEpoch}
}
