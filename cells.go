package atomiclimit

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A cell is one key's state and the index of its tier: 16 bytes, and for a
// rule wider than one word the rest of its words right after it. Cells hold
// no pointer and are no object of their own: they are carved out of slabs
// (see cells.alloc), so that holding a key costs the garbage collector one
// object, the map's entry, which points at its cell.
//
// Its word is the state of a one-word rule (for GCRA an algo.Bucket's), and
// the first word of a wider one.
type cell struct {
	word atomic.Uint64
	tier atomic.Uint64 // the tier's index in cells.tiers
}

// cellHeader is the number of words of a cell before its rest.
const cellHeader = 2

// bucket is the cell's word as a GCRA bucket.
func (c *cell) bucket() *algo.Bucket { return algo.BucketOf(&c.word) }

// isRetired reports whether the cell's word holds a retired bucket.
func (c *cell) isRetired() bool { return c.word.Load() == uint64(algo.RetiredTAT) }

// cells tells the key store how to evict cells, holds the floors new states
// start from, the tiers, and the slabs cells are carved from. It holds no
// reference to the Keyed limiter.
type cells struct {
	words int  // state words per key
	bands int  // bands per rule
	gcra  bool // one GCRA band: the bucket's own retired state
	// src is a copy of the limiter's clock (not a pointer into the limiter:
	// the sweeper reaches the cells), read by forget.
	src timebase.Source
	// stamped is set, for good, by the first decision at a time a caller
	// gave (AllowN, TakeN, PeekN, ReserveN), before it decides: see
	// mayBeFar.
	stamped atomic.Bool
	// tiers are the limiter's tiers by index (a cell's tier word), only
	// ever appended to: a copy per registration (NewTier, SetKeyRule).
	tiers atomic.Pointer[[]*Tier]

	// Retirements write the floors, creations the slab; decisions read the
	// fields above (a denial's IsRetired, a wide rule's state): the padding
	// keeps them on different cache lines, so that a sweep or a new key
	// does not make decisions on other cores fetch their line again (false
	// sharing).
	//lint:ignore U1000 prevents false sharing
	_ [cacheLine]byte
	// floors[i] is at least the floor of band i of every state retired as
	// idle; new states start from them. Each only grows (algo.Set.raise).
	floors [algo.MaxBands]atomic.Uint64
	// reach is how far ahead of the clock a state of the limiter can be
	// idle: the largest far of the rules it has held (raised by each tier
	// before it decides under a rule), and of B·T + the wait of its
	// reservations (raised by each before it stores). Only grows.
	reach atomic.Int64
	slab  atomic.Pointer[slab] // the slab new cells are carved from
	regMu sync.Mutex           // serialises registrations of tiers
}

// A slab is a block of words that cells are carved from, in order, never
// handed out twice. It holds no pointer, so the collector never scans it;
// the map's entries point into it, and it is freed, as any object, once
// none does (every cell carved from it removed, and no request holding
// one). A key that stays keeps its slab: a slab outlives its keys by at
// most the longest-lived of them.
type slab struct {
	words []atomic.Uint64
	next  atomic.Int64 // the first word not yet handed out
}

// slabWords is the size of a slab: 4 KiB, 256 cells of one word.
const slabWords = 512

// stride is the words one cell takes: the header and the rest of a wider
// rule's words.
func (g *cells) stride() int { return cellHeader + g.words - 1 }

// alloc carves a new cell, zeroed. It takes no lock: a slab's next word is
// taken by an atomic add, and a goroutine that finds the slab spent
// installs a new one (or uses the one another installed).
func (g *cells) alloc() *cell {
	n := int64(g.stride())
	for {
		s := g.slab.Load()
		if s != nil {
			if i := s.next.Add(n) - n; i+n <= int64(len(s.words)) {
				return (*cell)(unsafe.Pointer(&s.words[i]))
			}
		}
		ns := &slab{words: make([]atomic.Uint64, max(slabWords, n))}
		ns.next.Store(n) // its first cell is ours
		if g.slab.CompareAndSwap(s, ns) {
			return (*cell)(unsafe.Pointer(&ns.words[0]))
		}
	}
}

// register gives t the next index, and adds it to the tiers.
func (g *cells) register(t *Tier) {
	g.regMu.Lock()
	defer g.regMu.Unlock()
	var next []*Tier
	if cur := g.tiers.Load(); cur != nil {
		next = append(next, *cur...)
	}
	t.id = uint64(len(next))
	next = append(next, t)
	g.tiers.Store(&next)
}

// tier returns c's tier.
func (g *cells) tier(c *cell) *Tier { return (*g.tiers.Load())[c.tier.Load()] }

// rule returns the rule c's next decision uses.
func (g *cells) rule(c *cell) *rule { return g.tier(c).cur.Load() }

// suspect reports whether a denial at now on c, under its rule r, needs a
// second look: c is retired, or its state is idle later than any decision
// at now could have made it (for GCRA more than r.far after now; for the
// others, algo.Set.Suspect); then forget decides. Loads only.
func (g *cells) suspect(c *cell, r *rule, now int64) bool {
	if g.gcra {
		tat := int64(c.word.Load())
		return tat == algo.RetiredTAT || tat-now > r.far
	}
	if !g.mayBeFar() {
		// No state is far; a retired one (a sweep's) still needs the look.
		return r.set.IsRetired(g.state(c))
	}
	return r.set.Suspect(g.state(c), now)
}

// stamp converts a time a caller gave, noting that one was given.
func (g *cells) stamp(t time.Time) int64 {
	if !g.stamped.Load() {
		g.stamped.Store(true)
	}
	return g.src.At(t)
}

// mayBeFar is Limiter.mayBeFar for the keyed limiter: on the default clock,
// with no time given by a caller, no state is far. Call it after loading
// the state a denial met.
func (g *cells) mayBeFar() bool { return !g.src.IsMonotonic() || g.stamped.Load() }

// forget retires c, raising no floor, if a request at now, a time within
// reach of the clock, finds c's state idle later than any decision at now
// or at the clock could have made it (see "Clocks that jump" in the
// package doc): the key starts again as a new key. It reports whether it
// retired c.
func (g *cells) forget(c *cell, now int64) bool {
	return g.rule(c).set.RetireFar(g.state(c), now, g.src.GiveBack(), &g.reach)
}

// RetireFar is forget for the store's sweeps, which know when c becomes
// idle (from): it reads the clock only for a state idle later than
// now + reach.
func (g *cells) RetireFar(c *cell, from, now int64) bool {
	return from-now > g.reach.Load() && g.forget(c, now)
}

// state is c's state: its word, and for a rule wider than one word the
// words carved right after its header (every cell of a limiter has one
// shape: the rules of all its tiers are compatible, so they have the same
// width).
func (g *cells) state(c *cell) algo.State {
	if g.words == 1 {
		return algo.State{Word: &c.word}
	}
	rest := (*atomic.Uint64)(unsafe.Add(unsafe.Pointer(c), cellHeader*unsafe.Sizeof(atomic.Uint64{})))
	return algo.State{Word: &c.word, Rest: unsafe.Slice(rest, g.words-1)}
}

func (g *cells) RetireIdle(c *cell, now int64) bool {
	return g.rule(c).set.RetireIdle(g.state(c), g.floors[:g.bands], now)
}

func (g *cells) IdleFrom(c *cell) (int64, bool) { return g.rule(c).set.IdleFrom(g.state(c)) }

func (g *cells) RetireStale(c *cell, limit, now int64) (retired, idle bool) {
	return g.rule(c).set.RetireStale(g.state(c), g.floors[:g.bands], limit, now)
}

func (g *cells) IsRetired(c *cell) bool {
	if g.gcra {
		return c.isRetired() // the bucket's word, without the rule
	}
	return g.rule(c).set.IsRetired(g.state(c))
}

// cacheLine is the size the padding assumes: 64 bytes on amd64 and most
// arm64 cores (xsync and the runtime use the same figure).
const cacheLine = 64
