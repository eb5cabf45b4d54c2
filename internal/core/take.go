package core

import (
	"context"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A Receipt identifies an admission that Take made, for Refund: the state
// word the admission stored. It is opaque; 0 means there is nothing to give
// back (a denial, a peek, Unlimited, or a rule whose admissions cannot be
// given back: the sliding log, and bands).
type Receipt uint64

// A KeyedLimiter is any keyed limiter, in process or remote, as the doors
// take it: httplimit's middleware checks each request against one or
// several of them, and gives back what the others took when one denies.
// *Keyed[K] implements it for every rule, as redisgcra.Limiter does for
// limits kept in Redis. The root package exports it as
// atomiclimit.KeyedLimiter; internal/door, below the root, uses it here.
type KeyedLimiter[K comparable] interface {
	// Take decides a request for n at key and takes n if it is admitted;
	// n = 0 is an admitted peek that takes nothing. The receipt lets Refund
	// give an admission back (0: there is nothing to give back).
	//
	// A non-nil error means the limiter could not decide on key's state as
	// it should have: a remote store failed or timed out (an outage), it
	// refused the call or held a corrupt value for key (see redisgcra's
	// error classes), or ctx ended first (the caller gave up:
	// errors.Is(err, ctx.Err()), not an outage). The decision is then the
	// limiter's own answer to that (fail open, fail closed, a local
	// fallback, a repaired state: see redisgcra.WithOutage), and a door
	// neither advertises it as the key's state nor reports it as a denial
	// of quota. An in-process limiter never fails.
	Take(ctx context.Context, key K, n int) (gcra.Decision, Receipt, error)
	// Check returns the decision Take would make now, taking nothing (a
	// door asks it of the policies after one that denied, to name every
	// policy violated and the longest wait). Its error is Take's.
	Check(ctx context.Context, key K, n int) (gcra.Decision, error)
	// Refund gives back the n that an admission of key took, identified by
	// its receipt, if key's state still counts it, and reports whether it
	// did. It never creates quota: once something else was admitted on key
	// (or the admission's window has passed), it gives back nothing. (One
	// exception, in process: a rule changed between Take and Refund, by
	// SetRule or SetKeyRule, measures the refund by the new rule, so a
	// GCRA refund under a slower new rate gives back more time than was
	// taken. A door refunds within one request, microseconds after Take.)
	Refund(ctx context.Context, key K, n int, r Receipt) (bool, error)
	// Quota describes the rule key is held to: its own tier's, if it has
	// one. It never makes a remote call.
	Quota(key K) Quota
}

// Take decides a request for n at key and takes n if it is admitted, as
// Decide does, and returns the receipt Refund needs to give the admission
// back. n = 0 is an admitted peek. It never blocks and never fails: ctx is
// unused and the error is always nil (remote limiters, which implement the
// same contract, use both).
func (k *Keyed[K]) Take(_ context.Context, key K, n int) (d gcra.Decision, r Receipt, err error) {
	now := k.src.Now()
	if k.fast && k.hook == nil {
		// A key already held under GCRA: one lookup and the bucket's
		// CompareAndSwap, written out here so that nothing is copied twice.
		if c, ok := k.m.Load(key); ok {
			var next int64
			d, next = c.TakeN(&k.ruleOf(c).g, now, n)
			// A retired bucket denies everything: only a denial needs the check.
			if d.Allowed || !k.cells.IsRetired(c) {
				return d, Receipt(next), nil
			}
		}
	}
	var stored uint64
	d, stored = k.take(key, now, n)
	if k.hook != nil {
		k.reportDecision(n, d)
	}
	return d, Receipt(stored), nil
}

// Check returns the decision Take(ctx, key, n) would make now, taking
// nothing: Peek in the contract's form. It never fails; ctx is unused.
func (k *Keyed[K]) Check(_ context.Context, key K, n int) (gcra.Decision, error) {
	return k.peek(key, k.src.Now(), n), nil
}

// take is Take on any path: a key absent or retired, any rule.
func (k *Keyed[K]) take(key K, now int64, n int) (gcra.Decision, uint64) {
	for {
		c, d := k.cellFor(key, now, n)
		if c == nil {
			return d, 0
		}
		r := c.rule()
		var stored uint64
		if k.fast {
			var next int64
			d, next = c.TakeN(&r.g, now, n)
			stored = uint64(next)
		} else {
			d, stored = r.set.Take(k.cells.state(c), now, n)
		}
		if d.Allowed || !k.cells.IsRetired(c) {
			return d, stored
		}
	}
}

// Refund gives back the n taken by the admission of key that returned r,
// if key's state still counts it, and reports whether it did. A refund never
// creates quota: it gives back nothing once something else has been
// admitted on key since (under GCRA the later admissions were placed after
// this one; refund in the reverse order of Take to give back several), nor
// once the window the admission was counted in has passed, nor for a key
// removed meanwhile. A receipt of 0 gives back nothing. n must be the n
// given to Take. A rule changed since Take (SetRule, SetKeyRule) measures
// the refund by the new rule. It never blocks and never fails: ctx is unused
// and the error is always nil.
func (k *Keyed[K]) Refund(_ context.Context, key K, n int, r Receipt) (bool, error) {
	return k.refund(key, k.src.Now(), n, uint64(r)), nil
}

func (k *Keyed[K]) refund(key K, now int64, n int, stored uint64) bool {
	if stored == 0 || n < 1 {
		return false
	}
	c, ok := k.m.Load(key)
	if !ok {
		return false // removed: it was idle, so it counted nothing
	}
	r := c.rule()
	if k.fast {
		return c.Refund(&r.g, now, int64(stored), n)
	}
	return r.set.RefundTaken(k.cells.state(c), stored, now, n)
}
