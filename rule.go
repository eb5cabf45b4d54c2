package atomiclimit

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Rule names an algorithm and its parameters: GCRA, FixedWindow,
// FixedWindowUTC, AnchoredWindow, SlidingCounter, SlidingLog, Rolling, or
// several of them at once (Bands). Each kind is declared in a file of its
// own, rule_<kind>.go, beside its constructor.
//
// A Rule is a value: copy it, reuse it for many limiters. Its zero value is
// invalid (ErrInvalidRule). It is validated when a limiter is built from
// it, against the limiter's clock.
type Rule struct{ k ruleKind }

// ruleKind is one kind of Rule. A new kind is a file with its constructor
// and these methods, and a method of RuleVisitor: every limiter, door and
// remote store that reads rules then fails to compile until it knows it.
type ruleKind interface {
	// algorithms validates the rule against src's clock (its windows start
	// at start, ns on src's base, or on the UTC boundary at or before it)
	// and builds its algorithms: one, or one per band.
	algorithms(src *timebase.Source, start int64) ([]algo.Algorithm, error)
	// maxN is the largest request a state of the rule can ever admit (0 for
	// an invalid rule): a larger one creates no key.
	maxN() int
	// String describes the rule as the user wrote it.
	String() string
	visit(v RuleVisitor)
}

// String describes the rule as the user wrote it, e.g. "100/s, burst 10",
// "10000/d rolling by 1h and 60/min sliding log".
func (r Rule) String() string {
	if r.k == nil {
		return "invalid"
	}
	return r.k.String()
}

// A RuleVisitor reads a Rule back (Rule.Visit): one method per kind, called
// with the parameters given to the kind's constructor (FixedWindow as
// FixedWindowUTC with utc false). A store that keeps limits elsewhere (a
// remote one, as redislimit) implements it to build the same limit; a
// kind added to this package adds a method here, so that such a store
// fails to compile until it knows the kind.
type RuleVisitor interface {
	GCRA(limit Limit, burst int)
	FixedWindow(n int, period time.Duration, utc bool, offset time.Duration)
	AnchoredWindow(n int, period time.Duration)
	SlidingCounter(n int, period time.Duration)
	SlidingLog(n int, period time.Duration)
	Rolling(q int, window, slice time.Duration, perSlice int)
	Bands(rules ...Rule)
}

// Visit calls the method of v for r's kind with r's parameters; nothing
// for the zero Rule.
func (r Rule) Visit(v RuleVisitor) {
	if r.k != nil {
		r.k.visit(v)
	}
}

// Quota describes the rule as a limiter built from it describes its keys
// (Keyed.Quota): for a store that keeps the rule elsewhere and must answer
// Quota as an in-process limiter would. The zero Quota for an invalid rule.
func (r Rule) Quota() Quota {
	src := timebase.Monotonic()
	b, err := newRule(r, &src, 0)
	if err != nil {
		return Quota{}
	}
	return b.q
}

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
	// noRefund: a limiter of this rule cannot give an admission back (its
	// Take returns no receipt).
	noRefund bool
}

// Refunds reports whether a limiter of this rule can give an admission
// back: whether its Take returns receipts. Every kind can but the sliding
// log (its ring only moves forward) and bands (a receipt would need a word
// per band). A Quota built by another package (a remote store's, from
// Rule.Quota) says what the rule's says.
func (q Quota) Refunds() bool { return !q.noRefund }

// rule is a Rule built for one limiter's clock: its bands and, for a rule
// of one GCRA band, that band's parameters inline, for the fast path.
type rule struct {
	g    gcra.Params    // the GCRA band's parameters, when gcra
	gcra bool           // one band, GCRA: the fast path applies
	word algo.WordRule  // one band of one word: decided on it directly
	grid algo.Grid      // word's Grid: its time prepared without a dynamic call
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
func newRule(spec Rule, src *timebase.Source, start int64) (*rule, error) {
	if spec.k == nil {
		return nil, fmt.Errorf("%w: the zero Rule (use GCRA, FixedWindow, SlidingLog, …)", ErrInvalidRule)
	}
	algs, err := spec.k.algorithms(src, start)
	if err != nil {
		return nil, err
	}
	r := &rule{spec: spec, maxN: spec.k.maxN()}
	if r.set, err = algo.NewSet(src.GiveBack(), algs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRule, err)
	}
	if len(algs) == 1 {
		a := algs[0]
		if p := algo.Params(a); p != nil {
			r.g, r.gcra = *p, true
		}
		if r.word, _ = algo.WordOf(a); r.word != nil {
			r.grid = r.word.Grid()
		}
		r.one = a
	}
	r.q = r.describe()
	r.far = 2 * r.idleAfter()
	return r, nil
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
	q := quotaOf(r.set.Band(0).Quota())
	idle := q.IdleAfter
	for i := 1; i < r.set.Len(); i++ {
		b := quotaOf(r.set.Band(i).Quota())
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
	q.noRefund = r.set.Len() > 1 || !r.set.Refunds(0)
	return q
}

// quotaOf is an algorithm's quota as this package has it.
func quotaOf(q algo.Quota) Quota {
	return Quota{Kind: q.Kind, Limit: q.Limit, Window: q.Window, IdleAfter: q.IdleAfter, String: q.String}
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
