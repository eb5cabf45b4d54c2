package grpclimit

import (
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/internal/door"
	"github.com/atomiclimit/atomiclimit/internal/ratefields"
	"google.golang.org/grpc/metadata"
)

// A stack is a door.Stack and the denials of its calls that were built and
// kept (denials): a denial of a stack of one policy is the same value for
// every call with the same quota, wait and remaining quota, so it is built
// once and shared, not built per call.
//
// It could move to internal/door, for httplimit's 429s, as a cache of the
// field values of a denial; the status it keeps is gRPC's own.
type stack[K comparable] struct {
	*door.Stack[K]
	den denials
}

// newStack returns s with an empty denial cache, or nil for a nil s.
func newStack[K comparable](s *door.Stack[K]) *stack[K] {
	if s == nil {
		return nil
	}
	return &stack[K]{Stack: s}
}

// base returns s's door.Stack, nil for a nil s.
func (s *stack[K]) base() *door.Stack[K] {
	if s == nil {
		return nil
	}
	return s.Stack
}

// A denial is what a denied call of a stack of one policy carries: the
// error it fails with and the values of its response metadata. It never
// changes once built, and is shared by every call that has its key: the
// error (a *limitError whose *status.Status nobody mutates; status.Status
// has no mutators, and Proto and Details return copies) and the strings
// alike.
type denial struct {
	denialKey
	err error
	// rl and pol are the "ratelimit" and "ratelimit-policy" values, each
	// a slice of one with len == cap, so that an append to one copies; ""
	// (nil) when the denial sends none.
	rl, pol []string
}

// A denialKey is everything a denial of a stack of one policy depends on:
// the policy's fields (the quota of the call's key: its name, q, w and
// description), the RetryInfo delay in milliseconds (-1: none, the call's
// cost exceeds the quota), and the RateLimit item's r and t (in seconds;
// 0: none), item false when the outcome describes no state.
type denialKey struct {
	f    *ratefields.Fields
	ms   int64
	r    int
	t    int64
	item bool
}

// denialSlots bounds the waits whose denials are kept per slot: a wait of
// up to denialSlots-1 ms, rounded up to the millisecond as RetryInfo is,
// has a slot of its own (slot 0: a call that is never admitted). A denial
// with a longer wait is kept only as the stack's last one: one client held
// to a long window is denied with the same wait, to the millisecond, by
// many calls in a row, and a fresh one is built each millisecond.
const denialSlots = 1024

// maxKeptDenials bounds the denials a stack keeps in its slots (each a few
// hundred bytes: the status, its two details and the strings), whatever
// mix of waits its keys see: at most this many, and the last one.
const maxKeptDenials = 128

// denials is a stack's cache of built denials. Its zero value is ready to
// use; it is safe for concurrent use. Lookups take no lock: slots are
// atomic pointers, filled lazily; a racing writer replaces a denial with
// an equal one.
type denials struct {
	slots atomic.Pointer[[denialSlots]atomic.Pointer[denial]] // allocated on the first short wait
	kept  atomic.Int32                                        // slots filled
	last  atomic.Pointer[denial]
}

// slot returns the slot of a denial with key k, and false for a wait too
// long for one.
func slot(k *denialKey) (int, bool) {
	switch {
	case k.ms < 0:
		return 0, true
	case k.ms >= 1 && k.ms < denialSlots:
		return int(k.ms), true
	}
	return 0, false
}

// get returns the denial kept for k, or nil.
func (c *denials) get(k *denialKey) *denial {
	if i, ok := slot(k); ok {
		if slots := c.slots.Load(); slots != nil {
			if d := slots[i].Load(); d != nil && d.denialKey == *k {
				return d
			}
		}
	}
	if d := c.last.Load(); d != nil && d.denialKey == *k {
		return d
	}
	return nil
}

// keep keeps d: in its wait's slot while fewer than maxKeptDenials are
// kept there (or in place of another with the same wait: a key on another
// tier), and as the last one.
func (c *denials) keep(d *denial) {
	c.last.Store(d)
	i, ok := slot(&d.denialKey)
	if !ok {
		return
	}
	slots := c.slots.Load()
	if slots == nil {
		slots = new([denialSlots]atomic.Pointer[denial])
		if !c.slots.CompareAndSwap(nil, slots) {
			slots = c.slots.Load()
		}
	}
	if slots[i].Load() != nil {
		slots[i].Store(d) // the same wait under another quota: no more kept
		return
	}
	if c.kept.Add(1) > maxKeptDenials {
		c.kept.Add(-1)
		return
	}
	if !slots[i].CompareAndSwap(nil, d) {
		c.kept.Add(-1) // another writer filled it first
	}
}

// denialKeyOf returns the key of the denial of a call for n that the one
// policy of a stack, with fields f, denied with outcome o, the longest
// wait ra.
func denialKeyOf(f *ratefields.Fields, o *door.Outcome, n int, ra time.Duration) denialKey {
	k := denialKey{f: f, ms: -1}
	if ra != atomiclimit.Never {
		k.ms = int64(retryDelay(ra) / time.Millisecond)
	}
	if f.Limited {
		if r, ok := o.Remaining(n, f.Quota.Limit); ok {
			k.item, k.r = true, r
			if ta := o.D.TokenAfter; r == 0 && ta > 0 && ta != atomiclimit.Never {
				k.t = ratefields.CeilSeconds(ta)
			}
		}
	}
	return k
}

// deny1 returns the denial of a call for n at key that s, a stack of one
// policy, denied (out: its outcome; den: Denied's summary): kept, or built
// now from the call's own values and kept.
func (s *stack[K]) deny1(key K, out []door.Outcome, n int, den door.Denial) *denial {
	fs := [1]*ratefields.Fields{s.Policies[0].Fields(key)}
	k := denialKeyOf(fs[0], &out[0], n, den.RetryAfter)
	if d := s.den.get(&k); d != nil {
		return d
	}
	d := &denial{denialKey: k, err: deniedWith(s.Stack, fs[:], out, den)}
	d.err.(*limitError).keepText()
	policies, items, _, _ := door.Count(out, fs[:], n)
	if items > 0 {
		d.rl = []string{door.RateLimitValue(out, fs[:], n, items, nil)}
	}
	if policies > 0 {
		d.pol = []string{s.PolicyValue(fs[:], policies, nil)}
	}
	s.den.keep(d)
	return d
}

// metadata returns the response metadata of d that set selects, or nil
// for none. The map is fresh: whoever receives it may keep it.
func (d *denial) metadata(set MetadataSet) metadata.MD {
	if set&MetadataNone != 0 {
		return nil
	}
	rl := d.rl != nil && set&MetadataRateLimit != 0
	pol := d.pol != nil && set&MetadataPolicy != 0
	switch {
	case rl && pol:
		return metadata.MD{mdRateLimit: d.rl, mdPolicy: d.pol}
	case rl:
		return metadata.MD{mdRateLimit: d.rl}
	case pol:
		return metadata.MD{mdPolicy: d.pol}
	}
	return nil
}
