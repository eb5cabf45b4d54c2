package algo

import (
	"sync/atomic"
	"unsafe"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A Bucket is a GCRA bucket whose whole state is one atomic word, the TAT:
// AdmitWord's loop specialised to gcra.Params, which the limiters' fast
// paths inline and atomicbucket publishes. It decides as Word(&GCRA{p})
// does (TestBucketDecidesAsWord), without its dynamic calls.
//
// Its word: bits 63..0 hold TAT ≥ 0 as an int64, always < 2^63 (gcra keeps
// every stored TAT at most MaxNow + MaxSpan + MaxWait = 2^62 + 2^60), or
// RetiredTAT once a keyed map has removed the bucket. TAT ≤ now means full;
// 0 is full. A Bucket must not be copied after first use.
type Bucket struct {
	tat atomic.Uint64
}

// BucketOf returns the bucket whose state is the word w: the same memory.
func BucketOf(w *atomic.Uint64) *Bucket { return (*Bucket)(unsafe.Pointer(w)) }

// AllowN reports whether n tokens are admitted at now under p, and takes
// them if so.
func (b *Bucket) AllowN(p *gcra.Params, now int64, n int) bool {
	if p.IsUnlimited() {
		return n >= 0 // Unlimited writes nothing
	}
	if ok, settled := b.TryAllowN(p, now, n); settled {
		return ok
	}
	return b.allowContended(p, now, n)
}

// TryAllowN is AllowN's first attempt, small enough to inline into its
// caller: one load, one decision and, for an admission, one
// CompareAndSwap. settled is false only when that CompareAndSwap lost a
// race; the caller then calls AllowN, which decides again. The caller
// handles Unlimited first (TryAllowN would store max(TAT, now)).
func (b *Bucket) TryAllowN(p *gcra.Params, now int64, n int) (ok, settled bool) {
	old := b.tat.Load()
	next, ok := p.Admit(int64(old), now, n)
	if uint64(next) == old {
		// A denial, or n = 0 (a peek): Admit returned the state as it was,
		// and there is nothing to store (a CompareAndSwap of the same value
		// would still be a write). An admission of n ≥ 1 always moves TAT by
		// at least T ≥ 1, so this one compare tells them apart.
		return ok, true
	}
	// The CompareAndSwap is the admission's linearisation point; on success
	// it synchronizes before every later load of the word.
	return true, b.tat.CompareAndSwap(old, uint64(next))
}

// allowContended is AllowN after a lost CompareAndSwap, kept out of line.
func (b *Bucket) allowContended(p *gcra.Params, now int64, n int) bool {
	for {
		// Another admission stored a larger TAT since our load. Decide again
		// against it: Admit uses max(TAT, now), so a now that has become
		// stale meanwhile can only make the retry stricter, never rewind TAT.
		old := b.tat.Load()
		next, ok := p.Admit(int64(old), now, n)
		if uint64(next) == old {
			return ok // a denial, or n = 0: nothing to store (see AllowN)
		}
		if b.tat.CompareAndSwap(old, uint64(next)) {
			return true
		}
	}
}

// TakeN is AllowN with the whole decision (remaining, retry-after, reset),
// and what Refund needs to give the admission back: the zero Taken if it
// stored nothing.
func (b *Bucket) TakeN(p *gcra.Params, now int64, n int) (gcra.Decision, Taken) {
	// First the stripe's counters, then the decision (see Stripe).
	ep := StripeOf(&b.tat).Epoch()
	// The common case first: an admission whose first CompareAndSwap wins,
	// decided by Admit (which inlines), then described from the state it
	// stored; p.Decide's admitted decision is exactly State(next) with
	// Allowed set. Unlimited stores nothing and takes the loop.
	old := b.tat.Load()
	if next, ok := p.Admit(int64(old), now, n); ok && uint64(next) != old && !p.IsUnlimited() &&
		b.tat.CompareAndSwap(old, uint64(next)) {
		d := p.State(next, now)
		d.Allowed = true
		return d, Taken{Word: uint64(next), At: now, Epoch: ep}
	}
	d, next := b.takeLoop(p, now, n)
	if next == 0 {
		return d, Taken{}
	}
	return d, Taken{Word: uint64(next), At: now, Epoch: ep}
}

// takeLoop is TakeN after its first attempt: a denial, a peek, Unlimited,
// or a lost race. It returns the TAT it stored, or 0.
func (b *Bucket) takeLoop(p *gcra.Params, now int64, n int) (gcra.Decision, int64) {
	for {
		old := b.tat.Load()
		next, d := p.Decide(int64(old), now, n)
		// Denials, peeks (n = 0) and Unlimited store nothing.
		if !d.Allowed || n == 0 || p.IsUnlimited() {
			return d, 0
		}
		// The CompareAndSwap is the admission's linearisation point.
		if b.tat.CompareAndSwap(old, uint64(next)) {
			return d, next
		}
		// Lost the race: decide again against the winner's state.
	}
}

// PeekN returns the decision TakeN would make, taking nothing; PeekN(p,
// now, 0) describes the bucket as it is.
func (b *Bucket) PeekN(p *gcra.Params, now int64, n int) gcra.Decision {
	_, d := p.Decide(int64(b.tat.Load()), now, n)
	return d
}

// ReserveN admits n tokens if they are available within maxWait ns of now,
// and returns what Refund needs and the wait before the tokens are due.
// When it denies, wait is what the request would have needed, gcra.Never if
// n can never be admitted. A reservation that queues first raises *reach
// (if not nil) to B·T + its wait: how far ahead of the time it is decided
// at the state it stores becomes idle.
func (b *Bucket) ReserveN(p *gcra.Params, now int64, n int, maxWait int64, reach *atomic.Int64) (t Taken, wait int64, ok bool) {
	s := StripeOf(&b.tat)
	ep := s.Epoch() // first the counters (see Stripe)
	counted := false
	for {
		old := b.tat.Load()
		next, wait, ok := p.Reserve(int64(old), now, n, maxWait)
		if !ok || n == 0 || p.IsUnlimited() {
			return Taken{}, wait, ok
		}
		if wait > 0 {
			if !counted {
				// A reservation that queues counts itself before its store,
				// so that a give-back that loads a state holding it knows
				// (Stripe). A retry only waits longer: it counts once.
				s.Queue()
				ep.Queued++
				counted = true
			}
			if reach != nil {
				// Before the store too, at every attempt: a retry's state
				// is idle later.
				Raise(reach, int64(p.Span())+wait)
			}
		}
		if b.tat.CompareAndSwap(old, uint64(next)) {
			return Taken{Word: uint64(next), At: now, Epoch: ep}, wait, true
		}
	}
}

// Refund gives back the n tokens of the admission t (TakeN's or
// ReserveN's) as gcra.Params.Refund computes it, reading clk after it
// loads the state, and reports whether it gave anything back (see
// RefundLoop).
func (b *Bucket) Refund(p *gcra.Params, t Taken, n int, clk Clock) bool {
	return RefundLoop(&b.tat, t, clk, func(old uint64, now int64, since gcra.Since) (uint64, bool, bool) {
		back, shifts, ok := p.Refund(int64(old), now, int64(t.Word), t.At, n, since)
		return uint64(back), shifts, ok
	})
}

// Load returns the bucket's TAT (RetiredTAT once retired).
func (b *Bucket) Load() int64 { return int64(b.tat.Load()) }
