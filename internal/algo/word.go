package algo

import (
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A WordRule is an algorithm whose whole state is one packed word: the pure
// decision (no atomics, no clock) that Word wraps in the shared
// CompareAndSwap loop. GCRA, the fixed windows and the sliding counter are
// WordRules.
//
// An admission is decided in two parts: Grid().At(now), what depends on
// the time alone (a division, for the windows), once per request and
// before the loop loads the word; then AdmitAt, what depends on the state,
// between the load and the CompareAndSwap. The shorter that stretch, the
// less often another core's store lands in it on a contended word, and the
// less each retry costs: AdmitAt does no division, as GCRA's decision does
// none. The Grid is fixed for the rule, so callers keep it beside the rule
// and prepare the time without a dynamic call.
type WordRule interface {
	// Grid returns how the rule reads the time.
	Grid() Grid
	// AdmitAt decides n at the prepared time m on state: the state to
	// store and whether it is admitted. Denied, or n = 0: next == state
	// (nothing to store). AdmitAt(state, Grid().At(now), n) is the
	// decision Decide(state, now, n) makes.
	AdmitAt(state uint64, m Moment, n int) (next uint64, ok bool)
	// Decide is Admit with the whole decision, describing next.
	Decide(state uint64, now int64, n int) (next uint64, d gcra.Decision)
	// Refund takes back the n of the admission taken from state, at now
	// (a clock reading after state was loaded), knowing since as
	// gcra.Params.Refund does: the state to store, whether storing it
	// moves other admissions (only GCRA's can), and whether there is one.
	Refund(state uint64, taken Taken, now int64, n int, since gcra.Since) (back uint64, shifts, ok bool)
	// Idle reports when state becomes idle, the floor a replacement starts
	// from, and whether it is idle at now.
	Idle(state uint64, now int64) (from int64, floor uint64, idle bool)
	// Retired is the retired state: every request is denied against it and
	// nothing is stored.
	Retired() uint64
	Quota() Quota
}

// A Grid is how a WordRule reads the time: in windows of Period ns from
// Start (times before Start count as Start), or, with Period 0, as the time
// alone (GCRA, the anchored window).
type Grid struct{ Start, Period int64 }

// A Moment is a time prepared by a Grid: the time, and for windows the
// window it falls in and its position in that window.
type Moment struct {
	Now   int64
	Index uint64 // the window Now falls in
	Pos   int64  // Now's position in that window
}

// At prepares now: one division for windows, none for the time alone.
func (g Grid) At(now int64) Moment {
	if g.Period == 0 {
		return Moment{Now: now}
	}
	d := uint64(max(now-g.Start, 0))
	w := d / uint64(g.Period)
	return Moment{Now: now, Index: w, Pos: int64(d - w*uint64(g.Period))}
}

// word is a WordRule as an Algorithm: the one CompareAndSwap loop, with the
// rule's Grid kept beside it.
type word struct {
	r WordRule
	g Grid
}

// Word returns r as an Algorithm on a one-word State.
func Word(r WordRule) Algorithm { return word{r, r.Grid()} }

func (w word) Words() int { return 1 }

func (w word) Init(s State, floor uint64) { s.Word.Store(floor) }

func (w word) Admits(s State, now int64, n int) bool {
	_, ok := w.r.AdmitAt(s.Word.Load(), w.g.At(now), n)
	return ok
}

func (w word) Admit(s State, now int64, n int) (uint64, bool) {
	return AdmitWordAt(s.Word, w.r, w.g.At(now), n)
}

// AdmitWord is the CompareAndSwap loop of every one-word rule: it decides n
// at now on *p under r and stores the admission. It returns the word stored
// (what Refund needs) and whether n was admitted. GCRA's fast paths take
// Bucket's loops instead, the same loop specialised to gcra.Params (no
// dynamic call, inlined: TestFastPathInlines), which TestBucketDecidesAsWord
// holds to this one.
func AdmitWord(p *atomic.Uint64, r WordRule, now int64, n int) (uint64, bool) {
	return AdmitWordAt(p, r, r.Grid().At(now), n)
}

// AdmitWordAt is AdmitWord at a time r's Grid prepared: callers that keep
// the Grid beside the rule (the limiters, a Set, Word) prepare it without
// a dynamic call.
func AdmitWordAt(p *atomic.Uint64, r WordRule, m Moment, n int) (uint64, bool) {
	for {
		// First the time's part (m, before the loop), then the load: between
		// the load and the CompareAndSwap only AdmitAt's shifts, compares
		// and multiplies.
		old := p.Load()
		next, ok := r.AdmitAt(old, m, n)
		if !ok || next == old {
			return next, ok // a denial (or a peek) stores nothing
		}
		// The CompareAndSwap is the admission's linearisation point; on
		// success it synchronizes before every later load of this word.
		if p.CompareAndSwap(old, next) {
			return next, true
		}
		// Lost a race: decide again on the winner's state, at the same m.
		// Every WordRule takes max(state, now) in its own terms, so a time
		// that went stale meanwhile can only make the retry stricter, never
		// rewind the state.
	}
}

func (w word) Decide(s State, now int64, n int, peek bool) gcra.Decision {
	if peek {
		_, d := w.r.Decide(s.Word.Load(), now, n)
		return d
	}
	d, _ := TakeWordAt(s.Word, w.r, w.g.At(now), n)
	return d
}

func (w word) Take(s State, now int64, n int) (gcra.Decision, Taken) {
	return TakeWordAt(s.Word, w.r, w.g.At(now), n)
}

// TakeWord is AdmitWord with the whole decision: it decides n at now on the
// word at p, stores the next word if n is admitted, and returns the decision
// and what Refund needs, the zero Taken if it stored nothing (a denial, a
// peek, Unlimited).
func TakeWord(p *atomic.Uint64, r WordRule, now int64, n int) (gcra.Decision, Taken) {
	return TakeWordAt(p, r, r.Grid().At(now), n)
}

// TakeWordAt is TakeWord at a time r's Grid prepared (m.Now is the time).
func TakeWordAt(p *atomic.Uint64, r WordRule, m Moment, n int) (gcra.Decision, Taken) {
	ep := epochFor(p, r)
	now := m.Now
	for {
		// As in AdmitWordAt: between the load and the CompareAndSwap only
		// AdmitAt. The decision is described from the state loaded, after
		// the CompareAndSwap for an admission: Decide is a pure function of
		// (old, now, n), and decides as AdmitAt did.
		old := p.Load()
		next, ok := r.AdmitAt(old, m, n)
		if !ok || next == old {
			_, d := r.Decide(old, now, n)
			return d, Taken{} // a denial (or a peek) stores nothing
		}
		// As in AdmitWord: the CompareAndSwap is the linearisation point,
		// and a lost race decides again on the winner's state.
		if p.CompareAndSwap(old, next) {
			_, d := r.Decide(old, now, n)
			return d, Taken{Word: next, At: now, Epoch: ep}
		}
	}
}

// epochFor reads the stripe counters of the word at p for an admission
// under r, before the admission is decided: a give-back or a reservation
// that lands after this read is then seen by the admission's own
// give-back. Only a GCRA give-back reads them (the windows' give-backs
// count, and do not depend on what happened since).
func epochFor(p *atomic.Uint64, r WordRule) Epoch {
	if _, ok := r.(*GCRA); ok {
		return StripeOf(p).Epoch()
	}
	return Epoch{}
}

// Refunds: every one-word rule gives back.
func (w word) Refunds() bool { return true }

func (w word) Refund(s State, taken Taken, clk Clock, n int) bool {
	return RefundWord(s.Word, w.r, taken, clk, n)
}

// RefundWord is the give-back of a WordRule on the word at p: RefundLoop
// with the rule's Refund.
func RefundWord(p *atomic.Uint64, r WordRule, taken Taken, clk Clock, n int) bool {
	return RefundLoop(p, taken, clk, func(old uint64, now int64, since gcra.Since) (uint64, bool, bool) {
		return r.Refund(old, taken, now, n, since)
	})
}

// RefundLoop runs one give-back on the word at p: under its Stripe's
// lock, a load, a reading of the stripe's counters and of the clock, give,
// and a CompareAndSwap of what give returns, until give has nothing to
// store or the CompareAndSwap succeeds. give receives the word, the time
// (the later of clk's reading and the admission's own: a caller that
// stamped the admission ahead of the clock keeps its timeline) and what
// happened since the admission (see Stripe). A zero taken gives back
// nothing.
func RefundLoop(p *atomic.Uint64, taken Taken, clk Clock, give func(old uint64, now int64, since gcra.Since) (back uint64, shifts, ok bool)) bool {
	if taken == (Taken{}) {
		return false
	}
	s := StripeOf(p)
	s.Lock()
	ok, shifted := false, false
	for {
		// First the load, then the counters and the clock: the counters
		// then include every reservation the loaded state holds, and the
		// reading is at least every time the loaded state was decided at.
		old := p.Load()
		since := s.Since(taken.Epoch)
		back, shifts, store := give(old, max(clk.Now(), taken.At), since)
		if !store {
			break
		}
		// Under the lock only admissions and retirements race with this
		// CompareAndSwap, and neither brings the word back to old: it fails
		// on any change, and the retry reads the counters and the clock
		// again.
		if p.CompareAndSwap(old, back) {
			ok, shifted = true, shifts
			break
		}
	}
	s.Unlock(shifted)
	return ok
}

func (w word) Idle(s State, now int64) (mark Mark, from int64, floor uint64, idle, live bool) {
	v := s.Word.Load()
	if v == w.r.Retired() {
		return Mark{v}, 0, 0, false, false
	}
	from, floor, idle = w.r.Idle(v, now)
	return Mark{v}, from, floor, idle, true
}

// Retire: a CompareAndSwap from the word Idle read. An admission since then
// stored another word (a WordRule never stores the same word twice in a row
// but as a no-op), so the CompareAndSwap fails and the state stays.
func (w word) Retire(s State, mark Mark) bool {
	return mark[0] != w.r.Retired() && s.Word.CompareAndSwap(mark[0], w.r.Retired())
}

func (w word) IsRetired(s State) bool { return s.Word.Load() == w.r.Retired() }

func (w word) Quota() Quota { return w.r.Quota() }

func (w word) Compatible(other Algorithm) bool {
	o, ok := other.(word)
	return ok && sameLayout(w.r, o.r)
}

// WordOf returns the WordRule of a one-word Algorithm, and false for the
// others (the limiters' fast paths use it).
func WordOf(a Algorithm) (WordRule, bool) {
	w, ok := a.(word)
	return w.r, ok
}
