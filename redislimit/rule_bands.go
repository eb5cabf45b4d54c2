package redislimit

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/window"
)

// How a rule's reply becomes a gcra.Decision: each band's state, as the
// script read it before the call, is moved to a time base of the band's
// own on which the in-process code decides it exactly as it decides the
// same state on a limiter's base, and decides it there: gcra.Params for
// GCRA, window.FixedParams, CounterParams, AnchoredParams and RollingParams
// for the windows (the very functions the in-process limiters run); the
// log's few formulas, which need the whole ring in process, are LogRing's
// on the four values the script reports. Bands combine as algo.Set.Decide
// combines them. So every field is the in-process one, to the nanosecond,
// at the instant Redis TIME reported; the vectors (vectors_rules_test.go)
// hold it to that.

// A bandKind is the algorithm of one band.
type bandKind uint8

const (
	bandGCRA bandKind = iota
	bandFixed
	bandCounter
	bandLog
	bandRolling
	bandAnchored
)

// A band is one algorithm of a rule as Redis decides it. Immutable.
type band struct {
	kind bandKind
	g    gcra.Params // GCRA: T rounded up to whole µs
	// fixed and counter are the window's parameters on a base whose
	// window 0 starts at 0 (view moves each state there); shift is their
	// count width.
	fixed   window.FixedParams
	counter window.CounterParams
	// rolling is the rolling window's parameters on a base whose slice 0
	// starts at 0; shift is its count width, n its K.
	rolling window.RollingParams
	// anchored is the anchored window's parameters, on a base whose origin
	// is a multiple of its resolution g since the Unix epoch; shift is its
	// count width.
	anchored window.AnchoredParams
	res      int64 // the anchored window's g, in ns
	shift    uint
	maxIdx   uint64 // the largest window (slice) index their words hold
	w        int64  // W in µs (fixed, counter, log, anchored); the slice P (rolling)
	wNs      int64  // W in ns (the log's and the anchored window's views)
	grid     int64  // G in µs: the windows' origin, a boundary ≤ 0 (fixed, counter)
	n        int    // the log's N; the rolling window's K
	args     [5]any
	words    int               // the band's words in the state
	replies  int               // the reply's values that describe the band
	quota    atomiclimit.Quota // as in process, with GCRA's T rounded up
}

// A view is one band's state, as the script read it, on the band's own
// time base.
type view struct {
	word uint64 // GCRA: the debt (the TAT with now at 0), ns; windows: the state word
	now  int64  // windows: now, ns on the base (GCRA and the log: 0)
	base int64  // windows: the absolute index of the base's window (slice) 0
	// The rolling window: its K+1 words on the base (the head first), a
	// copy of the band's own, and the slice a request at now counts in.
	ring []atomic.Uint64
	s    int64
	// The log: the slots expired at now, and the oldest, second and
	// latest expiries in ns after now (≤ 0: expired).
	e                      int
	oldest, second, latest int64
}

// view moves the values r, the band's part of a reply at nowUS (µs on
// TIME), to the band's base.
func (b *band) view(nowUS int64, r []int64) view {
	switch b.kind {
	case bandGCRA:
		return view{word: uint64(min(max(r[0], 0), int64(gcra.MaxSpan)/1000) * 1000)}
	case bandFixed, bandCounter:
		return b.windowView(nowUS, r)
	case bandRolling:
		return b.rollingView(nowUS, r)
	case bandAnchored:
		return b.anchoredView(nowUS, r)
	}
	rel := func(us int64) int64 { return (us - nowUS) * 1000 }
	return view{e: int(min(max(r[0], 0), int64(b.n))), oldest: rel(r[1]), second: rel(r[2]), latest: rel(r[3])}
}

// windowView: the base's window 0 is now's window w, or w − 1 for a
// counter that stored w − 1 (its counts then shift at the base's window 1,
// as in process). A stored window before that reads as count 0, as in
// process; a later one (a stale now: TIME went back) keeps its distance,
// up to what a word holds. Counts are clamped to the count width.
func (b *band) windowView(nowUS int64, r []int64) view {
	w := floorDiv(nowUS-b.grid, b.w)
	sw := r[0]
	mask := uint64(1)<<b.shift - 1
	var counts uint64
	if b.kind == bandFixed {
		counts = min(uint64(max(r[1], 0)), mask)
	} else {
		counts = min(uint64(max(r[1], 0)), mask)<<b.shift | min(uint64(max(r[2], 0)), mask)
	}
	v := view{base: w}
	switch {
	case b.kind == bandCounter && sw == w-1:
		v.base = sw
		v.word = counts
	case sw >= w:
		v.word = min(uint64(sw-w), b.maxIdx)<<b.idxShift() | counts
	}
	v.now = (nowUS - b.grid - v.base*b.w) * 1000
	return v
}

// rollingView: the base's slice 0 is K slices before s, the slice a
// request at now counts in (now's, or the head's if later: a stale now), so
// that every slice of the window (s − K, s] has an index in [1, K] and a
// word of its own, and slice 0, outside it, stands for everything older:
// the head (when older still) and the ring's slots hold (index, count)
// words as in process, at their slice's position in the ring; a slot of a
// slice outside the window is left 0, which the in-process code reads as
// nothing counted.
func (b *band) rollingView(nowUS int64, r []int64) view {
	mask := uint64(1)<<b.shift - 1
	k := int64(b.n)
	h, c := r[0], min(uint64(max(r[1], 0)), mask)
	s := max(floorDiv(nowUS, b.w), h)
	v := view{base: max(s-k, 0), s: s, ring: make([]atomic.Uint64, k+1)}
	v.now = (nowUS - v.base*b.w) * 1000
	if h >= v.base {
		v.ring[0].Store(uint64(min(h-v.base, int64(b.maxIdx)))<<b.shift | c)
	}
	for m := range k {
		j, cnt := r[2+2*m], min(uint64(max(r[3+2*m], 0)), mask)
		if j > s-k && j >= v.base && j < h { // in the window, finalised
			v.ring[1+(j-v.base)%k].Store(uint64(j-v.base)<<b.shift | cnt)
		}
	}
	return v
}

// anchoredView: the script stores the anchor A (ns since the Unix epoch, a
// multiple of g) as its µs and the ns beyond them, and the count. The
// base's origin is a multiple of g at or before both A and now, so that
// the word holds A/g from there, as in process; a state whose window is
// over at now (or that has none) and whose anchor has passed decides as
// the zero word (a new window at now's, as in process), from now's g.
// Counts are clamped to the count width.
func (b *band) anchoredView(nowUS int64, r []int64) view {
	anchor := max(r[0], 0)*1000 + min(max(r[1], 0), 999)
	c := min(uint64(max(r[2], 0)), uint64(1)<<b.shift-1)
	now := nowUS * 1000
	if anchor <= now && (c == 0 || now >= anchor+b.wNs) {
		base := now / b.res * b.res
		return view{now: now - base, base: base}
	}
	base := min(anchor, now) / b.res * b.res
	field := (anchor - base + b.res - 1) / b.res // A is a multiple of g unless another writer's
	return view{word: uint64(field)<<b.shift | c, now: now - base, base: base}
}

// anchoredReceipt is the receipt of an admission that left v: its window's
// anchor in µs + 1 and the ns beyond them, and its count.
func (b *band) anchoredReceipt(v view) receipt {
	anchor := v.base + int64(v.word>>b.shift)*b.res
	return receipt{uint64(anchor/1000) + 1, uint64(anchor % 1000), v.word & (uint64(1)<<b.shift - 1)}
}

// idxShift is the bit of the window index in a window word.
func (b *band) idxShift() uint {
	if b.kind == bandCounter {
		return 2 * b.shift
	}
	return b.shift
}

// decide is the band's in-process Decide on v for n (a WordRule's, or the
// log's): the state after the (hypothetical) admission, and the decision,
// which describes that state. n = 0 describes v.
func (b *band) decide(v view, n int) (view, gcra.Decision) {
	var d gcra.Decision
	switch b.kind {
	case bandGCRA:
		var next int64
		next, d = b.g.Decide(int64(v.word), 0, n)
		v.word = uint64(next)
	case bandFixed:
		v.word, d = b.fixed.Decide(v.word, v.now, n)
	case bandCounter:
		v.word, d = b.counter.Decide(v.word, v.now, n)
	case bandAnchored:
		v.word, d = b.anchored.Decide(v.word, v.now, n)
	case bandRolling:
		// First the decision on the words as they are (a peek decides as
		// an admission reports), then, for an admission, the words after
		// it, on a copy: the view may be decided again.
		d = b.rolling.Decide(v.ring, v.now, n, true)
		if d.Allowed && n > 0 {
			next := make([]atomic.Uint64, len(v.ring))
			for i := range next {
				next[i].Store(v.ring[i].Load())
			}
			b.rolling.Decide(next, v.now, n, false)
			v.ring = next
		}
	default:
		return b.logDecide(v, n)
	}
	return v, d
}

// logDecide is window.LogRing's decideN on the four values: admit ⇔ n = 1
// and the oldest expiry has passed; the admission records
// u = max(now + W, latest) in the oldest's slot, so that the oldest becomes
// the second and one expired slot fewer remains. Remaining counts the
// expired slots, ResetAfter runs to the latest expiry, TokenAfter (when
// Remaining is 0) to the oldest.
func (b *band) logDecide(v view, n int) (view, gcra.Decision) {
	if n != 1 || v.oldest > 0 {
		d := logState(v)
		switch {
		case n == 0:
			d.Allowed = true
		case n == 1:
			d.RetryAfter = time.Duration(v.oldest)
		default:
			d.RetryAfter = gcra.Never
		}
		return v, d
	}
	u := max(b.wNs, v.latest)
	next := view{e: v.e - 1, oldest: v.second, latest: u}
	if b.n == 1 {
		next.oldest = u
	}
	d := logState(next)
	d.Allowed = true
	return next, d
}

// logState is LogRing.State on the values.
func logState(v view) gcra.Decision {
	d := gcra.Decision{Remaining: v.e, ResetAfter: time.Duration(max(v.latest, 0))}
	if v.e == 0 {
		d.TokenAfter = time.Duration(max(v.oldest, 0))
	}
	return d
}

// combine is algo.Set.Decide on the views, which take is free to
// overwrite: a single band decides alone; several are all checked, taken
// from together if every one admits (unless peek), and described as Set
// describes them. It returns the decision and, with one fixed, counter,
// rolling or anchored band, the receipt of an admission (remote.go); the
// zero receipt otherwise.
func combine(bands []band, vs []view, n int, peek bool) (gcra.Decision, receipt) {
	if len(bands) == 1 {
		b := &bands[0]
		if b.kind == bandRolling {
			// Only the receipt needs the words after the admission: the
			// slice it was counted in, s.
			d := b.rolling.Decide(vs[0].ring, vs[0].now, n, true)
			if d.Allowed && n > 0 {
				return d, receipt{uint64(vs[0].s) + 1}
			}
			return d, receipt{}
		}
		next, d := b.decide(vs[0], n)
		if !d.Allowed || n < 1 {
			return d, receipt{}
		}
		switch b.kind {
		case bandFixed, bandCounter:
			return d, receipt{uint64(next.base+int64(next.word>>b.idxShift())) + 1}
		case bandAnchored:
			return d, b.anchoredReceipt(next)
		}
		return d, receipt{}
	}
	ok := true
	for i := range bands {
		if _, bd := bands[i].decide(vs[i], n); !bd.Allowed {
			ok = false
			break
		}
	}
	if ok && !peek {
		for i := range bands {
			vs[i], _ = bands[i].decide(vs[i], n)
		}
	}
	d := gcra.Decision{Allowed: ok, Remaining: math.MaxInt}
	for i := range bands {
		var bd gcra.Decision
		if ok && peek {
			_, bd = bands[i].decide(vs[i], n) // as if admitted
		} else {
			_, bd = bands[i].decide(vs[i], 0) // as stored
			if !ok {
				if _, pk := bands[i].decide(vs[i], n); !pk.Allowed && pk.RetryAfter > d.RetryAfter {
					d.RetryAfter = pk.RetryAfter
				}
			}
		}
		d.Remaining = min(d.Remaining, bd.Remaining)
		d.ResetAfter = max(d.ResetAfter, bd.ResetAfter)
		d.TokenAfter = max(d.TokenAfter, bd.TokenAfter)
	}
	return d, receipt{}
}

// floorDiv is ⌊a/b⌋ for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}
