// Package algo is the one contract every rate-limiting algorithm of this
// module keeps, and the adapters that put each algorithm behind it: GCRA,
// the fixed window (limiter-aligned or anchored at each key's first
// request), the sliding-window counter, the exact sliding log, the rolling
// window kept in slices, and bands (several of them at once on one key).
//
// An Algorithm decides requests on one key's State, a fixed number of atomic
// words, and tells a keyed limiter what exact eviction needs: when a state is
// idle (no later decision could tell it from a fresh one), the floor a
// replacement must start from, and how to retire it. The limiters above it
// (internal/core's single-key and keyed limiters) hold the words, the clock,
// the map and the tiers; an Algorithm holds only validated parameters and is
// immutable.
//
// Algorithms whose state is one word implement WordRule, a pure function of
// the packed word (no atomics, no clock), and Word turns a WordRule into an
// Algorithm with the one CompareAndSwap loop they all share. The log and the
// rolling window have multi-word lock-free protocols of their own, proved in
// their package's documentation.
package algo

import (
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A State is one key's state: its first word and, for an algorithm wider
// than one word, the rest (Words() − 1 words). A State is a view: the
// limiter owns the words and must not copy them after first use.
type State struct {
	Word *atomic.Uint64
	Rest []atomic.Uint64
}

// An Algorithm is a validated limit of one kind. It is immutable and safe
// for concurrent use; every method that takes a State is lock-free, never
// blocks and never allocates, and a denial writes nothing.
//
// The protocol of exact eviction, which every implementation keeps: Idle
// reports a mark (what Retire compares against), when the state becomes
// idle, and the floor. The evictor first raises the limiter's floor to the
// reported floor (so that a state initialised later from it is never
// fuller than the removed one, whatever time its requests carry), then calls
// Retire(mark), which moves the state to a retired value by one
// CompareAndSwap from what Idle saw. An admission racing with it either
// lands first, so Retire fails, or meets the retired state, is denied
// without a write, and the limiter decides again on a fresh state.
type Algorithm interface {
	// Words returns the number of state words per key: 1 for the one-word
	// algorithms.
	Words() int
	// Init sets a fresh state that starts at floor (0, or floors from Idle
	// raised by Raise): it is never fuller than any state retired with a
	// floor at most floor was at its retirement.
	Init(s State, floor uint64)
	// Admits reports whether Admit would admit n at now. Loads only.
	Admits(s State, now int64, n int) bool
	// Admit decides a request for n at now and records it if admitted. It
	// returns the word it stored (a Taken's Word, for Refund). n = 0 is
	// an admitted peek that records nothing; n < 0, or n larger than the
	// algorithm can ever admit, is denied.
	Admit(s State, now int64, n int) (stored uint64, ok bool)
	// Decide is Admit with the whole decision; with peek it records nothing
	// and describes the state after the hypothetical admission.
	Decide(s State, now int64, n int, peek bool) gcra.Decision
	// Refund gives back the n of the admission taken, as far as the
	// state still counts it, reading clk after it loads the state; it never
	// creates quota (see each algorithm and Stripe). It reports whether it
	// gave anything back. An algorithm that cannot give back (the log)
	// returns false, and a Set allows it only as its last member.
	Refund(s State, taken Taken, clk Clock, n int) bool
	// Refunds reports whether the algorithm can give an admission back at
	// all (false for the log, whose ring only moves forward).
	Refunds() bool
	// Idle reports the mark for Retire, the time from which the state is
	// idle, the floor a replacement must start from, and whether the state
	// is idle at now. live is false for a retired state.
	Idle(s State, now int64) (mark Mark, from int64, floor uint64, idle, live bool)
	// Retire moves the state to its retired value if nothing was admitted
	// since Idle returned mark, and reports whether it did.
	Retire(s State, mark Mark) bool
	// IsRetired reports whether the state is retired.
	IsRetired(s State) bool
	// Quota describes the limit, for headers and logs.
	Quota() Quota
	// Compatible reports whether other may replace this algorithm on states
	// this one wrote (a tier or a key changing its limit): the same kind and
	// the same state layout.
	Compatible(other Algorithm) bool
}

// A Taker is an Algorithm that can return, with an admission's decision,
// what its Refund needs: the one-word algorithms and the rolling window.
// The log cannot give back and is not a Taker.
type Taker interface {
	// Take is Decide without peek that also returns what Refund needs,
	// the zero Taken when it stored nothing (a denial, a peek).
	Take(s State, now int64, n int) (gcra.Decision, Taken)
}

// A Mark is what Retire compares against: the word a one-word state held
// when Idle read it, or a ring's position and the slot value its next
// admission would replace.
type Mark [2]uint64

// A Quota is the root package's Quota as a rule builds it; the root
// converts it (the fields are the same, documented there).
type Quota struct {
	Kind              string
	Limit             int
	Window, IdleAfter time.Duration
	String            string
}
