package algo

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// MaxBands is the most algorithms one Set holds.
const MaxBands = 8

// ErrLogNotLast: an algorithm that cannot refund (the sliding log) is
// allowed only as the last member of a Set.
var ErrLogNotLast = errors.New("atomiclimit: an algorithm that cannot refund (the sliding log) must be the last band, and only one")

// A Set is the list of algorithms one key is held to: usually one, or
// several bands at once (20 per second and 1,000 per hour and 10,000 per
// day), a request being admitted only if every band admits it. Its state is
// the bands' words one after another. Its floors are one word per band.
//
// # Several bands
//
// An admission first checks every band with loads only (Admits); a request
// any band denies writes nothing. Then it takes the request from each band in
// turn: a one-word band by one CompareAndSwap from the word its check loaded
// to the word its check decided, if the word has not changed since (the
// check's decision is then the band's admission), else by its loop. If a
// band that passed the check denies now (another goroutine took
// its last quota in between), the bands already taken from are given back,
// last first, and the request is denied. A give-back never creates quota
// (each algorithm's Refund says why, and Stripe), and a band that cannot
// give back (the log) is allowed only last: when it is reached every other
// band has admitted, and nothing after it can deny.
//
// Removal of an idle state retires its last band only:
//
//  1. Idle the last band first, then the others, last to first, and check
//     that each is idle;
//  2. raise each band's floor to what it reported;
//  3. Retire the last band from the mark step 1 saw.
//
// Why that is enough: an admission writes the bands in order, the last one
// last, and each write moves that band's state forward (no refund ever
// touches the last band). If Retire succeeds, every admission that completed
// wrote the last band before step 1 read it, so its writes to the other
// bands, earlier still, were seen by the later reads of step 1 and are
// covered by the floors. Every other admission meets the retired band, is
// denied, refunds the bands it took, and decides again on a fresh state.
type Set struct {
	clk  Clock // read by give-backs
	algs []Algorithm
	off  []int      // off[i]: the index of band i's first word in the state
	rule []WordRule // rule[i]: band i's WordRule if it has one word, else nil
	grid []Grid     // grid[i]: its Grid
	idle []int64    // idle[i]: band i's Quota().IdleAfter, in ns
	size int
}

// NewSet returns the set of algs (1 ≤ len(algs) ≤ MaxBands), whose
// give-backs read clk.
func NewSet(clk Clock, algs ...Algorithm) (*Set, error) {
	if len(algs) == 0 || len(algs) > MaxBands {
		return nil, fmt.Errorf("atomiclimit: %d bands (1 to %d)", len(algs), MaxBands)
	}
	s := &Set{clk: clk, algs: algs, off: make([]int, len(algs)), rule: make([]WordRule, len(algs)), grid: make([]Grid, len(algs)), idle: make([]int64, len(algs))}
	for i, a := range algs {
		// A one-word band is decided here on its word with its WordRule:
		// one dynamic call per decision, not two.
		if w, ok := a.(word); ok {
			s.rule[i], s.grid[i] = w.r, w.g
		}
		if !a.Refunds() && i != len(algs)-1 {
			return nil, fmt.Errorf("%w: band %d of %d (%s)", ErrLogNotLast, i, len(algs), a.Quota().String)
		}
		s.off[i] = s.size
		s.size += a.Words()
		s.idle[i] = int64(a.Quota().IdleAfter)
	}
	return s, nil
}

// Refunds reports whether band i can give an admission back.
func (s *Set) Refunds(i int) bool { return s.algs[i].Refunds() }

// Len returns the number of bands.
func (s *Set) Len() int { return len(s.algs) }

// Band returns band i.
func (s *Set) Band(i int) Algorithm { return s.algs[i] }

// Words returns the number of state words of the whole set.
func (s *Set) Words() int { return s.size }

// Sub returns band i's view of the set's state st.
func (s *Set) Sub(st State, i int) State {
	if len(s.algs) == 1 {
		return st // one band: the whole state
	}
	o := s.off[i]
	w := s.size - o // the last band's width
	if i+1 < len(s.off) {
		w = s.off[i+1] - o
	}
	var sub State
	if o == 0 {
		sub.Word = st.Word
	} else {
		sub.Word = &st.Rest[o-1]
	}
	if w > 1 {
		sub.Rest = st.Rest[o : o+w-1]
	}
	return sub
}

// Init sets a fresh state from the floors (one per band).
func (s *Set) Init(st State, floors []atomic.Uint64) {
	for i, a := range s.algs {
		a.Init(s.Sub(st, i), floors[i].Load())
	}
}

// Admit decides n at now under every band and records it in all of them if
// every band admits.
func (s *Set) Admit(st State, now int64, n int) bool {
	if len(s.algs) == 1 {
		return s.admitOne(st, now, n)
	}
	var pl plan
	if !s.check(st, now, n, &pl) {
		return false // nothing written
	}
	return s.takeAll(st, now, n, &pl)
}

// Suspect reports whether a denial at now on st needs a second look: st
// is retired, or a band of it is idle more than its own IdleAfter after
// now, later than any admission at now or before could have made it (then
// IdleFrom and Far decide). Loads only, of every band, the last first.
//
// Every band, not only the one that denied: a band's give-back can leave
// it as far as the admission it gives back (a window keeps its window, a
// GCRA band its time), and a far window band admits what it counts into
// its far window; so a far band can sit behind, or beside, a band that
// denies for now, and the whole state still be far
// (TestSuspectSeesFarBandBehindDenial). A state Far finds far (idle more
// than twice the longest IdleAfter after now) has a band idle more than
// its own IdleAfter after now, so Suspect never misses it. Per-band
// thresholds cost no more than one: what a denial pays is each band's
// Idle, a division for a window.
func (s *Set) Suspect(st State, now int64) bool {
	last := len(s.algs) - 1
	for i := last; i >= 0; i-- {
		from, live := s.bandIdleFrom(st, i)
		if !live {
			if i == last {
				return true
			}
			continue // an earlier band is never retired
		}
		if from-now > s.idle[i] {
			return true
		}
	}
	return false
}

// bandIdleFrom returns when band i of st becomes idle, by loads only (a
// one-word band decided on its word with its rule), and false if the band
// is retired.
func (s *Set) bandIdleFrom(st State, i int) (int64, bool) {
	if r := s.rule[i]; r != nil {
		v := s.word(st, i).Load()
		if v == r.Retired() {
			return 0, false
		}
		from, _, _ := r.Idle(v, 0)
		return from, true
	}
	_, from, _, _, live := s.algs[i].Idle(s.Sub(st, i), 0)
	return from, live
}

// A plan is an admission's check, kept for its take: for each one-word
// band among the first planned the word the check loaded (old) and the
// word it decided to store (next), and for a GCRA band the stripe's
// counters, read before that load (see Stripe). A band after those is
// taken by its loop, as a band whose word changed since the check: the
// plan is zeroed on every admission, denials included, and four bands
// cover the sets people stack (a minute, an hour, a day).
type plan struct {
	old, next [planned]uint64
	epoch     [planned]Epoch
	checked   bool // old and next hold the check's words
}

// planned is how many bands a plan holds.
const planned = 4

// check is an admission's first phase: every band decides n at now with
// loads only, and the first that denies ends it. It fills pl for the take.
func (s *Set) check(st State, now int64, n int, pl *plan) bool {
	for i, r := range s.rule {
		if r == nil {
			if !s.algs[i].Admits(s.Sub(st, i), now, n) {
				return false
			}
			continue
		}
		w := s.word(st, i)
		if i >= planned {
			if _, ok := r.AdmitAt(w.Load(), s.grid[i].At(now), n); !ok {
				return false
			}
			continue
		}
		pl.epoch[i] = epochFor(w, r) // first the counters, then the load
		pl.old[i] = w.Load()
		var ok bool
		if pl.next[i], ok = r.AdmitAt(pl.old[i], s.grid[i].At(now), n); !ok {
			return false
		}
	}
	pl.checked = true
	return true
}

// admitOne admits n at now on a set of one band.
func (s *Set) admitOne(st State, now int64, n int) bool {
	if r := s.rule[0]; r != nil {
		_, ok := AdmitWordAt(st.Word, r, s.grid[0].At(now), n)
		return ok
	}
	_, ok := s.algs[0].Admit(st, now, n)
	return ok
}

// take admits n at now on band i as pl planned, and returns what its
// Refund needs.
func (s *Set) take(st State, i int, now int64, n int, pl *plan) (Taken, bool) {
	if r := s.rule[i]; r != nil {
		w := s.word(st, i)
		t := Taken{At: now}
		if pl.checked && i < planned {
			t.Epoch = pl.epoch[i]
			old, next := pl.old[i], pl.next[i]
			if next == old {
				t.Word = old
				return t, true // n = 0: nothing to store
			}
			// If the word is still the one the check loaded, the check's
			// decision is the band's admission and this CompareAndSwap its
			// linearisation point, as in AdmitWordAt. The bands'
			// CompareAndSwaps follow each other with no decision between
			// them: the words of a state share a cache line, which the
			// first brings in for the others.
			if w.CompareAndSwap(old, next) {
				t.Word = next
				return t, true
			}
		} else {
			t.Epoch = epochFor(w, r)
		}
		// The word changed since the check: its loop decides again on the
		// word as it is.
		stored, ok := AdmitWordAt(w, r, s.grid[i].At(now), n)
		t.Word = stored
		return t, ok
	}
	if t, ok := s.algs[i].(Taker); ok {
		d, tk := t.Take(s.Sub(st, i), now, n)
		return tk, d.Allowed
	}
	_, ok := s.algs[i].Admit(s.Sub(st, i), now, n)
	return Taken{}, ok // the log: nothing to give back, and it is last
}

// word is band i's first word.
func (s *Set) word(st State, i int) *atomic.Uint64 {
	if o := s.off[i]; o > 0 {
		return &st.Rest[o-1]
	}
	return st.Word
}

// takeAll takes n from every band in order, as pl planned; if one denies,
// it gives back the bands before it, last first.
func (s *Set) takeAll(st State, now int64, n int, pl *plan) bool {
	var taken [MaxBands]Taken
	for i := range s.algs {
		t, ok := s.take(st, i, now, n, pl)
		if !ok {
			for j := i - 1; j >= 0; j-- {
				s.algs[j].Refund(s.Sub(st, j), taken[j], s.clk, n)
			}
			return false
		}
		taken[i] = t
	}
	return true
}

// Decide is Admit with the decision of the most restrictive band: when
// denied, the band whose RetryAfter is longest (every band only becomes
// easier as time passes, so after that wait, absent other traffic, all of
// them admit); when admitted, the band with the fewest remaining. band is
// that band's index. ResetAfter and TokenAfter are the longest over the
// bands. With peek it records nothing.
func (s *Set) Decide(st State, now int64, n int, peek bool) (d gcra.Decision, band int) {
	if len(s.algs) == 1 {
		return s.algs[0].Decide(st, now, n, peek), 0
	}
	var pl plan
	ok := s.check(st, now, n, &pl)
	if ok && !peek {
		ok = s.takeAll(st, now, n, &pl)
	}
	d.Allowed = ok
	d.Remaining = int(^uint(0) >> 1)
	for i, a := range s.algs {
		sub := s.Sub(st, i)
		var bd gcra.Decision
		if ok && peek {
			bd = a.Decide(sub, now, n, true) // as if admitted
		} else {
			bd = a.Decide(sub, now, 0, true) // as stored
			if !ok {
				if pk := a.Decide(sub, now, n, true); !pk.Allowed && pk.RetryAfter > d.RetryAfter {
					d.RetryAfter, band = pk.RetryAfter, i
				}
			}
		}
		if bd.Remaining < d.Remaining {
			d.Remaining = bd.Remaining
			if ok {
				band = i
			}
		}
		d.ResetAfter = max(d.ResetAfter, bd.ResetAfter)
		d.TokenAfter = max(d.TokenAfter, bd.TokenAfter)
	}
	return d, band
}

// Take is Decide without peek that also returns what RefundTaken needs to
// give the admission back: for a set of one band that is a Taker, its
// Taken; otherwise the zero Taken, nothing to give back (the log cannot
// give back, and several bands would need a Taken per band).
func (s *Set) Take(st State, now int64, n int) (gcra.Decision, Taken) {
	if len(s.algs) == 1 {
		if r := s.rule[0]; r != nil {
			return TakeWordAt(st.Word, r, s.grid[0].At(now), n)
		}
		if t, ok := s.algs[0].(Taker); ok {
			return t.Take(st, now, n)
		}
	}
	d, _ := s.Decide(st, now, n, false)
	return d, Taken{}
}

// RefundTaken gives back the n of an admission for which Take returned
// taken, as far as the state still counts it (the band's Refund says
// how), and reports whether it gave anything back. Like every give-back it
// never creates quota.
func (s *Set) RefundTaken(st State, taken Taken, n int) bool {
	if taken == (Taken{}) || len(s.algs) != 1 {
		return false
	}
	if r := s.rule[0]; r != nil {
		return RefundWord(st.Word, r, taken, s.clk, n)
	}
	return s.algs[0].Refund(st, taken, s.clk, n)
}

// snapshot is step 1 of a removal (see Set): each band's Idle, the last
// band first.
type snapshot struct {
	live, idle bool
	from       int64
	mark       Mark // the last band's
	floors     [MaxBands]uint64
}

func (s *Set) snapshot(st State, now int64) (sn snapshot) {
	last := len(s.algs) - 1
	sn.idle = true
	for i := last; i >= 0; i-- {
		mark, from, floor, idle, live := s.algs[i].Idle(s.Sub(st, i), now)
		if !live {
			if i == last {
				return snapshot{} // retired
			}
			// An earlier band is never retired; count it as not idle.
			idle = false
		}
		if i == last {
			sn.mark = mark
		}
		sn.floors[i] = floor
		sn.from = max(sn.from, from)
		sn.idle = sn.idle && idle
	}
	sn.live = true
	return sn
}

// raise is step 2: every band's floor at least what step 1 reported.
func (s *Set) raise(floors []atomic.Uint64, sn *snapshot) {
	for i := range s.algs {
		Raise(&floors[i], sn.floors[i])
	}
}

// retire is step 3.
func (s *Set) retire(st State, sn *snapshot) bool {
	last := len(s.algs) - 1
	return s.algs[last].Retire(s.Sub(st, last), sn.mark)
}

// RetireIdle retires st if every band is idle at now, raising the floors
// first, and reports whether it did.
func (s *Set) RetireIdle(st State, floors []atomic.Uint64, now int64) bool {
	sn := s.snapshot(st, now)
	if !sn.live || !sn.idle {
		return false
	}
	s.raise(floors, &sn)
	return s.retire(st, &sn)
}

// RetireFar retires st, raising no floor, if a request at now finds it
// Far (see there). Its floors, as far ahead, must not reach the states
// created after it: the key starts again as a new key does. It reports
// whether it retired st.
func (s *Set) RetireFar(st State, now int64, clk Clock, reach *atomic.Int64) bool {
	sn := s.snapshot(st, 0)
	if !sn.live || !Far(sn.from, now, clk, reach) {
		return false
	}
	// A decision since the snapshot makes the retirement fail.
	return s.retire(st, &sn)
}

// Far reports whether a state idle from from, as a request at now loaded
// it, is idle later than any decision could have made it: later than reach
// after both now and the clock, *reach being how far ahead of the time it
// is decided at a decision of the limiter can make a state idle (a time
// stamped ahead of the clock, or a clock that went back, makes such
// states). It reports false for a request stamped more than reach ahead of
// the clock: a caller that stamps its own times, as a simulation does,
// decides as it says.
//
// First the state (from), then reach, then the clock: a decision that
// raises reach before it stores (a reservation) is then counted in both,
// and every decision the state reflects was at a time no later than the
// clock's reading (or stamped ahead of it).
func Far(from, now int64, clk Clock, reach *atomic.Int64) bool {
	r := reach.Load()
	clock := clk.Now()
	return now-clock <= r && from > max(now, clock)+r
}

// IdleFrom returns when the last of st's bands becomes idle, and false if
// st is retired.
func (s *Set) IdleFrom(st State) (int64, bool) {
	// Loads only, band by band, the last first (as snapshot reads them),
	// with no snapshot: a denial may ask this (see Far).
	last := len(s.algs) - 1
	var from int64
	for i := last; i >= 0; i-- {
		f, live := s.bandIdleFrom(st, i)
		if !live {
			if i == last {
				return 0, false
			}
			continue // an earlier band is never retired
		}
		from = max(from, f)
	}
	return from, true
}

// RetireStale retires st, idle or not, if every band is idle by limit; the
// floors are raised only if st is idle at now (an active state loses its
// counts, as EvictStalest documents).
func (s *Set) RetireStale(st State, floors []atomic.Uint64, limit, now int64) (retired, idle bool) {
	sn := s.snapshot(st, now)
	if !sn.live || sn.from > limit {
		return false, false
	}
	if sn.idle {
		s.raise(floors, &sn)
	}
	return s.retire(st, &sn), sn.idle
}

// IsRetired reports whether st is retired: its last band is.
func (s *Set) IsRetired(st State) bool {
	last := len(s.algs) - 1
	return s.algs[last].IsRetired(s.Sub(st, last))
}

// Compatible reports whether o may replace s on states s wrote: band by
// band compatible.
func (s *Set) Compatible(o *Set) bool {
	if len(s.algs) != len(o.algs) {
		return false
	}
	for i, a := range s.algs {
		if !a.Compatible(o.algs[i]) {
			return false
		}
	}
	return true
}
