package bands

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/keyed"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/shardmap"
	"github.com/atomiclimit/atomiclimit/window"
)

// A Keyed limiter holds one set of bands per key: every key is limited by
// all the bands at once, with the semantics of a Limiter of the same bands.
// It is safe for concurrent use. The hot path for a key already present is
// one lock-free map lookup, one clock read and Limiter's check-then-take
// protocol on the key's cell (a word per band, and the ring of a log band);
// it allocates nothing. A new key costs one insertion and 2 allocations (3
// with a log band).
//
// # Idle keys and exact eviction
//
// A key is idle once every band is: a GCRA band's bucket is full, a window
// band's counts have left every decision, a log band's latest admission has
// left the window (see window.Keyed and window.KeyedLog). Removal keeps each
// band's bound, under any concurrency:
//
//  1. load the last band's state first, then the others, last to first,
//     and check that each is idle;
//  2. raise each band's floor to what a replacement cell must start from
//     (the TAT, the idle window, the latest expiry);
//  3. retire the cell by retiring its last band only: a CompareAndSwap from
//     the state loaded in 1 to the band's retired state (for a log, the
//     slot its next admission would write).
//
// Why retiring the last band is enough: an admission writes the bands in
// order, the last one last, and each write raises that band's state (no
// refund ever touches the last band). If the retiring CompareAndSwap
// succeeds, every admission that completed wrote the last band before step
// 1 read it, so its writes to the other bands, earlier still, were seen by
// the later loads of step 1 and are covered by the floors. Every other
// admission meets the retired band, is denied, refunds the bands it took,
// and decides again on a fresh cell. Unlimited GCRA bands are rejected by
// NewKeyed: they are never written, so they could not carry the proof (and
// limit nothing).
type Keyed[K comparable] struct {
	m      *shardmap.Map[K, *cell] // st.Map: the hot path's lookup
	st     *keyed.Store[K, *cell]
	cells  *bandCells
	bands  set
	src    timebase.Source
	create func() *cell
}

// NewKeyed returns a keyed limiter that admits a request for a key only if
// every band admits it for that key. It takes New's options and WithMaxKeys,
// WithSweepInterval and WithShards. Unless WithSweepInterval(0) is given, it
// starts a background sweeper; Close stops it, and so does the garbage
// collector once the limiter is unreachable.
func NewKeyed[K comparable](specs []Band, opts ...Option) (*Keyed[K], error) {
	cfg, err := configure(opts, true)
	if err != nil {
		return nil, err
	}
	k := &Keyed[K]{}
	k.src = timebase.Choose(k, cfg.source, cfg.coarse, cfg.clock)
	if k.bands, err = newSet(specs, &k.src); err != nil {
		return nil, err
	}
	for i, b := range k.bands {
		if b.kind == kindGCRA && b.g.IsUnlimited() {
			return nil, fmt.Errorf("%w %d (%v): an Unlimited band limits nothing; leave it out", ErrInvalidBand, i, specs[i])
		}
	}
	k.cells = &bandCells{bands: k.bands}
	k.st = keyed.New[K, *cell](cfg.keyed, k.src, k.cells)
	k.m = k.st.Map
	k.create = k.cells.newCell
	keyed.Start(k, k.st)
	return k, nil
}

// Allow reports whether key may have one event now under every band, and
// counts it in all of them if so. Allow is shorthand for AllowN(key,
// clock.Now(), 1).
func (k *Keyed[K]) Allow(key K) bool { return k.allow(key, k.src.Now(), 1) }

// AllowN reports whether key may have n events at now under every band, and
// counts them in all of them if so.
func (k *Keyed[K]) AllowN(key K, now time.Time, n int) bool { return k.allow(key, k.src.At(now), n) }

func (k *Keyed[K]) allow(key K, now int64, n int) bool {
	if c, ok := k.m.Load(key); ok {
		// A retired cell denies everything: only a denial needs the check.
		if ok := k.bands.admit(c, now, n); ok || !k.cells.IsRetired(c) {
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
		if k.bands.admit(c, now, n) {
			return true
		}
		if !k.cells.IsRetired(c) {
			return false
		}
	}
}

// Decide is Allow for n events with the whole decision. Decide is shorthand
// for DecideAt(key, clock.Now(), n). A new key refused by a full limiter
// gets Allowed false, Band −1 and, as RetryAfter, the longest any band takes
// to become idle.
func (k *Keyed[K]) Decide(key K, n int) Decision { return k.decide(key, k.src.Now(), n) }

// DecideAt is Decide at the given time.
func (k *Keyed[K]) DecideAt(key K, now time.Time, n int) Decision {
	return k.decide(key, k.src.At(now), n)
}

func (k *Keyed[K]) decide(key K, now int64, n int) Decision {
	if n == 0 {
		return k.peek(key, now, 0) // admitted, counts nothing, creates no key
	}
	for {
		c := k.cell(key, now)
		if c == nil {
			k.st.Refused()
			return Decision{Decision: gcra.Decision{RetryAfter: k.idleSpan()}, Band: -1}
		}
		d := k.bands.decide(c, now, n, false)
		if d.Allowed || !k.cells.IsRetired(c) {
			return d
		}
	}
}

// idleSpan is the longest any band takes to become idle after an admission.
func (k *Keyed[K]) idleSpan() time.Duration {
	var d time.Duration
	for _, b := range k.bands {
		switch b.kind {
		case kindGCRA:
			d = max(d, b.g.Span())
		case kindFixed:
			d = max(d, b.f.Period())
		case kindCounter:
			d = max(d, 2*b.c.Period())
		case kindLog:
			d = max(d, b.l.Period())
		}
	}
	return d
}

// cell returns key's live cell, creating it if needed, or nil if the
// limiter is full and refuses the key.
func (k *Keyed[K]) cell(key K, now int64) *cell {
	if c, ok := k.m.Load(key); ok && !k.cells.IsRetired(c) {
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
// For a key the limiter does not hold, it decides on a new cell that it
// then drops (an allocation).
func (k *Keyed[K]) Peek(key K, n int) Decision { return k.peek(key, k.src.Now(), n) }

// PeekAt is Peek at the given time.
func (k *Keyed[K]) PeekAt(key K, now time.Time, n int) Decision { return k.peek(key, k.src.At(now), n) }

func (k *Keyed[K]) peek(key K, now int64, n int) Decision {
	c, ok := k.m.Load(key)
	if !ok || k.cells.IsRetired(c) {
		c = k.create()
	}
	return k.bands.decide(c, now, n, true)
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

// Bands returns the number of bands.
func (k *Keyed[K]) Bands() int { return len(k.bands) }

// Stats returns the limiter's counters.
func (k *Keyed[K]) Stats() KeyedStats { return k.st.Stats() }

// KeyedStats counts what a keyed limiter has done (atomicbucket.KeyedStats).
type KeyedStats = keyed.Stats

// bandCells tells the key store how to evict band cells, and holds each
// band's floor. It holds no reference to the Keyed limiter.
type bandCells struct {
	bands set
	// floors[i] is what band i of a new cell starts from: a TAT, a window
	// state with zero counts, or a log's expiry. Each only grows.
	floors [MaxBands]atomic.Uint64
}

// newCell returns a cell whose bands start at the floors. It runs under the
// lock of the key's map bucket, after the removal of an earlier cell for
// the key (which took the same lock), so the remover's raises are visible.
func (b *bandCells) newCell() *cell {
	c := &cell{words: make([]atomic.Uint64, len(b.bands))}
	for i := range c.words {
		c.words[i].Store(b.floors[i].Load())
	}
	if last := &b.bands[len(b.bands)-1]; last.kind == kindLog {
		c.ring = window.NewLogRingAt(&last.l, int64(b.floors[len(b.bands)-1].Load()))
	}
	return c
}

// retiredWord is the retired state of a band of kind k.
func retiredWord(k kind) uint64 {
	if k == kindGCRA {
		return uint64(gcra.Retired)
	}
	return window.Retired
}

// IsRetired reports whether c's last band, and so c, is retired.
func (b *bandCells) IsRetired(c *cell) bool {
	last := len(b.bands) - 1
	if b.bands[last].kind == kindLog {
		return c.ring.IsRetired()
	}
	return c.words[last].Load() == retiredWord(b.bands[last].kind)
}

// snapshot is step 1 of a removal: what each band says, read last band
// first.
type snapshot struct {
	live   bool  // the last band is not retired
	idle   bool  // every band is idle at now
	from   int64 // when the last band to become idle does
	floors [MaxBands]uint64
	last   uint64         // the last band's word as loaded (not a log)
	mark   window.LogMark // the last band's ring position (a log)
}

func (b *bandCells) snapshot(c *cell, now int64) (s snapshot) {
	last := len(b.bands) - 1
	s.idle = true
	// The last band first, then the others last to first (see Keyed).
	for i := last; i >= 0; i-- {
		band := &b.bands[i]
		var from int64
		var floor uint64
		var idle bool
		if band.kind == kindLog { // only ever the last band
			if c.ring.IsRetired() {
				return snapshot{}
			}
			var latest int64
			s.mark, latest, idle = c.ring.Idle(now)
			from, floor = latest, uint64(latest)
		} else {
			w := c.words[i].Load()
			if i == last {
				if w == retiredWord(band.kind) {
					return snapshot{}
				}
				s.last = w
			}
			switch band.kind {
			case kindGCRA:
				from, floor, idle = int64(w), w, int64(w) <= now
			case kindFixed:
				from, floor, idle = band.f.Idle(w, now)
			case kindCounter:
				from, floor, idle = band.c.Idle(w, now)
			}
		}
		s.floors[i] = floor
		s.from = max(s.from, from)
		s.idle = s.idle && idle
	}
	s.live = true
	return s
}

// raiseFloors is step 2.
func (b *bandCells) raiseFloors(s *snapshot) {
	for i := range b.bands {
		keyed.Raise(&b.floors[i], s.floors[i])
	}
}

// retire is step 3: it fails if the last band changed since the snapshot.
func (b *bandCells) retire(c *cell, s *snapshot) bool {
	last := len(b.bands) - 1
	if b.bands[last].kind == kindLog {
		return c.ring.RetireFrom(s.mark)
	}
	return c.words[last].CompareAndSwap(s.last, retiredWord(b.bands[last].kind))
}

// RetireIdle retires c if every band is idle at now.
func (b *bandCells) RetireIdle(c *cell, now int64) bool {
	s := b.snapshot(c, now)
	if !s.live || !s.idle {
		return false
	}
	b.raiseFloors(&s)
	return b.retire(c, &s)
}

// IdleFrom returns when the last of c's bands becomes idle.
func (b *bandCells) IdleFrom(c *cell) (int64, bool) {
	s := b.snapshot(c, 0)
	return s.from, s.live
}

// RetireStale retires c if every band is idle by limit; the floors are
// raised only if c is idle at now.
func (b *bandCells) RetireStale(c *cell, limit, now int64) (retired, idle bool) {
	s := b.snapshot(c, now)
	if !s.live || s.from > limit {
		return false, false
	}
	if s.idle {
		b.raiseFloors(&s)
	}
	return b.retire(c, &s), s.idle
}
