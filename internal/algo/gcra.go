package algo

import (
	"math"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// GCRA is gcra.Params as a WordRule: the state is the TAT.
type GCRA struct{ P gcra.Params }

// Grid: GCRA reads the time alone.
func (g *GCRA) Grid() Grid { return Grid{} }

func (g *GCRA) AdmitAt(state uint64, m Moment, n int) (uint64, bool) {
	next, ok := g.P.Admit(int64(state), m.Now, n)
	return uint64(next), ok
}

func (g *GCRA) Decide(state uint64, now int64, n int) (uint64, gcra.Decision) {
	next, d := g.P.Decide(int64(state), now, n)
	return uint64(next), d
}

func (g *GCRA) Refund(state uint64, taken Taken, now int64, n int, since gcra.Since) (uint64, bool, bool) {
	back, shifts, ok := g.P.Refund(int64(state), now, int64(taken.Word), taken.At, n, since)
	return uint64(back), shifts, ok
}

// Idle: a bucket is full, and so idle, from its TAT on; a replacement starts
// at that TAT (never fuller than the removed bucket, for any now).
func (g *GCRA) Idle(state uint64, now int64) (int64, uint64, bool) {
	return int64(state), state, int64(state) <= now
}

func (g *GCRA) Retired() uint64 { return uint64(RetiredTAT) }

func (g *GCRA) Quota() Quota {
	q := Quota{Kind: "gcra", Limit: g.P.Burst(), Window: g.P.Span(), IdleAfter: g.P.Span(), String: GCRAString(&g.P)}
	if g.P.IsUnlimited() {
		q.Limit, q.Window, q.IdleAfter = math.MaxInt, 0, 0
	}
	return q
}

func (g *GCRA) Layout() Layout { return Layout{Kind: "gcra"} }

// GCRAString describes p, e.g. "100/s, burst 10".
func GCRAString(p *gcra.Params) string { return DescribeGCRA(p.Limit(), p.Burst()) }

// NewGCRA returns the Algorithm of p.
func NewGCRA(p gcra.Params) Algorithm { return Word(&GCRA{P: p}) }

// Params returns the GCRA parameters of a GCRA Algorithm, or nil.
func Params(a Algorithm) *gcra.Params {
	if w, ok := a.(word); ok {
		if g, ok := w.r.(*GCRA); ok {
			return &g.P
		}
	}
	return nil
}

// A Layout identifies a one-word state layout: two rules of one Layout read
// each other's states the same way, so one may replace the other on a state
// the other wrote (a tier changing its limit).
type Layout struct {
	Kind          string
	Period, Start int64
	Shift         uint
}

type layoutRule interface{ Layout() Layout }

func sameLayout(a, b WordRule) bool {
	la, ok1 := a.(layoutRule)
	lb, ok2 := b.(layoutRule)
	return ok1 && ok2 && la.Layout() == lb.Layout()
}
