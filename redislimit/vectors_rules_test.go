package redislimit_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// The shared decision vectors of every rule NewRule decides. Each is a
// timeline of Take, Peek and Refund calls at explicit instants, run
// through an in-process limiter of the same rule (atomiclimit.NewKeyedRule
// on a clock set to each instant) and through the script in a real
// redis-server (the instant passed as Redis's now); every field of every
// decision, whether Take returned a receipt, and every Refund's answer
// must be equal, and so must the hand-written expectations some steps
// carry. After each admission the key's expiry must be the state's
// ResetAfter (the time until it decides as an absent key: checked in
// process at that instant, and not 1µs before), rounded up to whole ms,
// plus 1 ms; the key is then given an hour, so that the vector's instants
// alone, not the test's real time, decide. (Not persistent: a state with
// no expiry that would deny longer than any the rule writes, as a
// backward step may leave, is one the script repairs.)

// vt0 is the vectors' origin, 2026-01-01T00:00:00Z in µs since the Unix
// epoch: on a boundary of every window the vectors use, so that an
// in-process sliding counter (whose windows start at its limiter's epoch)
// has the windows Redis gives it (whose start at the Unix epoch).
const vt0 = int64(1767225600) * 1_000_000

type rop uint8

const (
	opTake rop = iota
	opPeek
	opRefund // gives back the receipt of step ref, with n
)

func (o rop) String() string { return [...]string{"take", "peek", "refund"}[o] }

// rstep is one call at at (µs after vt0).
type rstep struct {
	at   int64
	op   rop
	n    int
	ref  int            // opRefund: the step whose receipt is given back
	want *gcra.Decision // optional; opRefund: Allowed is the answer
}

type rvector struct {
	name string
	rule atomiclimit.Rule
	// ref, if set, is the in-process rule Redis must match: rule with its
	// GCRA intervals rounded up to whole µs.
	ref   *atomiclimit.Rule
	steps []rstep
}

// settable is a clock the runner sets to each step's instant.
type settable struct{ t time.Time }

func (c *settable) Now() time.Time { return c.t }

func ms(d int64) int64 { return d * 1000 } // µs

func take(at int64, n int, want *gcra.Decision) rstep {
	return rstep{at: at, op: opTake, n: n, want: want}
}

func peek(at int64, n int, want *gcra.Decision) rstep {
	return rstep{at: at, op: opPeek, n: n, want: want}
}

func refund(at int64, ref, n int, ok bool) rstep {
	return rstep{at: at, op: opRefund, n: n, ref: ref, want: &gcra.Decision{Allowed: ok}}
}

func ruleVectors() []rvector {
	never := gcra.Never
	return []rvector{{
		// 3 per second on UTC seconds shifted by 250ms: windows
		// [k s + 250ms, (k+1) s + 250ms).
		name: "fixed-utc", rule: atomiclimit.FixedWindowUTC(3, time.Second, 250*time.Millisecond),
		steps: []rstep{
			take(0, 1, want(true, 2, 0, D(250), 0)),
			take(ms(100), 2, want(true, 0, 0, D(150), D(150))),
			take(ms(200), 1, want(false, 0, D(50), D(50), D(50))),
			peek(ms(249), 1, want(false, 0, time.Millisecond, time.Millisecond, time.Millisecond)),
			take(ms(250), 3, want(true, 0, 0, D(1000), D(1000))), // a new window: the whole quota
			refund(ms(300), 4, 2, true),                          // given back: 2 remain
			refund(ms(300), 0, 1, false),                         // a window past: nothing to give back
			take(ms(400), 2, want(true, 0, 0, D(850), D(850))),
			// A stale now (before the stored window) counts in the stored
			// window: stricter, and the window never moves back.
			take(ms(100), 1, want(false, 0, D(1150), D(1150), D(1150))),
			take(ms(1250), 4, want(false, 3, never, 0, 0)),
			take(ms(1250), 0, want(true, 3, 0, 0, 0)),
			take(ms(1250), -1, want(false, 3, never, 0, 0)),
			take(ms(1250), math.MaxInt, want(false, 3, never, 0, 0)),
			take(ms(1250), math.MinInt, want(false, 3, never, 0, 0)),
		},
	}, {
		// About 4 per rolling second, from two fixed windows: the previous
		// window's count weighs in by the part of it still in the rolling
		// window. The waits are exact in ns, not in µs.
		name: "counter", rule: atomiclimit.SlidingCounter(4, time.Second),
		steps: []rstep{
			take(ms(900), 3, want(true, 1, 0, D(1100), 0)),
			// 1.0s: prev 3 weighs 3: 2 more fit once it weighs 2, at
			// W − ⌊2W/3⌋ = 333333334ns into the window.
			take(ms(1000), 2, want(false, 1, 333333334*time.Nanosecond, D(1000), 0)),
			take(ms(1000), 1, want(true, 0, 0, D(2000), 333333334*time.Nanosecond)),
			peek(ms(1500), 1, want(true, 0, 0, D(1500), 166666667*time.Nanosecond)),
			take(ms(1500), 2, want(false, 1, 166666667*time.Nanosecond, D(1500), 0)),
			take(1666667, 2, want(true, 0, 0, 1333333*time.Microsecond, 333333*time.Microsecond)),
			refund(1666667, 5, 2, true),
			take(ms(2100), 1, want(true, 2, 0, D(1900), 0)),
			refund(ms(2100), 2, 1, true),  // its window is now prev: given back from prev
			refund(ms(3100), 2, 1, false), // prev has nothing of it left
			take(ms(2000), 5, want(false, 3, never, D(2000), 0)),
			// A stale now is decided at the start of the stored window.
			take(ms(1000), 1, want(true, 2, 0, D(3000), 0)),
		},
	}, {
		// A stale now with a previous window that weighs: decided at the
		// start of the stored window, where the weight is highest.
		name: "counter-stale", rule: atomiclimit.SlidingCounter(4, time.Second),
		steps: []rstep{
			take(ms(500), 2, want(true, 2, 0, D(1500), 0)),
			take(ms(1200), 1, want(true, 1, 0, D(1800), 0)),
			take(ms(900), 1, want(true, 0, 0, D(2100), D(600))),
		},
	}, {
		// prev·(W − pos) ≤ (N − cur − n)·W needs 106 bits here: 8428446
		// per day, the previous day full, at 10251µs into the next the
		// products differ by less than their doubles can tell.
		name: "counter-exact", rule: atomiclimit.SlidingCounter(8428446, 24*time.Hour),
		steps: []rstep{
			take(0, 8428446, want(true, 0, 0, 48*time.Hour, 24*time.Hour+10251001*time.Nanosecond)),
			take(ms(86_400_000)+10251, 1, want(false, 0, 1, 24*time.Hour-10251*time.Microsecond, 1)),
			take(ms(86_400_000)+10252, 1, want(true, 0, 0, 48*time.Hour-10252*time.Microsecond, 10250001*time.Nanosecond)),
		},
	}, {
		// Exactly 3 in every rolling second.
		name: "log", rule: atomiclimit.SlidingLog(3, time.Second),
		steps: []rstep{
			take(0, 1, want(true, 2, 0, D(1000), 0)),
			take(ms(10), 1, want(true, 1, 0, D(1000), 0)),
			take(ms(20), 1, want(true, 0, 0, D(1000), D(980))),
			take(ms(999), 1, want(false, 0, 1000*time.Microsecond, D(21), 1000*time.Microsecond)),
			take(ms(1000), 1, want(true, 0, 0, D(1000), D(10))),
			peek(ms(1010), 1, want(true, 0, 0, D(1000), D(10))),
			take(ms(1010), 2, want(false, 1, never, D(990), 0)),
			take(ms(1010), 0, want(true, 1, 0, D(990), 0)),
			// Backward time: the oldest expiry (1.01s) is 0.51s away.
			take(ms(500), 1, want(false, 0, D(510), D(1500), D(510))),
			take(ms(1010), 1, want(true, 0, 0, D(1000), D(10))),
			take(ms(1020), 1, want(true, 0, 0, D(1000), D(980))),
			refund(ms(1020), 10, 1, false), // the log gives nothing back
			// At the latest expiry every slot has expired.
			peek(ms(2020), 1, want(true, 2, 0, D(1000), 0)),
			take(ms(5000), 1, want(true, 2, 0, D(1000), 0)),
		},
	}, {
		name: "log-1", rule: atomiclimit.SlidingLog(1, 100*time.Millisecond),
		steps: []rstep{
			take(0, 1, want(true, 0, 0, D(100), D(100))),
			take(ms(99), 1, want(false, 0, time.Millisecond, time.Millisecond, time.Millisecond)),
			peek(ms(100), 1, want(true, 0, 0, D(100), D(100))),
			take(ms(100), 1, want(true, 0, 0, D(100), D(100))),
			take(ms(150), 0, want(true, 0, 0, D(50), D(50))),
		},
	}, {
		// 10/s burst 2, and 5 per UTC minute, and 3 in every rolling 10s.
		name: "bands", rule: atomiclimit.Bands(
			atomiclimit.GCRA(atomiclimit.PerSecond(10), 2),
			atomiclimit.FixedWindowUTC(5, time.Minute, 0),
			atomiclimit.SlidingLog(3, 10*time.Second)),
		steps: []rstep{
			take(0, 1, want(true, 1, 0, D(60000), 0)),
			take(0, 1, want(true, 0, 0, D(60000), D(100))),
			// GCRA denies (a wait of 100ms); the others would admit.
			take(0, 1, want(false, 0, D(100), D(60000), D(100))),
			take(ms(100), 1, want(true, 0, 0, D(59900), D(9900))),
			// Now the log is full until 10s: all or nothing, nothing taken.
			take(ms(5000), 1, want(false, 0, D(5000), D(55000), D(5000))),
			peek(ms(10000), 1, want(true, 1, 0, D(50000), 0)),
			// n above the log's 1: never, and the bands as they are.
			take(ms(10000), 2, want(false, 2, never, D(50000), 0)),
			refund(ms(10000), 3, 1, false), // bands give nothing back
			take(ms(10000), 1, want(true, 1, 0, D(50000), 0)),
			take(ms(10100), 1, want(true, 0, 0, D(49900), D(49900))), // the minute's 5th
			take(ms(60000), 1, want(true, 1, 0, D(60000), 0)),        // a new minute
		},
	}, {
		// At most 5 in every run of 4 slices of 250ms, and 2 per slice.
		name: "rolling", rule: atomiclimit.Rolling(5, time.Second, 250*time.Millisecond, 2),
		steps: []rstep{
			take(0, 2, want(true, 0, 0, D(1000), D(250))),
			take(ms(100), 1, want(false, 0, D(150), D(900), D(150))), // the slice's cap
			take(ms(250), 2, want(true, 0, 0, D(1000), D(250))),
			take(ms(500), 2, want(false, 1, D(500), D(750), 0)), // the window's quota, until slice 0 leaves
			take(ms(500), 1, want(true, 0, 0, D(1000), D(500))),
			refund(ms(600), 4, 1, true),
			peek(ms(999), 1, want(true, 0, 0, D(751), D(1))),
			take(ms(1000), 2, want(true, 0, 0, D(1000), D(250))),      // slice 0 has left the window
			take(ms(1000), 3, want(false, 0, never, D(1000), D(250))), // above the cap: never
			take(ms(900), 1, want(false, 0, D(350), D(1100), D(350))), // stale: counted in the head's slice
			take(ms(3000), 2, want(true, 0, 0, D(1000), D(250))),
			refund(ms(3000), 7, 2, false), // its slice is final
		},
	}, {
		// 60 per UTC minute and 10,000 per rolling day, by the hour.
		name: "bands-day", rule: atomiclimit.Bands(
			atomiclimit.FixedWindowUTC(60, time.Minute, 0),
			atomiclimit.Rolling(10_000, 24*time.Hour, time.Hour, 0)),
		steps: []rstep{
			take(0, 60, want(true, 0, 0, 24*time.Hour, time.Minute)),
			take(ms(1000), 1, want(false, 0, 59*time.Second, 24*time.Hour-time.Second, 59*time.Second)),
			take(ms(60_000), 60, want(true, 0, 0, 24*time.Hour-time.Minute, time.Minute)),
			peek(ms(86_400_000), 60, want(true, 0, 0, 24*time.Hour, time.Minute)), // hour 0 has left
			take(ms(86_400_000)-1, 1, want(true, 59, 0, 23*time.Hour+time.Microsecond, 0)),
		},
	}, {
		// A GCRA band not on a whole µs: Redis decides with T rounded up,
		// as the in-process rule with that T.
		name: "bands-rounded",
		rule: atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerSecond(3), 2), atomiclimit.SlidingCounter(5, time.Second)),
		ref:  ptr(atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(333334*time.Microsecond), 2), atomiclimit.SlidingCounter(5, time.Second))),
		steps: []rstep{
			take(0, 2, want(true, 0, 0, D(2000), 333334*time.Microsecond)),
			take(333333, 1, want(false, 0, time.Microsecond, 1666667*time.Microsecond, time.Microsecond)),
			take(333334, 1, nil),
		},
	}, {
		// 3 per window of a second from the first admission; anchors to
		// the ns (g = 1ns for N ≤ 3).
		name: "anchored", rule: atomiclimit.AnchoredWindow(3, time.Second),
		steps: []rstep{
			take(ms(100), 1, want(true, 2, 0, D(1000), 0)), // opens [100ms, 1.1s)
			take(ms(200), 2, want(true, 0, 0, D(900), D(900))),
			take(ms(300), 1, want(false, 0, D(800), D(800), D(800))),
			// The window's first admission, given back with two after it:
			// the window now opens at the give-back's time, [400ms, 1.4s).
			refund(ms(400), 0, 1, true),
			peek(ms(1200), 1, want(true, 0, 0, D(200), D(200))),
			take(ms(1200), 1, want(true, 0, 0, D(200), D(200))),
			take(ms(1400), 3, want(true, 0, 0, D(1000), D(1000))), // a new window
			refund(ms(1500), 5, 1, false),                         // its window has passed
			refund(ms(1500), 6, 3, true),                          // alone in its window: it closes
			// A stale now opens no window before the closed one's anchor.
			take(ms(1300), 1, want(true, 2, 0, D(1100), 0)),
			take(ms(2400), 1, want(true, 2, 0, D(1000), 0)),
			take(ms(2400), 4, want(false, 2, never, D(1000), 0)),
			take(ms(2400), 0, want(true, 2, 0, D(1000), 0)),
			take(ms(2500), 1, want(true, 1, 0, D(900), 0)),
			refund(ms(3400), 10, 1, false), // the first of two, after its window's end
		},
	}, {
		// 100 per window: anchors in units of 32ns, rounded up, so windows
		// end between microseconds (the first at 1s + 1024ns).
		name: "anchored-rounded", rule: atomiclimit.AnchoredWindow(100, time.Second),
		steps: []rstep{
			take(1, 100, want(true, 0, 0, time.Second+24, time.Second+24)),
			take(ms(1000), 1, want(false, 0, 1024, 1024, 1024)),
			take(ms(1000)+1, 1, want(false, 0, 24, 24, 24)),
			take(ms(1000)+2, 1, want(true, 99, 0, time.Second+16, 0)),
			refund(ms(1500), 3, 1, true),
		},
	}, {
		// A DenyAll band denies every request and stores nothing.
		name: "bands-denyall",
		rule: atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.DenyAll, 0), atomiclimit.SlidingLog(2, time.Second)),
		steps: []rstep{
			take(0, 1, want(false, 0, never, 0, never)),
			take(0, 0, want(true, 0, 0, 0, never)),
			peek(0, 1, want(false, 0, never, 0, never)),
		},
	}}
}

func ptr[T any](v T) *T { return &v }

// randomRuleVectors draws timelines over every branch of each rule: runs
// within a window, jumps over several, backward and stale times (at most
// half the shortest window behind the latest), n out of range, peeks,
// refunds of earlier receipts (and of denials').
func randomRuleVectors(seed uint64) []rvector {
	rng := rand.New(rand.NewPCG(seed, 14))
	type kind struct {
		rule  atomiclimit.Rule
		scale int64 // µs: the shortest window
		maxN  int
	}
	kinds := []kind{
		{atomiclimit.FixedWindowUTC(3, 100*time.Millisecond, 30*time.Millisecond), ms(100), 3},
		{atomiclimit.FixedWindowUTC(50, time.Second, -time.Hour-7*time.Microsecond), ms(1000), 50},
		{atomiclimit.SlidingCounter(4, 100*time.Millisecond), ms(100), 4},
		{atomiclimit.SlidingCounter(7, 3*time.Second), ms(3000), 7},
		{atomiclimit.SlidingCounter(1000, 24*time.Hour), ms(86_400_000), 1000},
		{atomiclimit.SlidingLog(1, 50*time.Millisecond), ms(50), 1},
		{atomiclimit.SlidingLog(4, 100*time.Millisecond), ms(100), 1},
		{atomiclimit.SlidingLog(17, time.Second+3*time.Microsecond), ms(1000), 1},
		{atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(20*time.Millisecond), 3), atomiclimit.FixedWindowUTC(6, 200*time.Millisecond, 0)), ms(100), 3},
		{atomiclimit.Bands(atomiclimit.SlidingCounter(5, 200*time.Millisecond), atomiclimit.FixedWindowUTC(8, time.Second, 0), atomiclimit.SlidingLog(4, 150*time.Millisecond)), ms(150), 1},
		{atomiclimit.Bands(atomiclimit.FixedWindowUTC(4, 100*time.Millisecond, 0), atomiclimit.SlidingCounter(9, 300*time.Millisecond)), ms(100), 4},
		{atomiclimit.Rolling(5, time.Second, 200*time.Millisecond, 0), ms(200), 5},
		{atomiclimit.Rolling(10, time.Second, 100*time.Millisecond, 3), ms(100), 3},
		{atomiclimit.Rolling(3, 300*time.Millisecond, 300*time.Millisecond, 0), ms(300), 3},
		{atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(50*time.Millisecond), 2), atomiclimit.Rolling(6, 600*time.Millisecond, 200*time.Millisecond, 0)), ms(200), 2},
		{atomiclimit.Bands(atomiclimit.Rolling(8, time.Second, 250*time.Millisecond, 3), atomiclimit.SlidingLog(5, 500*time.Millisecond)), ms(250), 1},
		{atomiclimit.AnchoredWindow(3, 100*time.Millisecond), ms(100), 3},
		{atomiclimit.AnchoredWindow(50, 300*time.Millisecond+3*time.Microsecond), ms(300), 50},
		{atomiclimit.AnchoredWindow(40000, 2*time.Second), ms(2000), 40000},
		{atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(50*time.Millisecond), 2), atomiclimit.AnchoredWindow(5, 400*time.Millisecond)), ms(200), 2},
		{atomiclimit.Bands(atomiclimit.AnchoredWindow(4, 200*time.Millisecond), atomiclimit.SlidingLog(6, 300*time.Millisecond)), ms(200), 1},
	}
	var vs []rvector
	for i, k := range kinds {
		steps := make([]rstep, 80)
		at, latest := int64(0), int64(0)
		for j := range steps {
			switch r := rng.IntN(20); {
			case r < 12:
				at += rng.Int64N(k.scale / 3)
			case r < 16:
				at += rng.Int64N(3 * k.scale)
			case r < 17:
				at += rng.Int64N(1000) // within a millisecond
			case r < 18 && j > 0:
				// Exactly a window after an earlier step: an expiry, a
				// boundary, a window's end.
				at = steps[rng.IntN(j)].at + k.scale
			default:
				at = max(0, at-rng.Int64N(k.scale/2)) // backward
			}
			// Never more than half the shortest window behind the latest
			// step: a state seen from further back would be idle more than
			// twice the longest a state of the rule waits, which the script
			// takes for a corrupt one (TestRuleCorruptThreshold).
			at = max(at, latest-k.scale/2)
			latest = max(latest, at)
			n := 1 + rng.IntN(k.maxN)
			if rng.IntN(10) == 0 {
				n = k.maxN + 1 - rng.IntN(k.maxN+3) // sometimes < 1 or > maxN
			}
			s := rstep{at: at, n: n}
			switch r := rng.IntN(10); {
			case r < 6:
				s.op = opTake
			case r < 8:
				s.op = opPeek
			default:
				if j == 0 {
					break
				}
				s.op, s.ref = opRefund, rng.IntN(j)
				s.n = steps[s.ref].n
			}
			steps[j] = s
		}
		vs = append(vs, rvector{name: fmt.Sprintf("random-%d-%d", seed, i), rule: k.rule, steps: steps})
	}
	return vs
}

func allRuleVectors() []rvector {
	vs := ruleVectors()
	for seed := range uint64(3) {
		vs = append(vs, randomRuleVectors(seed)...)
	}
	return vs
}

// TestVectorsRulesInProcess runs the hand-written expectations against the
// in-process limiters alone: no server needed.
func TestVectorsRulesInProcess(t *testing.T) {
	for _, v := range ruleVectors() {
		clk, k := reference(t, v)
		ctx := context.Background()
		receipts := make([]atomiclimit.Receipt, len(v.steps))
		for i, s := range v.steps {
			clk.t = time.UnixMicro(vt0 + s.at)
			var d gcra.Decision
			switch s.op {
			case opTake:
				d, receipts[i], _ = k.Take(ctx, "k", s.n)
			case opPeek:
				d, _ = k.Peek(ctx, "k", s.n)
			case opRefund:
				d.Allowed, _ = k.Refund(ctx, "k", s.n, receipts[s.ref])
			}
			if s.want != nil {
				assert.Equal(t, *s.want, d, "%s step %d (%v at %dµs n %d)", v.name, i, s.op, s.at, s.n)
			}
		}
	}
}

// reference returns the in-process limiter of v, on a clock at vt0.
func reference(t *testing.T, v rvector) (*settable, *atomiclimit.Keyed[string]) {
	t.Helper()
	rule := v.rule
	if v.ref != nil {
		rule = *v.ref
	}
	clk := &settable{t: time.UnixMicro(vt0)}
	k, err := atomiclimit.NewKeyedRule[string](rule, atomiclimit.WithClock(clk), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err, v.name)
	t.Cleanup(k.Close)
	return clk, k
}

func TestVectorsRulesRedis(t *testing.T) {
	c := sharedServer(t).client(t)
	before := redislimit.ScriptMismatches()
	for _, v := range allRuleVectors() {
		runRuleVector(t, c, v, "")
	}
	assert.Equal(t, before, redislimit.ScriptMismatches(), "script and in-process disagreed on Allowed")
}

// runRuleVector runs v through the in-process reference and through Redis
// (via c, with opts, on the key v.name under prefix and a unique prefix)
// and fails on the first difference. An admission's key expires in real
// time after its ResetAfter on the vector's timeline (100ms for some), and
// the test gives it an hour only once it has checked that expiry: a run
// held up longer than that (a loaded machine) has lost the key in Redis,
// not in process, and is run again, at most twice, on a fresh key.
func runRuleVector(t *testing.T, c redis.UniversalClient, v rvector, prefix string, opts ...redislimit.Option) {
	t.Helper()
	for try := 1; ; try++ {
		if runRuleVectorOnce(t, c, v, prefix, opts...) {
			return
		}
		if try == 3 {
			t.Fatalf("%s: real time outran a key's expiry in %d runs", v.name, try)
		}
		t.Logf("%s: real time outran a key's expiry; running the vector again", v.name)
	}
}

// runRuleVectorOnce is one run of runRuleVector; it reports false when a
// key expired in real time before the test could give it an hour.
func runRuleVectorOnce(t *testing.T, c redis.UniversalClient, v rvector, prefix string, opts ...redislimit.Option) bool {
	t.Helper()
	ctx := context.Background()
	clk, k := reference(t, v)
	l, err := redislimit.NewRule(c, v.rule, append(opts, redislimit.WithKeyPrefix(prefix+uniq(t)))...)
	require.NoError(t, err, v.name)
	if v.ref == nil {
		require.Equal(t, k.Quota("k"), l.Quota("k"), "%s: Quota", v.name)
	}
	require.Equal(t, k.Quota("k").Refunds(), l.Quota("k").Refunds(), "%s: Refunds", v.name)
	key := v.name
	refReceipts := make([]atomiclimit.Receipt, len(v.steps))
	receipts := make([]atomiclimit.Receipt, len(v.steps))
	for i, s := range v.steps {
		now := vt0 + s.at
		clk.t = time.UnixMicro(now)
		where := fmt.Sprintf("%s step %d (%v at %dµs n %d)", v.name, i, s.op, s.at, s.n)
		var want, got gcra.Decision
		called := time.Now()
		switch s.op {
		case opTake:
			want, refReceipts[i], _ = k.Take(ctx, key, s.n)
			var r redislimit.Result
			r, receipts[i] = l.TakeAt(ctx, key, s.n, now)
			require.Equal(t, redislimit.SourceRedis, r.Source, "%s: %v", where, r.Err)
			got = r.Decision
			require.Equal(t, refReceipts[i] != (atomiclimit.Receipt{}), receipts[i] != (atomiclimit.Receipt{}), "%s: receipt %d, in process %d", where, receipts[i], refReceipts[i])
		case opPeek:
			want, _ = k.Peek(ctx, key, s.n)
			r := l.DecideAt(ctx, key, s.n, false, now)
			require.Equal(t, redislimit.SourceRedis, r.Source, "%s: %v", where, r.Err)
			got = r.Decision
		case opRefund:
			want.Allowed, _ = k.Refund(ctx, key, s.n, refReceipts[s.ref])
			got.Allowed, err = l.RefundAt(ctx, key, s.n, receipts[s.ref], now)
			require.NoError(t, err, where)
		}
		require.Equal(t, want, got, "%s: redis vs in-process", where)
		if s.want != nil {
			require.Equal(t, *s.want, got, "%s: hand-written", where)
		}
		if s.op == opTake && got.Allowed && s.n > 0 {
			if !checkExpiry(t, c, l.Key(key), got.ResetAfter, called, where) {
				return false
			}
			// The expiry is exact: at now + ResetAfter the key decides as
			// an absent one, and 1µs before it does not.
			clk.t = time.UnixMicro(now).Add(got.ResetAfter)
			fresh := fmt.Sprint("fresh", i)
			for _, n := range []int{0, 1, l.Quota("k").Limit} {
				a, _ := k.Peek(ctx, key, n)
				b, _ := k.Peek(ctx, fresh, n)
				require.Equal(t, b, a, "%s: not idle after ResetAfter (n %d)", where, n)
			}
			clk.t = clk.t.Add(-time.Microsecond)
			a, _ := k.Peek(ctx, key, 0)
			b, _ := k.Peek(ctx, fresh, 0)
			require.NotEqual(t, b, a, "%s: idle before ResetAfter", where)
		}
	}
	return true
}

// checkExpiry asserts that rkey expires ⌈ahead/1ms⌉ + 1 ms after the
// admission (less the time since the call, measured: a loaded machine can
// take tens of milliseconds), then gives it an hour. It reports false if
// the key had already expired, which it allows only once that time has
// passed since the call.
func checkExpiry(t *testing.T, c redis.UniversalClient, rkey string, ahead time.Duration, called time.Time, where string) bool {
	t.Helper()
	ctx := context.Background()
	pttl, err := c.PTTL(ctx, rkey).Result()
	require.NoError(t, err, where)
	ttl := (ahead+time.Millisecond-1)/time.Millisecond*time.Millisecond + time.Millisecond
	kept := pttl >= 0
	if kept {
		require.LessOrEqual(t, pttl, ttl, "%s: TTL %v, ResetAfter %v", where, pttl, ahead)
		passed := time.Since(called)
		require.Greater(t, pttl, ttl-passed-time.Millisecond, "%s: TTL %v, ResetAfter %v, %v since the call", where, pttl, ahead, passed)
		kept, err = c.PExpire(ctx, rkey, time.Hour).Result()
		require.NoError(t, err, where)
	}
	if !kept {
		require.GreaterOrEqual(t, time.Since(called), ttl-time.Millisecond, "%s: the key expired before its TTL %v had passed", where, ttl)
	}
	return kept
}
