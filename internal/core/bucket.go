package core

import (
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// A Bucket is a GCRA rate limiter whose whole state is one atomic word: the
// theoretical arrival time (TAT) in nanoseconds since its owner's epoch. The
// parameters live outside it, so one gcra.Params serves any number of
// buckets and a Bucket costs 8 bytes.
//
// The zero Bucket is a full bucket, ready to use. A Bucket is safe for
// concurrent use; its methods never block or allocate. A Bucket must not be
// copied after first use (atomic.Uint64 carries noCopy and align64, so it is
// also aligned on 32-bit platforms).
//
// A denied request writes nothing: a flood of denials only loads the word and
// leaves its cache line shared. In Go memory-model terms, an admission (a
// successful CompareAndSwap) synchronizes before every later call that
// observes the state it stored.
type Bucket struct {
	// tat: bits 63..0 hold TAT ≥ 0 as an int64, always < 2^63 (gcra keeps
	// every stored TAT at most MaxNow + MaxSpan + MaxWait = 2^62 + 2^60), or
	// algo.RetiredTAT (5.5·2^60) once a keyed map has removed the bucket.
	// TAT ≤ now means full; 0 is full.
	tat atomic.Uint64
}

// AllowN reports whether n tokens are admitted at now (nanoseconds from
// gcra.Nanos) under p, and consumes them if so.
func (b *Bucket) AllowN(p *gcra.Params, now int64, n int) bool {
	if p.IsUnlimited() {
		return n >= 0 // Unlimited writes nothing
	}
	if ok, settled := b.tryAllowN(p, now, n); settled {
		return ok
	}
	return b.allowContended(p, now, n)
}

// tryAllowN is one attempt of AllowN: one load, one decision and, for an
// admission, one CompareAndSwap. It is small enough to inline into callers.
// The caller handles Unlimited first (it would store max(TAT, now)).
// settled is false only when the CompareAndSwap lost a race; the caller then
// continues with allowContended.
func (b *Bucket) tryAllowN(p *gcra.Params, now int64, n int) (ok, settled bool) {
	old := b.tat.Load()
	next, ok := p.Admit(int64(old), now, n)
	if uint64(next) == old {
		// A denial, or n = 0 (a peek): Admit returned the state as it was,
		// and there is nothing to store (a CompareAndSwap of the same value
		// would still be a write). An admission of n ≥ 1 always moves TAT by
		// at least T ≥ 1, so this one compare tells them apart.
		return ok, true
	}
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
			return ok // a denial, or n = 0: nothing to store (see tryAllowN)
		}
		if b.tat.CompareAndSwap(old, uint64(next)) {
			return true
		}
	}
}

// DecideN is AllowN with the whole decision (remaining, retry-after, reset).
func (b *Bucket) DecideN(p *gcra.Params, now int64, n int) gcra.Decision {
	d, _ := b.decideN(p, now, n)
	return d
}

// TakeN is DecideN that also returns what GiveBack needs to give the
// admission back: the TAT it stored, its time and the give-back epoch; the
// zero Taken if it stored nothing.
func (b *Bucket) TakeN(p *gcra.Params, now int64, n int) (gcra.Decision, algo.Taken) {
	// First the epoch, then the decision (see algo.Stripe).
	ep := algo.StripeOf(&b.tat).Epoch()
	d, next := b.decideN(p, now, n)
	if next == 0 {
		return d, algo.Taken{}
	}
	return d, algo.Taken{Word: uint64(next), At: now, Epoch: ep}
}

// decideN is DecideN that also returns the TAT it stored, or 0.
func (b *Bucket) decideN(p *gcra.Params, now int64, n int) (gcra.Decision, int64) {
	// The common case first: an admission whose first CompareAndSwap wins,
	// decided by Admit (which inlines), then described from the state it
	// stored; p.Decide's admitted decision is exactly State(next) with
	// Allowed set. Unlimited stores nothing and takes the loop.
	old := b.tat.Load()
	if next, ok := p.Admit(int64(old), now, n); ok && uint64(next) != old && !p.IsUnlimited() &&
		b.tat.CompareAndSwap(old, uint64(next)) {
		d := p.State(next, now)
		d.Allowed = true
		return d, next
	}
	return b.takeLoop(p, now, n)
}

// takeLoop is TakeN after its first attempt: a denial, a peek, Unlimited,
// or a lost race.
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

// PeekN returns the decision AllowN would make, without consuming anything.
func (b *Bucket) PeekN(p *gcra.Params, now int64, n int) gcra.Decision {
	_, d := p.Decide(int64(b.tat.Load()), now, n)
	return d
}

// State describes the bucket at now without a request (tokens available,
// time until full, time until the next token).
func (b *Bucket) State(p *gcra.Params, now int64) gcra.Decision {
	return p.State(int64(b.tat.Load()), now)
}

// ReserveN admits n tokens if they are available within maxWait ns, and
// returns the state it stored (needed to refund) and the wait before the
// tokens are due. When it denies, wait is what the request would have
// needed, gcra.Never if n can never be admitted.
func (b *Bucket) ReserveN(p *gcra.Params, now int64, n int, maxWait int64) (next, wait int64, ok bool) {
	for {
		old := b.tat.Load()
		next, wait, ok = p.Reserve(int64(old), now, n, maxWait)
		if !ok || n == 0 || p.IsUnlimited() || b.tat.CompareAndSwap(old, uint64(next)) {
			return next, wait, ok
		}
	}
}

// GiveBack gives back the n tokens of the admission taken (TakeN's, or a
// reservation's), as far as the bucket still holds them, reading clk after
// it loads the state: everything still ahead of that time if nothing else
// happened since, and never more than the admission took from the bucket
// as it would be without it (see gcra.Params.GiveBack). Give-backs of one
// bucket wait for each other (algo.Stripe); decisions never wait. It
// reports whether it gave anything back.
func (b *Bucket) GiveBack(p *gcra.Params, clk algo.Clock, taken algo.Taken, n int) bool {
	return algo.GiveBackLoop(&b.tat, taken, clk, func(old uint64, now int64, alone bool) (uint64, bool, bool) {
		back, shifts, ok := p.GiveBack(int64(old), now, int64(taken.Word), taken.At, n, alone)
		return uint64(back), shifts, ok
	})
}

// TAT returns the stored theoretical arrival time (ns since the epoch), or
// algo.RetiredTAT.
func (b *Bucket) TAT() int64 { return int64(b.tat.Load()) }

// IsRetired reports whether the bucket has been retired.
func (b *Bucket) IsRetired() bool { return int64(b.tat.Load()) == algo.RetiredTAT }

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
