package algo

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A Clock reads the time a give-back decides at, after it has loaded the
// state (*timebase.Source implements it).
type Clock interface{ Now() int64 }

// A Taken is what an admission leaves for its give-back: the word it stored
// (GCRA: its TAT), the time it was decided at, and its state's stripe
// counters, read before it was decided (see Stripe). The zero Taken gives
// back nothing.
type Taken struct {
	Word  uint64
	At    int64
	Epoch Epoch
}

// An Epoch is a reading of a Stripe's two counters.
type Epoch struct {
	Shifts uint64 // give-backs that shifted later admissions
	Queued uint64 // reservations that queued
}

// A Stripe serialises the give-backs of the states whose first word hashes
// to it, and counts what a GCRA give-back needs to know of the decisions
// made since the admission it gives back (gcra.Since).
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
// Two counters, each read by an admission before it is decided and by its
// give-back after it loads the state (more caution, never less, for the
// other states of the stripe):
//
//   - shifts counts the give-backs, made under the lock, that moved the
//     slots of later admissions (gcra.Params.Refund's shifts). If none
//     happened since, the admission's own stored TAT is still where its
//     slot ends (gcra.Alone).
//   - queued counts the reservations that queued (due after the time they
//     were decided at). A reservation counts itself before its
//     CompareAndSwap, so a give-back that loads a state holding it also
//     reads its count. If none happened since, every admission due after
//     the one given back is due by now (gcra.NoneQueued).
type Stripe struct {
	mu     sync.Mutex
	shifts atomic.Uint64
	queued atomic.Uint64
	//lint:ignore U1000 prevents false sharing between stripes
	_ [64 - 24]byte
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

// Epoch reads the counters, for an admission about to be decided.
func (s *Stripe) Epoch() Epoch { return Epoch{s.shifts.Load(), s.queued.Load()} }

// Queue counts a reservation that queues: call it before its
// CompareAndSwap, and count it in its own Epoch too (Queued + 1).
func (s *Stripe) Queue() { s.queued.Add(1) }

// Since tells a give-back what happened since the admission read e. Call it
// with the lock held, after loading the state.
func (s *Stripe) Since(e Epoch) gcra.Since {
	switch {
	case s.shifts.Load() == e.Shifts:
		return gcra.Alone
	case s.queued.Load() == e.Queued:
		return gcra.NoneQueued
	}
	return gcra.Anything
}

// Lock locks the stripe for one give-back.
func (s *Stripe) Lock() { s.mu.Lock() }

// Unlock unlocks it, counting a shift first if the give-back made one.
func (s *Stripe) Unlock(shifted bool) {
	if shifted {
		s.shifts.Add(1)
	}
	s.mu.Unlock()
}
