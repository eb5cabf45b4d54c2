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

// logAlg is the exact sliding log behind the contract: its state is a ring
// (the first word its head, the rest its N slots).
type logAlg struct{ p LogParams }

// LogAlgorithm returns p as an algo.Algorithm.
func LogAlgorithm(p LogParams) algo.Algorithm { return &logAlg{p} }

func (a *logAlg) ring(s algo.State) LogRing { return LogRing{head: s.Word, slots: s.Rest} }

func (a *logAlg) Words() int { return a.p.limit + 1 }

func (a *logAlg) Init(s algo.State, floor uint64) {
	r := a.ring(s)
	r.initAt(int64(floor))
}

func (a *logAlg) Admits(s algo.State, now int64, n int) bool {
	if n != 1 {
		return n == 0
	}
	r := a.ring(s)
	return r.Admits(&a.p, now)
}

func (a *logAlg) Admit(s algo.State, now int64, n int) (uint64, bool) {
	if n != 1 {
		return 0, n == 0 // a peek records nothing; any other n is denied
	}
	r := a.ring(s)
	return 0, r.Allow(&a.p, now)
}

func (a *logAlg) Decide(s algo.State, now int64, n int, peek bool) gcra.Decision {
	r := a.ring(s)
	return r.decideN(&a.p, now, n, peek)
}

// Refund: a log cannot give an admission back (its ring only moves
// forward); algo.Set allows it only as the last band.
func (a *logAlg) Refund(algo.State, uint64, int64, int) bool { return false }

// Idle: the ring is idle once its latest admission has left the window; a
// replacement expires every slot at that expiry. The mark is the head and
// the slot admission head would write.
func (a *logAlg) Idle(s algo.State, now int64) (algo.Mark, int64, uint64, bool, bool) {
	r := a.ring(s)
	k, cur, latest, idle := r.idle(now)
	if cur == retiredSlot {
		return algo.Mark{}, 0, 0, false, false
	}
	return algo.Mark{k, cur}, latest, uint64(latest), idle, true
}

func (a *logAlg) Retire(s algo.State, m algo.Mark) bool {
	r := a.ring(s)
	return r.retireFrom(m[0], m[1])
}

func (a *logAlg) IsRetired(s algo.State) bool {
	r := a.ring(s)
	return r.isRetired()
}

func (a *logAlg) Max(x, y uint64) uint64 { return max(x, y) }

func (a *logAlg) Quota() algo.Quota {
	w := time.Duration(a.p.period)
	return algo.Quota{Kind: "log", Limit: a.p.limit, Window: w, IdleAfter: w, String: a.p.String()}
}

// Compatible: another log of as many slots; a new window applies to the
// admissions from then on (the expiries already stored keep theirs).
func (a *logAlg) Compatible(o algo.Algorithm) bool {
	b, ok := o.(*logAlg)
	return ok && b.p.limit == a.p.limit
}

// String describes p, e.g. "log 100/1s".
func (p *LogParams) String() string { return fmt.Sprintf("log %d/%v", p.limit, p.Period()) }
