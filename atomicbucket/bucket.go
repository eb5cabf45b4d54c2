// Package atomicbucket is the cell every limiter of this module is built on:
// a GCRA bucket whose whole state is one atomic word, the theoretical arrival
// time, updated by one CompareAndSwap loop. The parameters live outside it,
// so one gcra.Params serves any number of buckets and a Bucket costs 8
// bytes; the zero Bucket is a full bucket.
//
// Use it to build a limiter of your own (a bucket per connection, per
// struct, in an array). The limiters themselves, single-key and keyed, for
// GCRA and every other algorithm, are in package atomiclimit, whose keyed
// limiter keeps one of these words per key.
//
// Times are nanoseconds on the caller's own time base, converted by
// gcra.Nanos: every now must lie in [0, gcra.MaxNow], which Nanos ensures
// (the arithmetic does not check it again on the hot path; a larger now
// could overflow it). Every method takes the time and the count, as
// x/time/rate's AllowN(t, n) does:
//
//	AllowN(p, now, n)   admitted?  (TryAllowN: its first attempt, to inline)
//	TakeN(p, now, n)    the whole decision, and what Refund needs
//	PeekN(p, now, n)    what TakeN would decide, taking nothing
//	ReserveN(p, now, n, maxWait)  tokens due within maxWait (pacing)
//	Refund(p, t, n, now)          gives back what TakeN or ReserveN took
//
// A denied request writes nothing: a flood of denials only loads the word
// and leaves its cache line shared. A stale or backward now can only make a
// decision stricter: the stored time never moves back, but for a Refund.
package atomicbucket

import (
	"sync/atomic"
	"unsafe"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// A Bucket is a GCRA rate limiter whose whole state is one atomic word: the
// theoretical arrival time (TAT) in nanoseconds on its owner's time base.
//
// The zero Bucket is a full bucket, ready to use. A Bucket is safe for
// concurrent use; AllowN, TakeN, PeekN and ReserveN never block or
// allocate (Refund waits only for another Refund of the same bucket). A
// Bucket must not be copied after first use (atomic.Uint64 carries noCopy
// and align64, so it is also aligned on 32-bit platforms). In Go
// memory-model terms, an admission (a successful CompareAndSwap)
// synchronizes before every later call that observes the state it stored.
type Bucket struct {
	// tat: bits 63..0 hold TAT ≥ 0 as an int64, always < 2^63 (gcra keeps
	// every stored TAT at most MaxNow + MaxSpan + MaxWait = 2^62 + 2^60), or
	// a keyed map's retired value once it has removed the bucket. TAT ≤ now
	// means full; 0 is full.
	tat atomic.Uint64
}

// Of returns the bucket whose state is the word w: a word kept in a
// structure of the caller's, such as a keyed map's cell. It is the same
// memory, not a copy.
func Of(w *atomic.Uint64) *Bucket { return (*Bucket)(unsafe.Pointer(w)) }

// A Taken is what an admission of TakeN or ReserveN leaves for Refund: the
// state it stored, the time it was decided at, and the give-back epoch of
// the bucket's stripe, read before it was decided. The zero Taken gives
// back nothing.
type Taken struct {
	TAT   int64
	At    int64
	Epoch uint64
}

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
	// First the epoch, then the decision (see Refund).
	ep := algo.StripeOf(&b.tat).Epoch()
	// The common case first: an admission whose first CompareAndSwap wins,
	// decided by Admit (which inlines), then described from the state it
	// stored; p.Decide's admitted decision is exactly State(next) with
	// Allowed set. Unlimited stores nothing and takes the loop.
	old := b.tat.Load()
	if next, ok := p.Admit(int64(old), now, n); ok && uint64(next) != old && !p.IsUnlimited() &&
		b.tat.CompareAndSwap(old, uint64(next)) {
		d := p.State(next, now)
		d.Allowed = true
		return d, Taken{TAT: next, At: now, Epoch: ep}
	}
	d, next := b.takeLoop(p, now, n)
	if next == 0 {
		return d, Taken{}
	}
	return d, Taken{TAT: next, At: now, Epoch: ep}
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
// n can never be admitted.
func (b *Bucket) ReserveN(p *gcra.Params, now int64, n int, maxWait int64) (t Taken, wait int64, ok bool) {
	ep := algo.StripeOf(&b.tat).Epoch() // first the epoch (see Refund)
	for {
		old := b.tat.Load()
		next, wait, ok := p.Reserve(int64(old), now, n, maxWait)
		if !ok || n == 0 || p.IsUnlimited() {
			return Taken{}, wait, ok
		}
		if b.tat.CompareAndSwap(old, uint64(next)) {
			return Taken{TAT: next, At: now, Epoch: ep}, wait, true
		}
	}
}

// Refund gives back the n tokens of the admission t (TakeN's or
// ReserveN's), as far as the bucket still holds them, and reports whether
// it gave anything back. now returns the time on the bucket's time base; it
// is read after the state is loaded. Everything still ahead of that time
// comes back if no other give-back of the bucket happened since the
// admission; otherwise the part certainly its own. It never gives back more
// than the admission took from the bucket as it would be without it, under
// any interleaving (see gcra.Params.Refund for the proof), provided that now
// reads no earlier than every decision on the bucket since the admission
// (a clock that goes back, or a decision stamped ahead of it, breaks the
// proof) and that t is given back once, with its own n.
//
// Refunds of one bucket wait for each other, as do those of buckets that
// share its stripe (a lock per stripe of buckets, chosen by address, which
// decisions never take): a lock-free Refund could act on a state that went
// down (another Refund) and back up to the same value (an admission stamped
// after its clock read), with a stale time.
func (b *Bucket) Refund(p *gcra.Params, t Taken, n int, now func() int64) bool {
	taken := algo.Taken{Word: uint64(t.TAT), At: t.At, Epoch: t.Epoch}
	return algo.RefundLoop(&b.tat, taken, funcClock(now), func(old uint64, now int64, alone bool) (uint64, bool, bool) {
		back, shifts, ok := p.Refund(int64(old), now, t.TAT, t.At, n, alone)
		return uint64(back), shifts, ok
	})
}

// funcClock is a function as an algo.Clock.
type funcClock func() int64

func (f funcClock) Now() int64 { return f() }

// cacheLine is the size the padding assumes: 64 bytes on amd64 and most arm64
// cores. (xsync and the runtime use the same figure.)
const cacheLine = 64

// A PaddedBucket is a Bucket alone on a cache line, for a single limiter hit
// from many cores: writes to neighbouring memory never invalidate its line,
// and its writes never slow its neighbours (false sharing). Its size is
// exactly one cache line, which a test asserts.
type PaddedBucket struct {
	Bucket
	//lint:ignore U1000 prevents false sharing with the next object
	_ [cacheLine - 8]byte
}
