package redislimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// A spec is an atomiclimit.Rule as this package reads it back
// (atomiclimit.RuleVisitor): its kind and the parameters its constructor
// was given. It is the one place that knows every kind: a kind added to
// atomiclimit adds a method to RuleVisitor, and this file fails to compile
// until the kind is handled (band.init builds its script arguments).
type spec struct {
	rule                  atomiclimit.Rule
	kind                  specKind
	limit                 gcra.Limit
	burst, n, perSlice    int
	period, slice, offset time.Duration
	utc                   bool
	bands                 []spec
}

type specKind uint8

const (
	specGCRA specKind = iota + 1
	specFixed
	specAnchored
	specCounter
	specLog
	specRolling
	specBands
)

// specOf reads r back.
func specOf(r atomiclimit.Rule) spec {
	v := specVisitor{s: spec{rule: r}}
	r.Visit(&v)
	return v.s
}

// specVisitor fills s from the visit.
type specVisitor struct{ s spec }

func (v *specVisitor) GCRA(limit gcra.Limit, burst int) {
	v.s.kind, v.s.limit, v.s.burst = specGCRA, limit, burst
}

func (v *specVisitor) FixedWindow(n int, period time.Duration, utc bool, offset time.Duration) {
	v.s.kind, v.s.n, v.s.period, v.s.utc, v.s.offset = specFixed, n, period, utc, offset
}

func (v *specVisitor) AnchoredWindow(n int, period time.Duration) {
	v.s.kind, v.s.n, v.s.period = specAnchored, n, period
}

func (v *specVisitor) SlidingCounter(n int, period time.Duration) {
	v.s.kind, v.s.n, v.s.period = specCounter, n, period
}

func (v *specVisitor) SlidingLog(n int, period time.Duration) {
	v.s.kind, v.s.n, v.s.period = specLog, n, period
}

func (v *specVisitor) Rolling(q int, window, slice time.Duration, perSlice int) {
	v.s.kind, v.s.n, v.s.period, v.s.slice, v.s.perSlice = specRolling, q, window, slice, perSlice
}

func (v *specVisitor) Bands(rules ...atomiclimit.Rule) {
	v.s.kind, v.s.bands = specBands, make([]spec, len(rules))
	for i, r := range rules {
		v.s.bands[i] = specOf(r)
	}
}

// String describes the spec as its rule does.
func (s spec) String() string { return s.rule.String() }
