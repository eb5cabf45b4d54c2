package algo

import (
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A WordRule is an algorithm whose whole state is one packed word: the pure
// decision (no atomics, no clock) that Word wraps in the shared
// CompareAndSwap loop. GCRA, the fixed windows and the sliding counter are
// WordRules.
type WordRule interface {
	// Admit decides n at now on state: the state to store and whether it is
	// admitted. Denied, or n = 0: next == state (nothing to store).
	Admit(state uint64, now int64, n int) (next uint64, ok bool)
	// Decide is Admit with the whole decision, describing next.
	Decide(state uint64, now int64, n int) (next uint64, d gcra.Decision)
	// Refund takes back the n of the admission that stored stored, if state
	// still counts it: the state to store and whether there is one.
	Refund(state, stored uint64, now int64, n int) (back uint64, ok bool)
	// Idle reports when state becomes idle, the floor a replacement starts
	// from, and whether it is idle at now.
	Idle(state uint64, now int64) (from int64, floor uint64, idle bool)
	// Retired is the retired state: every request is denied against it and
	// nothing is stored.
	Retired() uint64
	Quota() Quota
}

// word is a WordRule as an Algorithm: the one CompareAndSwap loop.
type word struct{ r WordRule }

// Word returns r as an Algorithm on a one-word State.
func Word(r WordRule) Algorithm { return word{r} }

func (w word) Words() int { return 1 }

func (w word) Init(s State, floor uint64) { s.Word.Store(floor) }

func (w word) Admits(s State, now int64, n int) bool {
	_, ok := w.r.Admit(s.Word.Load(), now, n)
	return ok
}

func (w word) Admit(s State, now int64, n int) (uint64, bool) { return AdmitWord(s.Word, w.r, now, n) }

// AdmitWord is the one CompareAndSwap loop of every one-word rule: it
// decides n at now on *p under r and stores the admission. It returns the
// word stored (what Refund needs) and whether n was admitted.
func AdmitWord(p *atomic.Uint64, r WordRule, now int64, n int) (uint64, bool) {
	for {
		old := p.Load()
		next, ok := r.Admit(old, now, n)
		if !ok || next == old {
			return next, ok // a denial (or a peek) stores nothing
		}
		// The CompareAndSwap is the admission's linearisation point; on
		// success it synchronizes before every later load of this word.
		if p.CompareAndSwap(old, next) {
			return next, true
		}
		// Lost a race: decide again on the winner's state. Every WordRule
		// takes max(state, now) in its own terms, so a now that went stale
		// meanwhile can only make the retry stricter, never rewind the state.
	}
}

func (w word) Decide(s State, now int64, n int, peek bool) gcra.Decision {
	if peek {
		_, d := w.r.Decide(s.Word.Load(), now, n)
		return d
	}
	d, _ := TakeWord(s.Word, w.r, now, n)
	return d
}

func (w word) Take(s State, now int64, n int) (gcra.Decision, uint64) {
	return TakeWord(s.Word, w.r, now, n)
}

// TakeWord is AdmitWord with the whole decision: it decides n at now on the
// word at p, stores the next word if n is admitted, and returns the decision
// and the word it stored (what Refund needs), or 0 if it stored nothing (a
// denial, a peek, Unlimited).
func TakeWord(p *atomic.Uint64, r WordRule, now int64, n int) (gcra.Decision, uint64) {
	for {
		old := p.Load()
		next, d := r.Decide(old, now, n)
		if !d.Allowed || next == old {
			return d, 0
		}
		// As in AdmitWord: the CompareAndSwap is the linearisation point,
		// and a lost race decides again on the winner's state.
		if p.CompareAndSwap(old, next) {
			return d, next
		}
	}
}

func (w word) Refund(s State, stored uint64, now int64, n int) bool {
	return refundWord(s.Word, w.r, stored, now, n)
}

// refundWord is the CompareAndSwap loop of a WordRule's Refund.
func refundWord(p *atomic.Uint64, r WordRule, stored uint64, now int64, n int) bool {
	for {
		old := p.Load()
		back, ok := r.Refund(old, stored, now, n)
		if !ok {
			return false
		}
		// Fails only if something was admitted meanwhile; the retry then
		// finds a state that may no longer count the refunded admission.
		if p.CompareAndSwap(old, back) {
			return true
		}
	}
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
