package atomiclimit

import (
	"fmt"
	"math"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// A Rule names an algorithm and its parameters (see the constructors in
// package atomiclimit: GCRA, FixedWindow, SlidingLog, Bands, …).
//
// A Rule is a value: compare it, copy it, reuse it for many limiters. Its
// zero value is invalid (ErrInvalidRule).
type Rule struct{ s algo.Spec }

// String describes the rule as the user wrote it, e.g. "100/s, burst 10",
// "10000/d rolling by 1h and 60/min sliding log".
func (r Rule) String() string { return r.s.String() }

// A Quota describes one limit as the IETF RateLimit fields and a log line
// need it: its kind, the most it admits in one window, and the window.
type Quota struct {
	// Kind names the algorithm: "gcra", "fixed", "anchored", "counter",
	// "log", "rolling" or "bands".
	Kind string
	// Limit is the quota: the most a full state admits at once (GCRA's
	// burst), or per window (the windows' N, the rolling window's Q).
	// math.MaxInt for Unlimited, 0 for DenyAll.
	Limit int
	// Window is the time the quota refers to: the window's length, or for
	// GCRA burst × interval (the time a drained bucket takes to refill).
	Window time.Duration
	// IdleAfter is the longest a state takes to become idle after its last
	// admission: B·T for GCRA, one window (two for the sliding counter),
	// the longest band's for bands.
	IdleAfter time.Duration
	// String describes the limit as the user wrote it, e.g. "100/s, burst
	// 10".
	String string
}

// Refunds reports whether a limiter of this kind can give an admission
// back: whether its Take returns receipts. Every kind can but the sliding
// log (its ring only moves forward) and bands (a receipt would need a word
// per band).
func (q Quota) Refunds() bool { return q.Kind != "log" && q.Kind != "bands" }

// rule is a Rule built for one limiter's clock: its bands and, for a rule
// of one GCRA band, that band's parameters inline, for the fast path.
type rule struct {
	g    gcra.Params    // the GCRA band's parameters, when gcra
	gcra bool           // one band, GCRA: the fast path applies
	word algo.WordRule  // one band of one word: decided on it directly
	one  algo.Algorithm // one band: decided without the set's loops
	set  *algo.Set
	spec Rule
	maxN int   // the largest request any state admits: larger ones insert no key
	q    Quota // the rule's Quota, built once: Quota allocates nothing
	// far is twice the longest its states take to become idle: a state
	// idle later than that after the clock cannot come from a decision at
	// a time the clock has read (see "Clocks that jump" in the package
	// doc). A limiter's reach is the largest far of its rules, and of
	// B·T + the wait of its reservations.
	far int64
}

// newRule validates r against src's clock and builds it. start (ns on
// src's base) is the limiter's own: the windows of every rule a limiter
// builds start there (or on the UTC boundary at or before it), so that a
// rule built later (a tier, SetRule) reads the states the first one wrote.
func newRule(r Rule, src *timebase.Source, start int64) (*rule, error) {
	return newRuleOf(r.s, src, start)
}

func newRuleOf(spec algo.Spec, src *timebase.Source, start int64) (*rule, error) {
	r := &rule{spec: Rule{spec}}
	if spec.Kind == algo.KindBands {
		if len(spec.Bands) < 2 {
			// One band is that band: bands are for several. Its errors are
			// a band's, as with several.
			if len(spec.Bands) == 1 {
				b := spec.Bands[0]
				if b.Kind == algo.KindBands {
					return nil, fmt.Errorf("%w: Bands inside Bands (list every band once)", ErrInvalidRule)
				}
				r, err := newRuleOf(b, src, start)
				if err != nil {
					return nil, fmt.Errorf("%w: band 0 (%v): %w", ErrInvalidRule, b, err)
				}
				if r.gcra && r.g.IsUnlimited() {
					return nil, errUnlimitedBand(0)
				}
				return r, nil
			}
			return nil, fmt.Errorf("%w: Bands with no band", ErrInvalidRule)
		}
		algs := make([]algo.Algorithm, len(spec.Bands))
		for i, b := range spec.Bands {
			a, err := build(b, src, start)
			if err != nil {
				return nil, fmt.Errorf("%w: band %d (%v): %w", ErrInvalidRule, i, b, err)
			}
			if p := algo.Params(a); p != nil && p.IsUnlimited() {
				return nil, errUnlimitedBand(i)
			}
			algs[i] = a
		}
		set, err := algo.NewSet(src.GiveBack(), algs...)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRule, err)
		}
		r.set = set
		r.q = r.describe()
		r.far = 2 * r.idleAfter()
		r.maxN = math.MaxInt
		for _, b := range spec.Bands {
			r.maxN = min(r.maxN, maxN(b, nil))
		}
		return r, nil
	}
	a, err := build(spec, src, start)
	if err != nil {
		return nil, err
	}
	p := algo.Params(a)
	if p != nil {
		r.g, r.gcra = *p, true
	}
	r.set, _ = algo.NewSet(src.GiveBack(), a) // one band always makes a set
	r.word, _ = algo.WordOf(a)
	r.one = a
	r.q = r.describe()
	r.far = 2 * r.idleAfter()
	r.maxN = maxN(spec, p)
	return r, nil
}

// errUnlimitedBand is the error of Bands with an Unlimited band: it is never
// written, so it cannot carry the proof of the bands' eviction (see
// algo.Set), and it limits nothing anyway.
func errUnlimitedBand(i int) error {
	return fmt.Errorf("%w: band %d is Unlimited: it limits nothing; leave it out", ErrInvalidRule, i)
}

// maxN is the largest request a state of spec can ever admit (p: its GCRA
// parameters, nil to build them).
func maxN(spec algo.Spec, p *gcra.Params) int {
	switch spec.Kind {
	case algo.KindGCRA:
		if p == nil {
			q, err := gcra.NewParams(spec.Limit, spec.Burst)
			if err != nil {
				return 0
			}
			p = &q
		}
		return p.Burst()
	case algo.KindLog:
		return 1
	case algo.KindRolling:
		if spec.PerSlice > 0 {
			return min(spec.N, spec.PerSlice)
		}
	}
	return spec.N
}

// build validates one band.
func build(spec algo.Spec, src *timebase.Source, start int64) (algo.Algorithm, error) {
	now := start
	switch spec.Kind {
	case algo.KindGCRA:
		p, err := paramsFor(src, spec.Limit, spec.Burst)
		if err != nil {
			return nil, err
		}
		return algo.NewGCRA(*p), nil
	case algo.KindFixed:
		align := window.AlignStart
		if spec.UTC {
			align = window.AlignUTC(spec.Offset)
		}
		p, err := window.NewFixedParams(spec.N, spec.Period, align.Start(src.Time(0), now, spec.Period))
		if err != nil {
			return nil, err
		}
		return window.FixedAlgorithm(p), nil
	case algo.KindCounter:
		p, err := window.NewCounterParams(spec.N, spec.Period, now)
		if err != nil {
			return nil, err
		}
		return window.CounterAlgorithm(p), nil
	case algo.KindLog:
		p, err := window.NewLogParams(spec.N, spec.Period)
		if err != nil {
			return nil, err
		}
		return window.LogAlgorithm(p), nil
	case algo.KindAnchored:
		p, err := window.NewAnchoredParams(spec.N, spec.Period)
		if err != nil {
			return nil, err
		}
		return window.AnchoredAlgorithm(p), nil
	case algo.KindRolling:
		p, err := window.NewRollingParams(spec.N, spec.Period, spec.Slice, spec.PerSlice, now)
		if err != nil {
			return nil, err
		}
		return window.RollingAlgorithm(p), nil
	case algo.KindBands:
		return nil, fmt.Errorf("%w: Bands inside Bands (list every band once)", ErrInvalidRule)
	}
	return nil, fmt.Errorf("%w: the zero Rule (use GCRA, FixedWindow, SlidingLog, …)", ErrInvalidRule)
}

// compatible checks that r may replace the limiter's rule def on states def
// wrote.
func compatible(def, r *rule) error {
	if def.set.Compatible(r.set) {
		return nil
	}
	return fmt.Errorf("%w: %v cannot replace %v", ErrIncompatible, r.spec, def.spec)
}

// quota describes r.
func (r *rule) quota() Quota { return r.q }

// describe describes r: its one band's quota, or, for bands, the tightest
// band's (the one with the least Limit per Window) with the longest time to
// become idle of them all (a key is idle only once every band is), and the
// rule as the user wrote it.
func (r *rule) describe() Quota {
	q := Quota(r.set.Band(0).Quota())
	idle := q.IdleAfter
	for i := 1; i < r.set.Len(); i++ {
		b := Quota(r.set.Band(i).Quota())
		idle = max(idle, b.IdleAfter)
		// b tighter than q ⇔ b.Limit/b.Window < q.Limit/q.Window.
		if float64(b.Limit)*float64(q.Window) < float64(q.Limit)*float64(b.Window) {
			q = b
		}
	}
	if r.set.Len() > 1 {
		q.Kind = "bands"
	}
	q.IdleAfter, q.String = idle, r.spec.String()
	return q
}

// idleAfter is the longest any band takes to become idle after an
// admission: a refused new key may come back after that.
func (r *rule) idleAfter() int64 {
	var d int64
	for i := range r.set.Len() {
		d = max(d, int64(r.set.Band(i).Quota().IdleAfter))
	}
	return d
}
