package gcra_test

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// TestRefund: the give-back of one admission, on a timeline (T = 10ms,
// B = 3). Alone and last, it puts back everything still ahead of now;
// behind later admissions, only what none of them depends on; never below
// now; never anything for nothing.
func TestRefund(t *testing.T) {
	p := mustParams(t, gcra.Per(100, time.Second), 3)
	const (
		alone    = gcra.Alone
		unqueued = gcra.NoneQueued
		anything = gcra.Anything
	)
	for _, c := range []struct {
		name      string
		tat, now  int64
		stored    int64
		at        int64
		n         int
		since     gcra.Since
		back      int64
		shifts    bool
		ok        bool
		reasoning string
	}{
		{"last, at once", 30 * ms, 0, 30 * ms, 0, 1, alone, 20 * ms, false, true, "the state before it"},
		{"last, 5ms on", 30 * ms, 5 * ms, 30 * ms, 0, 1, alone, 20 * ms, false, true, "its slot is still ahead"},
		{"last, its slot partly past", 10 * ms, 5 * ms, 10 * ms, 0, 1, alone, 5 * ms, false, true, "never below now"},
		{"last, its slot past", 10 * ms, 10 * ms, 10 * ms, 0, 1, alone, 10 * ms, false, false, "nothing ahead of now"},
		{"a reservation queued behind it", 50 * ms, 1 * ms, 30 * ms, 0, 2, alone, 40 * ms, true, true,
			"the 2 tokens after it are due at 20ms: 10ms back, or 4 would be due then"},
		{"others after it, none queued", 50 * ms, 1 * ms, 30 * ms, 0, 2, unqueued, 31 * ms, true, true, "due + n·T − now"},
		{"others after it, some queued", 50 * ms, 1 * ms, 30 * ms, 0, 2, anything, 50 * ms, false, false, "a reservation may be due at 40ms"},
		{"others queued, its slot within a token of tat", 25 * ms, 1 * ms, 30 * ms, 0, 2, anything, 20 * ms, true, true, "due + n·T + T − tat: nothing can be due after it"},
		{"not alone, late", 50 * ms, 25 * ms, 30 * ms, 0, 2, unqueued, 50 * ms, false, false, "nothing certainly its own is left"},
		// The reservations of x/time/rate's rule: reserve 3, then 1 (due
		// at 10ms), then 3 (due at 40ms), all at 0; cancel the 1.
		{"a reservation with 3 queued behind it", 70 * ms, 0, 40 * ms, 0, 1, alone, 70 * ms, false, false,
			"the 3 behind it are due at 40ms, one token after it"},
		// Reserve 3, then 2 (due at 20ms), then 1 (due at 30ms); cancel the 2.
		{"a reservation with 1 queued behind it", 60 * ms, 0, 50 * ms, 0, 2, alone, 40 * ms, true, true,
			"all of it: the 1 behind it is due at 30ms, 3 tokens after the first 3"},
		{"a queued reservation, last, not alone", 50 * ms, 0, 50 * ms, 0, 2, unqueued, 30 * ms, true, true,
			"due at 20ms, and nothing queued since: none due after it"},
		{"a state that cannot hold it", 5 * ms, 0, 30 * ms, 0, 1, alone, 5 * ms, false, false,
			"due at 0 with 10ms of tokens: a state below 10ms replaced it"},
		{"n above burst", 30 * ms, 0, 30 * ms, 0, 4, alone, 30 * ms, false, false, ""},
		{"n = 0", 30 * ms, 0, 30 * ms, 0, 0, alone, 30 * ms, false, false, ""},
		{"a retired bucket", 11 << 59, 0, 30 * ms, 0, 1, alone, 11 << 59, false, false, "not a state a decision stores"},
	} {
		back, shifts, ok := p.Refund(c.tat, c.now, c.stored, c.at, c.n, c.since)
		assert.Equal(t, c.ok, ok, "%s: ok (%s)", c.name, c.reasoning)
		assert.Equal(t, c.back, back, "%s: back (%s)", c.name, c.reasoning)
		assert.Equal(t, c.shifts, shifts, "%s: shifts", c.name)
	}
	_, _, ok := mustParams(t, gcra.Unlimited, 1).Refund(30*ms, 0, 30*ms, 0, 1, gcra.Alone)
	assert.False(t, ok, "Unlimited takes nothing, and gives nothing back")
	_, _, ok = new(gcra.Params).Refund(30*ms, 0, 30*ms, 0, 1, gcra.Alone)
	assert.False(t, ok, "the zero Params")
}

// The interleaving model. Each request reads the clock and the stripe's two
// counters, and is decided (load, decision and store in one step: a lost
// CompareAndSwap only decides again, on a state no older; a reservation
// that queues counts itself before its store). Then, by its kind, it is
// kept (its tokens are used when due), given back at once whatever the
// clock (a policy stack's give-back), or cancelled (a reservation: only
// while its tokens are not yet due, as Reservation.Cancel does). A
// give-back takes the give-back lock, loads the state, reads the clock and
// the counters, and stores Refund's result, or starts again at the load if
// the state changed. Between any two steps the clock may advance.
//
// Every state of every run is checked against the schedule: the live
// admissions (not given back, not cancelled) at the times they are due,
// with the admissions a run starts behind (its initial state). The
// schedule must conform (no window [a, b] with more than B + (b − a)/T
// tokens due), and the stored state must be at least the TAT the schedule
// leaves (max over k of d_k + G(d_k)), which is what keeps every later
// admission conforming. At the end of a run, how far the stored state is
// above that TAT (as seen at the clock) is the give-backs' shortfall.

const (
	pcClock = iota
	pcDecide
	pcCheck // a cancel: are its tokens due yet?
	pcLock
	pcLoad
	pcReadT
	pcStore
	pcDone
)

const (
	keep     = iota // its tokens are used
	giveBack        // given back whatever the clock
	cancel          // cancelled if not yet due
)

type modelReq struct {
	n, kind, pc   int8
	wait, live    bool
	queued        int8 // 1 if its own reservation queued (counted itself)
	s0, q0, since int8
	at, due       int16
	stored        int16
	loaded, t     int16
}

type modelWorld struct {
	clock, state   int16
	shifts, queued int8 // the stripe's counters
	locked         int8
	advances       int8 // clock advances left
	prior          int8 // the admissions before the run: priors[prior]
	nreq           int8
	reqs           [3]modelReq
}

// An admission a run starts behind, live for ever.
type priorAdmission struct{ due, n int16 }

type interleavings struct {
	p        *gcra.Params
	maxWait  int64
	steps    []int16 // clock advances allowed between two steps
	priors   [][]priorAdmission
	seen     map[modelWorld]struct{}
	states   int // states checked, over every configuration
	ends     int
	short    int64 // the largest shortfall at the end of a run
	witness  modelWorld
	failures []string
}

func (m *interleavings) explore(w modelWorld) {
	if _, ok := m.seen[w]; ok || len(m.failures) > 0 {
		return
	}
	m.seen[w] = struct{}{}
	sched := m.check(&w)
	done := true
	for i := range w.nreq {
		if w.reqs[i].pc != pcDone {
			done = false
			break
		}
	}
	if done {
		m.ends++
		if short := int64(max(w.state, w.clock)) - max(sched, int64(w.clock)); short > m.short {
			m.short, m.witness = short, w
		}
		return
	}
	for i := range w.nreq {
		r := &w.reqs[i]
		if r.pc == pcDone || r.pc == pcLock && w.locked >= 0 {
			continue
		}
		for _, dt := range m.steps {
			if dt > 0 && w.advances == 0 {
				continue
			}
			w2 := w
			if dt > 0 {
				w2.clock += dt
				w2.advances--
			}
			m.step(&w2, i)
			m.explore(w2)
		}
	}
}

// check checks w's schedule and returns the TAT it leaves.
func (m *interleavings) check(w *modelWorld) int64 {
	var due, work [8]int64
	k := 0
	for _, a := range m.priors[w.prior] {
		due[k], work[k] = int64(a.due), int64(a.n)*int64(m.p.Interval())
		k++
	}
	for i := range w.nreq {
		if r := &w.reqs[i]; r.live {
			due[k], work[k] = int64(r.due), int64(r.n)*int64(m.p.Interval())
			k++
		}
	}
	span := int64(m.p.Span())
	sched := int64(0)
	for a := range k {
		g := int64(0) // G(due[a])
		for b := range k {
			if due[b] >= due[a] {
				g += work[b]
			}
		}
		sched = max(sched, due[a]+g)
		for b := range k {
			if due[b] < due[a] {
				continue
			}
			in := int64(0) // the work due in [due[a], due[b]]
			for c := range k {
				if due[c] >= due[a] && due[c] <= due[b] {
					in += work[c]
				}
			}
			if in > span+due[b]-due[a] {
				m.failures = append(m.failures, fmt.Sprintf("%d ns of work due in [%d, %d], over B·T + %d: %+v", in, due[a], due[b], due[b]-due[a], *w))
			}
		}
	}
	if int64(w.state) < sched {
		m.failures = append(m.failures, fmt.Sprintf("stored %d < %d, the TAT the schedule leaves: %+v", w.state, sched, *w))
	}
	return sched
}

func (m *interleavings) step(w *modelWorld, i int8) {
	r := &w.reqs[i]
	switch r.pc {
	case pcClock:
		r.at, r.s0, r.q0, r.pc = w.clock, w.shifts, w.queued, pcDecide
	case pcDecide:
		maxWait := int64(0)
		if r.wait {
			maxWait = m.maxWait
		}
		next, wait, ok := m.p.Reserve(int64(w.state), int64(r.at), int(r.n), maxWait)
		if !ok {
			r.pc = pcDone
			return
		}
		if wait > 0 {
			w.queued++
			r.queued = 1
		}
		w.state, r.stored, r.due, r.live = int16(next), int16(next), r.at+int16(wait), true
		switch r.kind {
		case keep:
			r.pc = pcDone
		case giveBack:
			r.live, r.pc = false, pcLock
		case cancel:
			r.pc = pcCheck
		}
	case pcCheck:
		if w.clock > r.due {
			r.pc = pcDone // due: its tokens are used
			return
		}
		r.live, r.pc = false, pcLock
	case pcLock:
		w.locked, r.pc = i, pcLoad
	case pcLoad:
		r.loaded, r.pc = w.state, pcReadT
	case pcReadT:
		// First the load, then the clock and the counters.
		r.t, r.pc = w.clock, pcStore
		switch {
		case w.shifts == r.s0:
			r.since = int8(gcra.Alone)
		case w.queued == r.q0+r.queued:
			r.since = int8(gcra.NoneQueued)
		default:
			r.since = int8(gcra.Anything)
		}
	case pcStore:
		if w.state != r.loaded {
			r.pc = pcLoad // the CompareAndSwap failed
			return
		}
		back, shifts, ok := m.p.Refund(int64(r.loaded), int64(r.t), int64(r.stored), int64(r.at), int(r.n), gcra.Since(r.since))
		if ok {
			w.state = int16(back)
			if shifts {
				w.shifts++
			}
		}
		w.locked, r.pc = -1, pcDone
	}
}

// advancesFlag sets how many times the clock may advance in one run of
// TestRefundInterleavings: by default 2 for admissions and 1 for
// reservations (about 7 s in all); -advances=2 checks 1.4·10^8 states of
// reservations in about a minute and a half.
var advancesFlag = flag.Int("advances", -1, "clock advances per run in TestRefundInterleavings (-1: each case's default)")

// TestRefundInterleavings runs every interleaving of two and three
// requests, each an admission or a reservation (due up to 3 T later), of
// 1 or 2 tokens (B = 2, T = 2 ns), kept, given back, or cancelled, behind
// three histories, with the clock advancing by 0, 1 or 3 ns between steps
// (at most -advances times), and checks every state (see check). It
// asserts the shortfall it reports: with admissions only, a give-back
// leaves the state at most 1 T above the schedule's TAT, the clock's
// advance between an admission and its give-back; with reservations, 3 T,
// from cancels in the order of reserving: a reservation cancelled while
// later ones depend on it gives nothing back, and once those are cancelled
// its tokens cannot be told from theirs (x/time/rate's rule loses them
// too). Cancels in the reverse order give everything back.
func TestRefundInterleavings(t *testing.T) {
	for _, c := range []struct {
		name      string
		waits     []bool
		kinds     []int8
		advances  int8
		wantShort int64 // the shortfall asserted, ns
	}{
		{"admissions", []bool{false}, []int8{keep, giveBack}, 2, 2},
		{"reservations", []bool{false, true}, []int8{keep, giveBack, cancel}, 1, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustParams(t, gcra.Every(2), 2)
			m := &interleavings{
				p:       p,
				maxWait: 6,
				steps:   []int16{0, 1, 3},
				// Initial states 0, 2 and 5 at clock 1: nothing, one token
				// at 0, two tokens at 1.
				priors: [][]priorAdmission{nil, {{0, 1}}, {{1, 2}}},
				seen:   map[modelWorld]struct{}{},
			}
			advances := c.advances
			if *advancesFlag >= 0 {
				advances = int8(*advancesFlag)
			}
			if testing.Short() || raceEnabled {
				advances = min(advances, 1)
			}
			var kinds []modelReq
			for _, wait := range c.waits {
				for _, kind := range c.kinds {
					if kind == giveBack && wait {
						continue // a stack's give-back follows an admission
					}
					for n := int8(1); n <= 2; n++ {
						kinds = append(kinds, modelReq{n: n, kind: kind, wait: wait})
					}
				}
			}
			for prior, state := range []int16{0, 2, 5} {
				for nreq := int8(2); nreq <= 3; nreq++ {
					var each func(w modelWorld, k int8)
					each = func(w modelWorld, k int8) {
						if k == nreq {
							// Runs of different requests share no state: a
							// map per configuration holds memory down.
							m.states += len(m.seen)
							clear(m.seen)
							m.explore(w)
							return
						}
						for _, r := range kinds {
							w.reqs[k] = r
							each(w, k+1)
						}
					}
					each(modelWorld{clock: 1, state: state, prior: int8(prior), locked: -1, nreq: nreq, advances: advances}, 0)
				}
			}
			m.states += len(m.seen)
			for _, f := range m.failures {
				t.Error(f)
			}
			t.Logf("%d states checked, %d complete runs; stored state at most %d ns (%.1f T) above the schedule's TAT", m.states, m.ends, m.short, float64(m.short)/2)
			require.LessOrEqual(t, m.short, c.wantShort, "the shortfall the test claims, in %+v", m.witness)
		})
	}
}

// TestRefundAloneIsExact: a give-back with nothing else in between puts
// the state back exactly where it was, for every state and time.
func TestRefundAloneIsExact(t *testing.T) {
	p := mustParams(t, gcra.Every(10*time.Nanosecond), 4)
	for tat := int64(0); tat < 60; tat++ {
		for at := int64(0); at < 60; at++ {
			for n := 1; n <= 4; n++ {
				next, ok := p.Admit(tat, at, n)
				if !ok {
					continue
				}
				for dt := int64(0); dt < 50; dt++ {
					now := at + dt
					back, shifts, ok := p.Refund(next, now, next, at, n, gcra.Alone)
					if !ok {
						back = next
					}
					assert.False(t, shifts)
					if max(back, now) != max(tat, now) {
						t.Fatalf("tat %d, n %d at %d, given back at %d: %d, want the state before (%d) as seen at %d", tat, n, at, now, back, tat, now)
					}
				}
			}
		}
	}
}

// FuzzRefund drives three requests through one interleaving the fuzzer
// chooses (each byte: which request steps next, and how far the clock
// moves), with parameters and kinds it chooses, and checks every state
// against the schedule (see check).
func FuzzRefund(f *testing.F) {
	f.Add(uint8(2), uint8(2), uint8(0), uint16(0b010_001_100), uint8(0b011), []byte{0, 1, 0, 1, 0x10, 0, 0x21, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2})
	f.Add(uint8(7), uint8(3), uint8(20), uint16(0b110_101_011), uint8(0b110), []byte{1, 1, 0, 0, 0x32, 2, 2, 0x15, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, interval, burst, maxWait uint8, kinds uint16, big uint8, sched []byte) {
		p, err := gcra.NewParams(gcra.Every(time.Duration(1+interval%16)), 1+int(burst%4))
		if err != nil {
			t.Skip()
		}
		m := &interleavings{p: &p, maxWait: int64(maxWait), priors: [][]priorAdmission{nil}}
		w := modelWorld{clock: 1, locked: -1, nreq: 3}
		for k := range w.nreq {
			bits := kinds >> (3 * k)
			w.reqs[k] = modelReq{n: int8(1 + int(big>>k&1)%p.Burst()), kind: int8(bits&3) % 3, wait: bits&4 != 0}
		}
		check := func() {
			m.check(&w)
			if len(m.failures) > 0 {
				t.Fatal(m.failures[0])
			}
		}
		sched = sched[:min(len(sched), 64)] // keeps the clock within int16
		for _, b := range sched {
			i := int8(b&3) % w.nreq
			if w.reqs[i].pc == pcDone || w.reqs[i].pc == pcLock && w.locked >= 0 {
				continue
			}
			w.clock += int16(b >> 2)
			m.step(&w, i)
			check()
		}
		// Finish the requests: the lock's holder first, then in order.
		for {
			i := w.locked
			if i < 0 {
				for i = 0; i < w.nreq && w.reqs[i].pc == pcDone; i++ {
				}
				if i == w.nreq {
					break
				}
			}
			m.step(&w, i)
			check()
		}
	})
}
