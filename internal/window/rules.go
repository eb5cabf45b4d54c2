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

// rollingAlg is the rolling window behind the contract: its state is the
// head and the ring of K slots.
type rollingAlg struct{ p RollingParams }

// RollingAlgorithm returns p as an algo.Algorithm.
func RollingAlgorithm(p RollingParams) algo.Algorithm { return &rollingAlg{p} }

func (a *rollingAlg) words(s algo.State) rollWords { return rollWords{head: s.Word, ring: s.Rest} }

func (a *rollingAlg) Words() int { return a.p.Words() }

func (a *rollingAlg) Init(s algo.State, floor uint64) { a.p.initOn(a.words(s), floor) }

func (a *rollingAlg) Admits(s algo.State, now int64, n int) bool {
	return a.p.decideOn(a.words(s), now, n, true).Allowed
}

func (a *rollingAlg) Admit(s algo.State, now int64, n int) (uint64, bool) {
	stored, d := a.p.decideHeadOn(a.words(s), now, n)
	return stored, d.Allowed
}

func (a *rollingAlg) Decide(s algo.State, now int64, n int, peek bool) gcra.Decision {
	return a.p.decideOn(a.words(s), now, n, peek)
}

func (a *rollingAlg) Refund(s algo.State, stored uint64, _ int64, n int) bool {
	return a.p.refundOn(a.words(s), stored, n)
}

func (a *rollingAlg) Idle(s algo.State, now int64) (algo.Mark, int64, uint64, bool, bool) {
	mark, from, floor, idle := a.p.idleOn(a.words(s), now)
	if mark == Retired {
		return algo.Mark{mark}, 0, 0, false, false
	}
	return algo.Mark{mark}, from, floor, idle, true
}

func (a *rollingAlg) Retire(s algo.State, m algo.Mark) bool {
	return a.p.retireFromOn(a.words(s), m[0])
}

func (a *rollingAlg) IsRetired(s algo.State) bool { return a.p.isRetiredOn(a.words(s)) }

// Max: floors are heads with a zero count, ordered by their slice index.
func (a *rollingAlg) Max(x, y uint64) uint64 { return max(x, y) }

func (a *rollingAlg) Quota() algo.Quota {
	w := a.p.Window()
	return algo.Quota{Kind: "rolling", Limit: a.p.Limit(), Window: w, IdleAfter: w, String: a.p.String()}
}

// Compatible: the same geometry (slice length, count of slices, start and
// state layout); the quota and the cap per slice may change.
func (a *rollingAlg) Compatible(o algo.Algorithm) bool {
	b, ok := o.(*rollingAlg)
	return ok && b.p.slice == a.p.slice && b.p.slices == a.p.slices && b.p.start == a.p.start && b.p.shift == a.p.shift
}

// String describes p, e.g. "rolling 10000/24h0m0s by 1h0m0s".
func (p *RollingParams) String() string {
	if c := p.PerSlice(); c > 0 {
		return fmt.Sprintf("rolling %d/%v by %v, %d per slice", p.Limit(), p.Window(), p.Slice(), c)
	}
	return fmt.Sprintf("rolling %d/%v by %v", p.Limit(), p.Window(), p.Slice())
}

type anchoredRule struct{ p AnchoredParams }

// AnchoredAlgorithm returns p as an algo.Algorithm.
func AnchoredAlgorithm(p AnchoredParams) algo.Algorithm { return algo.Word(&anchoredRule{p}) }

func (r *anchoredRule) Admit(state uint64, now int64, n int) (uint64, bool) {
	return r.p.Admit(state, now, n)
}

func (r *anchoredRule) Decide(state uint64, now int64, n int) (uint64, gcra.Decision) {
	return r.p.Decide(state, now, n)
}

func (r *anchoredRule) Refund(state, stored uint64, _ int64, n int) (uint64, bool) {
	return r.p.Refund(state, stored, n)
}

func (r *anchoredRule) Idle(state uint64, now int64) (int64, uint64, bool) {
	return r.p.Idle(state, now)
}
func (r *anchoredRule) Retired() uint64 { return Retired }

func (r *anchoredRule) Quota() algo.Quota {
	w := r.p.Period()
	return algo.Quota{Kind: "anchored", Limit: r.p.Limit(), Window: w, IdleAfter: w, String: r.p.String()}
}

func (r *anchoredRule) Layout() algo.Layout {
	// Period holds the anchor resolution's exponent: N sets both it and the
	// count width, so two limits share a layout only with both equal.
	return algo.Layout{Kind: "anchored", Period: int64(r.p.gshift), Shift: r.p.shift}
}

// String describes p, e.g. "anchored 100/1h0m0s".
func (p *AnchoredParams) String() string { return fmt.Sprintf("anchored %d/%v", p.Limit(), p.Period()) }
