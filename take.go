package atomiclimit

import (
	"context"
	"time"
	"unsafe"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// A Receipt identifies an admission that Take made, for Refund. It is
// opaque; the zero Receipt means there is nothing to give back (a denial, a
// peek, Unlimited, or a rule whose admissions cannot be given back: the
// sliding log, and bands). An in-process limiter's receipt names the state
// that admitted: Refund gives back to that state only, never to one created
// for the key after it was removed.
type Receipt struct {
	state unsafe.Pointer // in process: the cell that admitted; nil for a remote limiter
	rule  unsafe.Pointer // in process: the rule that admitted (a give-back measures by it)
	v     [4]uint64      // in process: the algo.Taken; remote: the limiter's own values
}

// RemoteReceipt returns a receipt that carries v, for a KeyedLimiter kept
// outside this module (a remote store): its Refund reads v back with
// Receipt.Remote. v must not be all zero (that is the zero Receipt).
func RemoteReceipt(v [3]uint64) Receipt { return Receipt{v: [4]uint64{v[0], v[1], v[2]}} }

// Remote returns the values of a RemoteReceipt, and false for a receipt
// of an in-process limiter (or the zero Receipt).
func (r Receipt) Remote() (v [3]uint64, ok bool) {
	return [3]uint64{r.v[0], r.v[1], r.v[2]}, r.state == nil && r.v != [4]uint64{}
}

// receiptOf returns the receipt of an admission of cell c under rule r.
func receiptOf(c *cell, r *rule, t algo.Taken) Receipt {
	if t == (algo.Taken{}) {
		return Receipt{}
	}
	return Receipt{state: unsafe.Pointer(c), rule: unsafe.Pointer(r), v: receiptWords(t)}
}

// receiptWords is what a receipt of an in-process limiter carries of t.
func receiptWords(t algo.Taken) [4]uint64 {
	return [4]uint64{t.Word, uint64(t.At), t.Epoch.Shifts, t.Epoch.Queued}
}

// taken returns what r says of an admission of cell c, and false if r is
// not a receipt of c.
func (r Receipt) taken(c *cell, cur *rule) (algo.Taken, bool) {
	if r.state != unsafe.Pointer(c) || r.rule != unsafe.Pointer(cur) {
		return algo.Taken{}, false
	}
	return algo.Taken{Word: r.v[0], At: int64(r.v[1]), Epoch: algo.Epoch{Shifts: r.v[2], Queued: r.v[3]}}, true
}

// A KeyedLimiter is any keyed limiter, in process or remote, as the doors
// take it: httplimit's middleware and grpclimit's interceptors check each
// request against one or several of them, all or nothing. *Keyed[K]
// implements it for every rule, as redislimit.Limiter does for limits kept
// in Redis; neither needs an adapter.
type KeyedLimiter[K comparable] interface {
	// Take decides a request for n at key and takes n if it is admitted;
	// n = 0 is an admitted peek that takes nothing. The receipt lets Refund
	// give an admission back (the zero Receipt: there is nothing to give
	// back).
	//
	// A non-nil error means the limiter could not decide on key's state as
	// it should have: a full limiter had no room for a new key
	// (ErrTooManyKeys: the decision's RetryAfter is when it may have), a
	// remote store failed or timed out (an outage), it refused the call or
	// held a corrupt value for key (see redislimit's error classes), or ctx
	// ended first (the caller gave up: errors.Is(err, ctx.Err()), not an
	// outage). The decision is then the limiter's own answer to that (fail
	// open, fail closed, a repaired state: see redislimit.WithOutage), and a
	// door neither advertises it as the key's state nor reports it as a
	// denial of quota; but a decision another limiter made on a state of
	// its own (a local fallback: the error wraps ErrFallback) is taken as
	// the policy's. An in-process limiter fails only with ErrTooManyKeys.
	Take(ctx context.Context, key K, n int) (gcra.Decision, Receipt, error)
	// Peek returns the decision Take would make now, taking nothing (a
	// door asks it of the policies after one that denied, to name every
	// policy violated and the longest wait). Its error is Take's.
	Peek(ctx context.Context, key K, n int) (gcra.Decision, error)
	// Refund gives back the n that an admission of key took, identified by
	// its receipt, as far as key's state still holds it, and reports whether
	// it gave anything back. Given each receipt at most once, with the n
	// given to Take, it never creates quota: the state ends as it would be
	// had the admission never been made, or stricter (see Keyed.Refund).
	Refund(ctx context.Context, key K, n int, r Receipt) (bool, error)
	// Quota describes the rule key is held to: its own tier's, if it has
	// one. It never makes a remote call.
	Quota(key K) Quota
}

// Take decides a request for n at key and takes n if it is admitted, with
// the whole decision (remaining, retry-after, reset, time to the next
// token) and the receipt Refund needs to give the admission back. n = 0 is
// an admitted peek that takes nothing; n < 0, and n above what the rule can
// ever admit, are denied and insert no key. Take is shorthand for
// TakeN(key, clock.Now(), n).
//
// It never blocks. Its only error is ErrTooManyKeys, for a new key a full
// limiter has no room for (WithMaxKeys with RejectNew): the decision is then
// a denial with Remaining 0 and, as RetryAfter and TokenAfter, the time
// until the limiter can take the key (when the first key its last search
// for room saw becomes idle, or, before any search, the longest the key's
// rule takes to become idle), gcra.Never for DenyAll. ctx is unused (remote
// limiters, which implement the same contract, use it). A key whose rule is
// Unlimited is admitted even then: it needs no state.
func (k *Keyed[K]) Take(_ context.Context, key K, n int) (d gcra.Decision, r Receipt, err error) {
	now := k.src.Now()
	if k.fast && k.hook == nil {
		// A key already held under GCRA: one lookup and the bucket's
		// CompareAndSwap, written out here so that nothing is copied twice.
		if c, ok := k.m.Load(k.hash(key)); ok {
			var t algo.Taken
			r := k.ruleOf(c)
			d, t = c.bucket().TakeN(&r.g, now, n)
			if d.Allowed {
				if t == (algo.Taken{}) { // n = 0 took nothing
					return d, Receipt{}, nil
				}
				// The receipt written out (receiptOf(c, r, t)): a tenth of
				// Take, measured, where the calls are not inlined.
				return d, Receipt{state: unsafe.Pointer(c), rule: unsafe.Pointer(r), v: receiptWords(t)}, nil
			}
			// A retired bucket denies everything, a bucket far ahead may be
			// one to forget, and a coarse reading may lag: only those
			// denials take the path below.
			if !k.src.IsCoarse() && !k.cells.suspect(c, r, now) {
				return d, Receipt{}, nil
			}
		}
	}
	d, r, full := k.take(key, now, n)
	if !d.Allowed && k.src.IsCoarse() {
		if t, later := k.src.Recheck(now); later {
			d, r, full = k.take(key, t, n) // see allowFresh
		}
	}
	return k.taken(n, d, r, full)
}

// takeInto is Take into o, with the quota key is held to (Quota(key)) as
// the decision found it: a Stack describes each decision (a door's
// RateLimit fields need both), and for a key already held under GCRA the
// quota comes from the decision's own lookup, not a second one (with
// tiers, Quota looks the key up). The results go straight into o's
// Decision, Receipt and Quota: each copy of them shows in the cost of a
// stacked policy.
func (k *Keyed[K]) takeInto(ctx context.Context, key K, n int, o *Outcome) (err error) {
	if k.fast && k.hook == nil {
		// Take's fast path, keeping the rule that decided.
		now := k.src.Now()
		if c, ok := k.m.Load(k.hash(key)); ok {
			r := k.ruleOf(c)
			d, t := c.bucket().TakeN(&r.g, now, n)
			switch {
			case d.Allowed && t != (algo.Taken{}):
				o.Decision, o.Quota = d, r.q
				o.Receipt = Receipt{state: unsafe.Pointer(c), rule: unsafe.Pointer(r), v: receiptWords(t)}
				return nil
			case d.Allowed, !k.src.IsCoarse() && !k.cells.suspect(c, r, now):
				// n = 0 took nothing, or a denial Take would not look at
				// again (see Take).
				o.Decision, o.Receipt, o.Quota = d, Receipt{}, r.q
				return nil
			}
		}
	}
	// A new key, a retired one, a coarse reading's denial, a hook, a rule
	// other than GCRA: Take's own path, then the quota.
	o.Decision, o.Receipt, err = k.Take(ctx, key, n)
	o.Quota = k.Quota(key)
	return err
}

// TakeN is Take at the given time.
func (k *Keyed[K]) TakeN(key K, now time.Time, n int) (gcra.Decision, Receipt, error) {
	d, r, full := k.take(key, k.cells.stamp(now), n)
	return k.taken(n, d, r, full)
}

// taken reports a decision to the hook and returns it with its error.
func (k *Keyed[K]) taken(n int, d gcra.Decision, r Receipt, full bool) (gcra.Decision, Receipt, error) {
	if k.hook != nil {
		k.reportDecision(n, d, full)
	}
	if full {
		return d, r, ErrTooManyKeys
	}
	return d, r, nil
}

// Peek returns the decision Take(ctx, key, n) would make now, taking
// nothing and creating no key; Peek(ctx, key, 0) describes the key as it
// is. For a key the limiter does not hold it answers as for a new key; if
// the limiter is full and finds no room, the Take that follows refuses it.
// It allocates nothing, except for a key it does not hold under a rule
// wider than one word (the log, the rolling window, bands): then it decides
// on a fresh state of that many words, dropped after. It never fails: ctx is
// unused and the error is always nil. Peek is shorthand for PeekN(key,
// clock.Now(), n).
func (k *Keyed[K]) Peek(_ context.Context, key K, n int) (gcra.Decision, error) {
	return k.peek(key, k.src.Now(), n), nil
}

// PeekN is Peek at the given time.
func (k *Keyed[K]) PeekN(key K, now time.Time, n int) gcra.Decision {
	return k.peek(key, k.cells.stamp(now), n)
}

// take is Take on any path: a key absent or retired, any rule. full says
// the decision is a full limiter's refusal.
func (k *Keyed[K]) take(key K, now int64, n int) (gcra.Decision, Receipt, bool) {
	for {
		c, d, full := k.cellFor(key, now, n)
		if c == nil {
			return d, Receipt{}, full
		}
		r := k.cells.rule(c)
		var t algo.Taken
		if k.fast {
			d, t = c.bucket().TakeN(&r.g, now, n)
		} else {
			d, t = r.set.Take(k.cells.state(c), now, n)
		}
		if d.Allowed || k.settled(c, r, now) {
			return d, receiptOf(c, r, t), false
		}
	}
}

// Refund gives back the n taken by the admission of key that returned r,
// as far as key's state still holds it, and reports whether it gave
// anything back. It never creates quota: the state ends as it would be had
// the admission never been made, or stricter (a window gives back its
// count exactly; a GCRA bucket everything still ahead of now when nothing
// else happened since the admission, and never what a later reservation
// depends on: see atomicbucket.Bucket.Refund). It gives back nothing for a key removed or
// replaced meanwhile (the receipt names the state that admitted), once the
// window the admission was counted in has passed, or for the zero Receipt.
// It also gives back nothing once the key's rule has changed (SetRule,
// SetKeyRule, a tier's): the new rule could measure the admission as more
// than it took.
//
// Give each receipt back at most once, with the n given to Take: a second
// give-back of the same receipt could return what a later admission took.
// The give-back reads the limiter's clock (the precise one under
// WithCoarseClock), which must not read earlier than the time of any
// decision since the admission: an injected clock that goes back, or a
// TakeN stamped ahead of it, could make it generous, as Reservation.CancelAt
// says. Give-backs wait for each other on a lock that keys share by their
// address (never for decisions); ctx is unused and the error is always nil.
func (k *Keyed[K]) Refund(_ context.Context, key K, n int, r Receipt) (bool, error) {
	if r.state == nil || n < 1 {
		return false, nil
	}
	c, ok := k.m.Load(k.hash(key))
	if !ok {
		return false, nil // removed: it was idle, so it held nothing of the admission
	}
	cur := k.cells.rule(c)
	t, ok := r.taken(c, cur)
	if !ok {
		// Another state (the key was replaced, or another limiter's
		// receipt), or another rule: a give-back measured by a rule
		// other than the one that took could return more than was taken.
		return false, nil
	}
	back := cur.set.RefundTaken(k.cells.state(c), t, n)
	if back {
		k.gaveBack(c)
	}
	return back, nil
}

// gaveBack tells the store that c was given something back: the key may be
// idle sooner than its last admission said, and a full limiter looking for
// room must look at it again.
func (k *Keyed[K]) gaveBack(c *cell) {
	if from, live := k.cells.IdleFrom(c); live {
		k.st.GaveBack(from)
	}
}
