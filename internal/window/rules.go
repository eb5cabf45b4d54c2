package window

import (
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// The window algorithms behind the one contract: the fixed windows and the
// sliding counter are one-word rules (algo.WordRule: their Params have the
// pure decision methods, and these the rest); the log and the rolling
// window keep rings of their own.

// FixedAlgorithm returns p as an algo.Algorithm.
func FixedAlgorithm(p FixedParams) algo.Algorithm { return algo.Word(&p) }

// CounterAlgorithm returns p as an algo.Algorithm.
func CounterAlgorithm(p CounterParams) algo.Algorithm { return algo.Word(&p) }

// AnchoredAlgorithm returns p as an algo.Algorithm.
func AnchoredAlgorithm(p AnchoredParams) algo.Algorithm { return algo.Word(&p) }

// Retired is the retired state of every window word: see Retired.
func (p *FixedParams) Retired() uint64 { return Retired }

// Retired: see Retired.
func (p *CounterParams) Retired() uint64 { return Retired }

// Retired: see Retired.
func (p *AnchoredParams) Retired() uint64 { return Retired }

// Quota describes p for headers.
func (p *FixedParams) Quota() algo.Quota {
	w := time.Duration(p.period)
	return algo.Quota{Kind: "fixed", Limit: int(p.limit), Window: w, IdleAfter: w, String: p.String()}
}

// Quota describes p for headers: a count forgotten two windows on.
func (p *CounterParams) Quota() algo.Quota {
	w := time.Duration(p.period)
	return algo.Quota{Kind: "counter", Limit: int(p.limit), Window: w, IdleAfter: 2 * w, String: p.String()}
}

// Quota describes p for headers.
func (p *AnchoredParams) Quota() algo.Quota {
	w := p.Period()
	return algo.Quota{Kind: "anchored", Limit: p.Limit(), Window: w, IdleAfter: w, String: p.String()}
}

// Layout: the window's geometry alone (see FixedParams).
func (p *FixedParams) Layout() algo.Layout {
	return algo.Layout{Kind: "fixed", Period: p.period, Start: p.start, Shift: p.shift}
}

// Layout: the window's geometry alone (see CounterParams).
func (p *CounterParams) Layout() algo.Layout {
	return algo.Layout{Kind: "counter", Period: p.period, Start: p.start, Shift: p.shift}
}

// Layout: N sets both the count width and the anchor's resolution (held in
// Period), so two limits share a layout only with both equal.
func (p *AnchoredParams) Layout() algo.Layout {
	return algo.Layout{Kind: "anchored", Period: int64(p.gshift), Shift: p.shift}
}

// String describes p, e.g. "100/s fixed window".
func (p *FixedParams) String() string {
	return algo.DescribeWindow(int(p.limit), p.Period(), "fixed window")
}

// String describes p, e.g. "100/s sliding counter".
func (p *CounterParams) String() string {
	return algo.DescribeWindow(int(p.limit), p.Period(), "sliding counter")
}

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
func (a *logAlg) Refund(algo.State, algo.Taken, algo.Clock, int) bool { return false }

func (a *logAlg) Refunds() bool { return false }

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

// String describes p, e.g. "100/s sliding log".
func (p *LogParams) String() string {
	return algo.DescribeWindow(p.limit, p.Period(), "sliding log")
}

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

func (a *rollingAlg) Take(s algo.State, now int64, n int) (gcra.Decision, algo.Taken) {
	stored, d := a.p.decideHeadOn(a.words(s), now, n)
	if stored == 0 {
		return d, algo.Taken{}
	}
	return d, algo.Taken{Word: stored, At: now}
}

// Refund counts (see refundOn): it needs no clock.
// Refunds: a slice gives back its count.
func (a *rollingAlg) Refunds() bool { return true }

func (a *rollingAlg) Refund(s algo.State, taken algo.Taken, _ algo.Clock, n int) bool {
	return a.p.refundOn(a.words(s), taken.Word, n)
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

// String describes p, e.g. "10000/d rolling by 1h".
func (p *RollingParams) String() string {
	return algo.DescribeRolling(p.Limit(), p.Window(), p.Slice(), p.PerSlice())
}

// String describes p, e.g. "100/h anchored window".
func (p *AnchoredParams) String() string {
	return algo.DescribeWindow(p.Limit(), p.Period(), "anchored window")
}
