package grpclimit

import (
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"google.golang.org/grpc/metadata"
)

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

// A denialKey is everything a denial of a stack of one policy depends on
// (the policy's name is the stack's): the quota of the call's key (its q,
// w and description), the RetryInfo delay in milliseconds (-1: none, the
// call's cost exceeds the quota), and the RateLimit item ("": none), which
// PolicyFields keeps, so that comparing it is comparing two kept strings.
type denialKey struct {
	quota atomiclimit.Quota
	ms    int64
	rl    string
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

// deny1 returns the denial of a call for n that s, a stack of one policy,
// denied (out: its outcome; den: Denied's summary): kept, or built now
// from the call's own values and kept.
func (s *stack[K]) deny1(out []atomiclimit.Outcome, n int, den atomiclimit.Denial) *denial {
	o, f := &out[0], s.fields[0]
	k := denialKey{quota: o.Quota, ms: -1, rl: f.RateLimit(o, n)}
	if den.RetryAfter != atomiclimit.Never {
		k.ms = int64(retryDelay(den.RetryAfter) / time.Millisecond)
	}
	if d := s.den.get(&k); d != nil {
		return d
	}
	d := &denial{denialKey: k, err: denied(s.Stack, out, den)}
	d.err.(*limitError).keepText()
	if k.rl != "" {
		d.rl = []string{k.rl}
	}
	if pol := f.Policy(o.Quota); pol != "" {
		d.pol = []string{pol}
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
