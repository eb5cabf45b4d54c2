package algo

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// A Clock reads the time a give-back decides at, after it has loaded the
// state (*timebase.Source implements it).
type Clock interface{ Now() int64 }

// A Taken is what an admission leaves for its give-back: the word it stored
// (GCRA: its TAT), the time it was decided at, and the give-back epoch of
// its state, read before it was decided (see Stripe). The zero Taken gives
// back nothing.
type Taken struct {
	Word  uint64
	At    int64
	Epoch uint64
}

// A Stripe serialises the give-backs of the states whose first word hashes
// to it, and counts those that shifted other admissions (its epoch).
//
// Give-backs of one state must not overlap: a GCRA give-back computes what
// it returns from a clock reading, and a CompareAndSwap alone cannot tell
// that the state went down (another give-back) and back up to the same value
// (an admission stamped after that reading) in between. Holding the stripe's
// lock from the load to the store, a give-back only ever races with
// admissions and retirements, which never bring a word back to a value it
// held, so its CompareAndSwap fails on any change. Decisions never take the
// lock: they stay lock-free, and a give-back waits at most for the others
// of its stripe, each a load, a clock read and a CompareAndSwap.
//
// The epoch counts the give-backs made under the lock that moved the slots
// of later admissions (gcra.Params.Refund's shifts). An admission that
// reads it before deciding knows, at its give-back, whether any such
// give-back of its state (or of another state of the stripe: more caution,
// never less) happened since: if none did, its own stored TAT is still
// where its slot ends.
type Stripe struct {
	mu    sync.Mutex
	epoch atomic.Uint64
	//lint:ignore U1000 prevents false sharing between stripes
	_ [64 - 16]byte
}

// stripes are shared by every state of the process: 64 of them make two
// give-backs of different keys wait for each other rarely, for 4 KiB.
var stripes [64]Stripe

// StripeOf returns the stripe of the state whose first word is w.
func StripeOf(w *atomic.Uint64) *Stripe {
	// Fibonacci hashing of the address: its top 6 bits index the stripes.
	h := uint64(uintptr(unsafe.Pointer(w))) * 0x9E3779B97F4A7C15
	return &stripes[h>>58]
}

// Epoch returns the number of shifting give-backs made so far.
func (s *Stripe) Epoch() uint64 { return s.epoch.Load() }

// Lock locks the stripe for one give-back.
func (s *Stripe) Lock() { s.mu.Lock() }

// Unlock unlocks it, counting a shift first if the give-back made one.
func (s *Stripe) Unlock(shifted bool) {
	if shifted {
		s.epoch.Add(1)
	}
	s.mu.Unlock()
}
