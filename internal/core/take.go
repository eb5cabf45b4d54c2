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
			d, next = c.TakeN(&c.rule().g, now, n)
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
