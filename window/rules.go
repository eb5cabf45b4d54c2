package window

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// The window algorithms behind the one contract (algo.WordRule): the
// fixed window and the sliding counter are one-word rules.

type fixedRule struct{ p FixedParams }

// FixedAlgorithm returns p as an algo.Algorithm.
func FixedAlgorithm(p FixedParams) algo.Algorithm { return algo.Word(&fixedRule{p}) }

func (r *fixedRule) Admit(state uint64, now int64, n int) (uint64, bool) {
	return r.p.Admit(state, now, n)
}

func (r *fixedRule) Decide(state uint64, now int64, n int) (uint64, gcra.Decision) {
	return r.p.Decide(state, now, n)
}

func (r *fixedRule) Refund(state, stored uint64, _ int64, n int) (uint64, bool) {
	return r.p.Refund(state, stored, n)
}

func (r *fixedRule) Idle(state uint64, now int64) (int64, uint64, bool) { return r.p.Idle(state, now) }
func (r *fixedRule) Retired() uint64                                    { return Retired }

func (r *fixedRule) Quota() algo.Quota {
	return algo.Quota{Kind: "fixed", Limit: int(r.p.limit), Window: time.Duration(r.p.period),
		IdleAfter: time.Duration(r.p.period), String: r.p.String()}
}

func (r *fixedRule) Layout() algo.Layout {
	return algo.Layout{Kind: "fixed", Period: r.p.period, Start: r.p.start, Shift: r.p.shift}
}

type counterRule struct{ p CounterParams }

// CounterAlgorithm returns p as an algo.Algorithm.
func CounterAlgorithm(p CounterParams) algo.Algorithm { return algo.Word(&counterRule{p}) }

func (r *counterRule) Admit(state uint64, now int64, n int) (uint64, bool) {
	return r.p.Admit(state, now, n)
}

func (r *counterRule) Decide(state uint64, now int64, n int) (uint64, gcra.Decision) {
	return r.p.Decide(state, now, n)
}

func (r *counterRule) Refund(state, stored uint64, _ int64, n int) (uint64, bool) {
	return r.p.Refund(state, stored, n)
}

func (r *counterRule) Idle(state uint64, now int64) (int64, uint64, bool) {
	return r.p.Idle(state, now)
}
func (r *counterRule) Retired() uint64 { return Retired }

func (r *counterRule) Quota() algo.Quota {
	return algo.Quota{Kind: "counter", Limit: int(r.p.limit), Window: time.Duration(r.p.period),
		IdleAfter: 2 * time.Duration(r.p.period), String: r.p.String()}
}

func (r *counterRule) Layout() algo.Layout {
	return algo.Layout{Kind: "counter", Period: r.p.period, Start: r.p.start, Shift: r.p.shift}
}

// String describes p, e.g. "fixed 100/1s".
func (p *FixedParams) String() string { return fmt.Sprintf("fixed %d/%v", p.limit, p.Period()) }

// String describes p, e.g. "counter 100/1s".
func (p *CounterParams) String() string { return fmt.Sprintf("counter %d/%v", p.limit, p.Period()) }
