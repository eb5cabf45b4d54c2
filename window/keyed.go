package window

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/keyed"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/shardmap"
)

// A Keyed limiter holds one fixed-window or one sliding-window-counter cell
// per key (user, API key, client IP), created on a key's first request and
// removed once the key is idle. Every key has the semantics of a Fixed (or
// Counter) limiter with the same parameters, and all keys share the same
// window boundaries: those of the limiter's creation, or of UTC with
// WithAlign(AlignUTC(offset)). It is safe for concurrent use.
//
// The hot path for a key already present is one lock-free map lookup, one
// clock read, one load and, for an admission, one CompareAndSwap on the
// key's 8-byte cell; it allocates nothing. A new key costs one insertion.
//
// # Idle keys and exact eviction
//
// A cell is idle once its counts can no longer affect any decision: for a
// fixed window, once the window it counts has ended (at once if it counts
// nothing); for the counter, once the window after it has ended too (its
// count has left the estimate). From then on it decides every request as a
// new cell would, so removing it changes nothing. The sweeper
// (WithSweepInterval), Sweep and a full limiter making room remove idle
// cells as atomicbucket.Keyed does: first they raise a floor, the window new
// cells start in (so a request with a stale time is counted in a window
// after every count the removed cell held, never beside them); then they
// retire the cell by a CompareAndSwap to Retired, on which every request is
// denied without a write; then they delete the map entry. A request that
// meets a retired cell decides again on a fresh one. Nothing admitted is
// lost or counted twice, and every key keeps the bounds of its algorithm.
type Keyed[K comparable] struct {
	m      *shardmap.Map[K, *wordCell] // st.Map: the hot path's lookup
	st     *keyed.Store[K, *wordCell]
	cells  *wordCells
	src    timebase.Source
	fixed  bool // a fixed window; else a sliding-window counter
	f      FixedParams
	c      CounterParams
	create func() *wordCell
}

// wordCell is one key's state: a FixedCell or a CounterCell (the same
// underlying type, so the pointer converts to either).
type wordCell struct{ state atomic.Uint64 }

// NewKeyedFixed returns a keyed limiter of n events per fixed window of
// length period for each key. It takes the options of NewFixed (the clock
// and WithAlign) and WithMaxKeys, WithSweepInterval and WithShards. Unless
// WithSweepInterval(0) is given, it starts a background sweeper; Close stops
// it, and so does the garbage collector once the limiter is unreachable.
func NewKeyedFixed[K comparable](n int, period time.Duration, opts ...Option) (*Keyed[K], error) {
	cfg, err := configure(opts, true, true)
	if err != nil {
		return nil, err
	}
	k := &Keyed[K]{fixed: true}
	k.src = newSource(&cfg, k)
	if k.f, err = NewFixedParams(n, period, cfg.align.Start(k.src.Time(0), k.src.Now(), period)); err != nil {
		return nil, err
	}
	return k.start(&cfg), nil
}

// NewKeyedCounter returns a keyed limiter of about n events per rolling
// window of length period for each key (see CounterParams). It takes the
// clock options and the keyed options of NewKeyedFixed.
func NewKeyedCounter[K comparable](n int, period time.Duration, opts ...Option) (*Keyed[K], error) {
	cfg, err := configure(opts, false, true)
	if err != nil {
		return nil, err
	}
	k := &Keyed[K]{}
	k.src = newSource(&cfg, k)
	if k.c, err = NewCounterParams(n, period, k.src.Now()); err != nil {
		return nil, err
	}
	return k.start(&cfg), nil
}

func (k *Keyed[K]) start(cfg *config) *Keyed[K] {
	k.cells = &wordCells{fixed: k.fixed, f: k.f, c: k.c}
	k.st = keyed.New[K, *wordCell](cfg.keyed, k.src, k.cells)
	k.m = k.st.Map
	// A new cell starts in the floor's window. Read under the lock of the
	// key's map bucket, after the removal of an earlier cell for the key
	// (which took the same lock), so the remover's raise is visible.
	cells := k.cells
	k.create = func() *wordCell {
		c := &wordCell{}
		c.state.Store(cells.floor.Load())
		return c
	}
	keyed.Start(k, k.st)
	return k
}

// Allow reports whether key may have one event now, and counts it if so.
// Allow is shorthand for AllowN(key, clock.Now(), 1).
func (k *Keyed[K]) Allow(key K) bool { return k.allow(key, k.src.Now(), 1) }

// AllowN reports whether key may have n events at now, and counts them if
// so. n = 0 is admitted and counts nothing (creating no key); n < 0 and
// n > N are denied.
func (k *Keyed[K]) AllowN(key K, now time.Time, n int) bool { return k.allow(key, k.src.At(now), n) }

func (k *Keyed[K]) allow(key K, now int64, n int) bool {
	if c, ok := k.m.Load(key); ok {
		// A retired cell denies everything: only a denial needs the check.
		if ok := k.allowOn(c, now, n); ok || c.state.Load() != Retired {
			return ok
		}
	}
	if n == 0 {
		return true // a peek needs no cell: create no key for it
	}
	for {
		c := k.cell(key, now)
		if c == nil {
			k.st.Refused()
			return false
		}
		if k.allowOn(c, now, n) {
			return true
		}
		if c.state.Load() != Retired {
			return false
		}
	}
}

func (k *Keyed[K]) allowOn(c *wordCell, now int64, n int) bool {
	if k.fixed {
		return (*FixedCell)(c).AllowN(&k.f, now, n)
	}
	return (*CounterCell)(c).AllowN(&k.c, now, n)
}

// Decide is Allow for n events with the whole decision. Decide is shorthand
// for DecideAt(key, clock.Now(), n). A new key refused by a full limiter
// gets Allowed false, Remaining 0 and, as RetryAfter, the longest a key
// takes to become idle (one window, two for the counter).
func (k *Keyed[K]) Decide(key K, n int) gcra.Decision { return k.decide(key, k.src.Now(), n) }

// DecideAt is Decide at the given time.
func (k *Keyed[K]) DecideAt(key K, now time.Time, n int) gcra.Decision {
	return k.decide(key, k.src.At(now), n)
}

func (k *Keyed[K]) decide(key K, now int64, n int) gcra.Decision {
	if n == 0 {
		return k.peek(key, now, 0) // admitted, counts nothing, creates no key
	}
	for {
		c := k.cell(key, now)
		if c == nil {
			k.st.Refused()
			return gcra.Decision{RetryAfter: k.idleSpan()}
		}
		var d gcra.Decision
		if k.fixed {
			d = (*FixedCell)(c).DecideN(&k.f, now, n)
		} else {
			d = (*CounterCell)(c).DecideN(&k.c, now, n)
		}
		if d.Allowed || c.state.Load() != Retired {
			return d
		}
	}
}

// idleSpan is the longest a key takes to become idle after its last
// admission.
func (k *Keyed[K]) idleSpan() time.Duration {
	if k.fixed {
		return k.f.Period()
	}
	return 2 * k.c.Period()
}

// cell returns key's live cell, creating it if needed, or nil if the
// limiter is full and refuses the key.
func (k *Keyed[K]) cell(key K, now int64) *wordCell {
	if c, ok := k.m.Load(key); ok && c.state.Load() != Retired {
		return c
	}
	c, ok := k.st.Cell(key, now, k.create)
	if !ok {
		return nil
	}
	return c
}

// Peek returns the decision Decide(key, n) would make now, counting nothing
// and creating no key. Peek is shorthand for PeekAt(key, clock.Now(), n).
func (k *Keyed[K]) Peek(key K, n int) gcra.Decision { return k.peek(key, k.src.Now(), n) }

// PeekAt is Peek at the given time.
func (k *Keyed[K]) PeekAt(key K, now time.Time, n int) gcra.Decision {
	return k.peek(key, k.src.At(now), n)
}

func (k *Keyed[K]) peek(key K, now int64, n int) gcra.Decision {
	state := k.cells.floor.Load() // what a new cell starts with
	if c, ok := k.m.Load(key); ok {
		if s := c.state.Load(); s != Retired {
			state = s
		}
	}
	var d gcra.Decision
	if k.fixed {
		_, d = k.f.Decide(state, now, n)
	} else {
		_, d = k.c.Decide(state, now, n)
	}
	return d
}

// Sweep removes every key that is idle now and returns how many it retired.
// Sweep is shorthand for SweepAt(clock.Now()).
func (k *Keyed[K]) Sweep() int { return k.st.Sweep(k.src.Now()) }

// SweepAt removes every key idle at now, one shard at a time, and returns
// how many it retired. It takes no global lock.
func (k *Keyed[K]) SweepAt(now time.Time) int { return k.st.Sweep(k.src.At(now)) }

// Close stops the background sweeper and waits until it has stopped; the
// limiter keeps working. Close is idempotent.
func (k *Keyed[K]) Close() { k.st.Close() }

// Len returns the number of keys held.
func (k *Keyed[K]) Len() int { return k.m.Len() }

// Stats returns the limiter's counters.
func (k *Keyed[K]) Stats() KeyedStats { return k.st.Stats() }

// String describes the configuration, e.g. "keyed fixed 100/1m0s".
func (k *Keyed[K]) String() string {
	if k.fixed {
		return fmt.Sprintf("keyed fixed %d/%v", k.f.limit, k.f.Period())
	}
	return fmt.Sprintf("keyed counter %d/%v", k.c.limit, k.c.Period())
}

// wordCells tells the key store how to evict one-word window cells, and
// holds the floor. It holds no reference to the Keyed limiter.
type wordCells struct {
	fixed bool
	f     FixedParams
	c     CounterParams
	// floor is a state with zero counts: new cells start in its window. It
	// is at least the idle window (idleIndex) of every cell retired as
	// idle, and only grows.
	floor atomic.Uint64
}

// idle is the algorithm's Idle.
func (w *wordCells) idle(state uint64, now int64) (from int64, floor uint64, ok bool) {
	if w.fixed {
		return w.f.Idle(state, now)
	}
	return w.c.Idle(state, now)
}

// RetireIdle retires c if it is idle at now: first the floor, then the
// retiring CompareAndSwap from the state examined (see keyed.Cells).
func (w *wordCells) RetireIdle(c *wordCell, now int64) bool {
	s := c.state.Load()
	if s == Retired {
		return false
	}
	_, floor, idle := w.idle(s, now)
	if !idle {
		return false
	}
	keyed.Raise(&w.floor, floor)
	return c.state.CompareAndSwap(s, Retired) // fails if admitted meanwhile
}

// IdleFrom returns when c becomes idle.
func (w *wordCells) IdleFrom(c *wordCell) (int64, bool) {
	s := c.state.Load()
	if s == Retired {
		return math.MaxInt64, false
	}
	from, _, _ := w.idle(s, 0)
	return from, true
}

// RetireStale retires c if it becomes idle no later than limit; the floor
// is raised only if c is idle at now.
func (w *wordCells) RetireStale(c *wordCell, limit, now int64) (retired, idle bool) {
	s := c.state.Load()
	if s == Retired {
		return false, false
	}
	from, floor, idle := w.idle(s, now)
	if from > limit {
		return false, false
	}
	if idle {
		keyed.Raise(&w.floor, floor)
	}
	return c.state.CompareAndSwap(s, Retired), idle
}

// IsRetired reports whether c is retired.
func (w *wordCells) IsRetired(c *wordCell) bool { return c.state.Load() == Retired }
