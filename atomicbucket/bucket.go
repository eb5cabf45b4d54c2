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
//	AllowN(p, now, n)   admitted?
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
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// A Bucket is a GCRA rate limiter whose whole state is one atomic word: the
// theoretical arrival time (TAT) in nanoseconds on its owner's time base.
//
// The zero Bucket is a full bucket, ready to use. A Bucket is safe for
// concurrent use; AllowN, TakeN, PeekN and ReserveN never block or
// allocate (Refund waits only for another Refund of the same bucket). A
// Bucket must not be copied after first use (its atomic.Uint64 carries
// noCopy and align64, so it is also aligned on 32-bit platforms). In Go
// memory-model terms, an admission (a successful CompareAndSwap)
// synchronizes before every later call that observes the state it stored.
//
// Its loops are the ones the limiters of package atomiclimit run on their
// GCRA keys: the same code, not a copy.
type Bucket struct {
	b algo.Bucket // TAT ≥ 0 (< 2^63); TAT ≤ now means full; 0 is full
}

// A Taken is what an admission of TakeN or ReserveN leaves for Refund: the
// state it stored, the time it was decided at, and what the give-back needs
// to know of what happened since. The zero Taken gives back nothing.
type Taken struct{ t algo.Taken }

// AllowN reports whether n tokens are admitted at now under p, and takes
// them if so.
func (b *Bucket) AllowN(p *gcra.Params, now int64, n int) bool { return b.b.AllowN(p, now, n) }

// TakeN is AllowN with the whole decision (remaining, retry-after, reset),
// and what Refund needs to give the admission back: the zero Taken if it
// stored nothing.
func (b *Bucket) TakeN(p *gcra.Params, now int64, n int) (gcra.Decision, Taken) {
	d, t := b.b.TakeN(p, now, n)
	return d, Taken{t}
}

// PeekN returns the decision TakeN would make, taking nothing; PeekN(p,
// now, 0) describes the bucket as it is.
func (b *Bucket) PeekN(p *gcra.Params, now int64, n int) gcra.Decision { return b.b.PeekN(p, now, n) }

// ReserveN admits n tokens if they are available within maxWait ns of now,
// and returns what Refund needs and the wait before the tokens are due.
// When it denies, wait is what the request would have needed, gcra.Never if
// n can never be admitted.
func (b *Bucket) ReserveN(p *gcra.Params, now int64, n int, maxWait int64) (t Taken, wait int64, ok bool) {
	at, wait, ok := b.b.ReserveN(p, now, n, maxWait, nil)
	return Taken{at}, wait, ok
}

// Refund gives back the n tokens of the admission t (TakeN's or
// ReserveN's), as far as the bucket still holds them and no later
// admission depends on them, and reports whether it gave anything back.
// now returns the time on the bucket's time base; it is read after the
// state is loaded. Everything still ahead of that time comes back if
// nothing else was given back since the admission and no later admission
// depends on it; behind later reservations, only what none of them depends
// on (x/time/rate's rule), so that they keep the times they were promised
// and no instant ever has more than B tokens due. It never gives back more
// than that, under any interleaving (see gcra.Params.Refund for the
// proof), provided that now reads no earlier than every decision on the
// bucket since the admission (a clock that goes back, or a decision stamped
// ahead of it, breaks the proof) and that t is given back once, with its
// own n.
//
// Refunds of one bucket wait for each other, as do those of buckets that
// share its stripe (a lock per stripe of buckets, chosen by address, which
// decisions never take): a lock-free Refund could act on a state that went
// down (another Refund) and back up to the same value (an admission stamped
// after its clock read), with a stale time.
func (b *Bucket) Refund(p *gcra.Params, t Taken, n int, now func() int64) bool {
	return b.b.Refund(p, t.t, n, funcClock(now))
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
