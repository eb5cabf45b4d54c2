package gcra_test

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// TestRefund: the give-back of one admission, on a timeline (T = 10ms,
// B = 3). Alone, it puts back everything still ahead of now; otherwise what
// is certainly its own; never below now; never anything for nothing.
func TestRefund(t *testing.T) {
	p := mustParams(t, gcra.Per(100, time.Second), 3)
	for _, c := range []struct {
		name      string
		tat, now  int64
		stored    int64
		at        int64
		n         int
		alone     bool
		back      int64
		shifts    bool
		ok        bool
		reasoning string
	}{
		{"last, at once", 30 * ms, 0, 30 * ms, 0, 1, true, 20 * ms, false, true, "the state before it"},
		{"last, 5ms on", 30 * ms, 5 * ms, 30 * ms, 0, 1, true, 20 * ms, false, true, "its slot is still ahead"},
		{"last, its slot partly past", 10 * ms, 5 * ms, 10 * ms, 0, 1, true, 5 * ms, false, true, "never below now"},
		{"last, its slot past", 10 * ms, 10 * ms, 10 * ms, 0, 1, true, 10 * ms, false, false, "nothing ahead of now"},
		{"others after it, alone", 50 * ms, 1 * ms, 30 * ms, 0, 2, true, 30 * ms, true, true, "its whole n·T; the later slots move"},
		{"others after it, not alone", 50 * ms, 1 * ms, 30 * ms, 0, 2, false, 31 * ms, true, true, "at + n·T − now"},
		{"not alone, late", 50 * ms, 25 * ms, 30 * ms, 0, 2, false, 50 * ms, false, false, "nothing certainly its own is left"},
		{"n above burst", 30 * ms, 0, 30 * ms, 0, 4, true, 30 * ms, false, false, ""},
		{"n = 0", 30 * ms, 0, 30 * ms, 0, 0, true, 30 * ms, false, false, ""},
		{"a retired bucket", 11 << 59, 0, 30 * ms, 0, 1, true, 11 << 59, false, false, "not a state a decision stores"},
	} {
		back, shifts, ok := p.Refund(c.tat, c.now, c.stored, c.at, c.n, c.alone)
		assert.Equal(t, c.ok, ok, "%s: ok (%s)", c.name, c.reasoning)
		assert.Equal(t, c.back, back, "%s: back (%s)", c.name, c.reasoning)
		assert.Equal(t, c.shifts, shifts, "%s: shifts", c.name)
	}
	_, _, ok := mustParams(t, gcra.Unlimited, 1).Refund(30*ms, 0, 30*ms, 0, 1, true)
	assert.False(t, ok, "Unlimited takes nothing, and gives nothing back")
	_, _, ok = new(gcra.Params).Refund(30*ms, 0, 30*ms, 0, 1, true)
	assert.False(t, ok, "the zero Params")
}

// The interleaving model. Each request reads the clock, is decided (load,
// decision and store in one step: a lost CompareAndSwap only decides again,
// on a state no older), and, if it is one to give back, then takes the
// give-back lock, loads the state, reads the clock, and stores Refund's
// result, or starts again at the load if the state changed. Between any two
// steps the clock may advance. alone is the epoch check the stripe does:
// no shifting give-back since the request read the clock.
//
// The ideal state replays, in the order they were stored, only the
// admissions that were not given back, each at its own time. At the end the
// stored state must be at least the ideal one (no quota created, for any
// later request, stale or not), and the excess is reported.

const (
	pcClock = iota
	pcDecide
	pcLock
	pcLoad
	pcReadT
	pcStore
	pcDone
)

type modelReq struct {
	n         int
	giveBack  bool
	pc        int8
	at, epoch int64
	stored    int64
	loaded, t int64
}

type modelWorld struct {
	clock, state, ideal, epoch int64
	locked                     int8
	advances                   int8 // clock advances left
	reqs                       [3]modelReq
	nreq                       int8
}

type interleavings struct {
	p        *gcra.Params
	maxWait  int64
	steps    []int64 // clock advances allowed between two steps
	seen     map[modelWorld]bool
	ends     int
	excess   int64
	failures []string
}

func (m *interleavings) explore(w modelWorld) {
	if m.seen[w] || len(m.failures) > 0 {
		return
	}
	m.seen[w] = true
	done := true
	for i := range w.nreq {
		if w.reqs[i].pc != pcDone {
			done = false
			break
		}
	}
	if done {
		m.ends++
		if w.state < w.ideal {
			m.failures = append(m.failures, fmt.Sprintf("stored %d < ideal %d at clock %d: %+v", w.state, w.ideal, w.clock, w))
		}
		m.excess = max(m.excess, max(w.state, w.clock)-max(w.ideal, w.clock))
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

func (m *interleavings) step(w *modelWorld, i int8) {
	r := &w.reqs[i]
	switch r.pc {
	case pcClock:
		r.at, r.epoch, r.pc = w.clock, w.epoch, pcDecide
	case pcDecide:
		next, _, ok := m.p.Reserve(w.state, r.at, r.n, m.maxWait)
		if !ok {
			r.pc = pcDone
			return
		}
		w.state, r.stored = next, next
		if r.giveBack {
			r.pc = pcLock
			return
		}
		w.ideal = max(w.ideal, r.at) + int64(r.n)*int64(m.p.Interval())
		r.pc = pcDone
	case pcLock:
		w.locked, r.pc = i, pcLoad
	case pcLoad:
		r.loaded, r.pc = w.state, pcReadT
	case pcReadT:
		r.t, r.pc = w.clock, pcStore
	case pcStore:
		if w.state != r.loaded {
			r.pc = pcLoad // the CompareAndSwap failed
			return
		}
		back, shifts, ok := m.p.Refund(r.loaded, r.t, r.stored, r.at, r.n, w.epoch == r.epoch)
		if ok {
			w.state = back
			if shifts {
				w.epoch++
			}
		}
		w.locked, r.pc = -1, pcDone
	}
}

// advancesFlag sets how many times the clock may advance in one run of
// TestRefundInterleavings: 2 by default (a few seconds); 3 runs for
// about two minutes (go test ./gcra -run Interleavings -advances=3).
var advancesFlag = flag.Int("advances", 2, "clock advances per run in TestRefundInterleavings")

// TestRefundInterleavings runs every interleaving of two and three
// requests (any of them given back, n of 1 or 2), from three initial
// states, with the clock advancing by 0, 1 or 3 ns between steps (at most
// -advances times), for immediate admissions and for reservations.
func TestRefundInterleavings(t *testing.T) {
	for _, c := range []struct {
		name    string
		maxWait int64
	}{{"admissions", 0}, {"reservations", 6}} {
		t.Run(c.name, func(t *testing.T) {
			m := &interleavings{
				p:       mustParams(t, gcra.Every(2), 2),
				maxWait: c.maxWait,
				steps:   []int64{0, 1, 3},
				seen:    map[modelWorld]bool{},
			}
			advances := int8(*advancesFlag)
			if testing.Short() || raceEnabled {
				advances = min(advances, 1)
			}
			for _, init := range []int64{0, 2, 5} {
				for nreq := int8(2); nreq <= 3; nreq++ {
					for give := 0; give < 1<<nreq; give++ {
						for big := 0; big < 1<<nreq; big++ {
							w := modelWorld{clock: 1, state: init, ideal: init, locked: -1, nreq: nreq, advances: advances}
							for k := range nreq {
								w.reqs[k] = modelReq{n: 1 + big>>k&1, giveBack: give>>k&1 == 1}
							}
							m.explore(w)
						}
					}
				}
			}
			for _, f := range m.failures {
				t.Error(f)
			}
			t.Logf("%d states, %d complete runs, stored state at most %d ns (%.1f T) above the ideal", len(m.seen), m.ends, m.excess, float64(m.excess)/2)
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
					back, shifts, ok := p.Refund(next, now, next, at, n, true)
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
// moves), with parameters it chooses, and checks the stored state against
// the ideal one.
func FuzzRefund(f *testing.F) {
	f.Add(uint8(2), uint8(2), uint8(0), uint8(0b111), uint8(0b011), []byte{0, 1, 0, 1, 0x10, 0, 0x21, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 2})
	f.Add(uint8(7), uint8(3), uint8(20), uint8(0b101), uint8(0b110), []byte{1, 1, 0, 0, 0x32, 2, 2, 0x15, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2})
	f.Fuzz(func(t *testing.T, interval, burst, maxWait, give, big uint8, sched []byte) {
		p, err := gcra.NewParams(gcra.Every(time.Duration(1+interval%16)), 1+int(burst%4))
		if err != nil {
			t.Skip()
		}
		m := &interleavings{p: &p, maxWait: int64(maxWait)}
		w := modelWorld{clock: 1, state: int64(big>>3) % 40, locked: -1, nreq: 3}
		w.ideal = w.state
		for k := range w.nreq {
			w.reqs[k] = modelReq{n: 1 + int(big>>k&1)%p.Burst(), giveBack: give>>k&1 == 1}
		}
		for _, b := range sched {
			i := int8(b&3) % w.nreq
			if w.reqs[i].pc == pcDone || w.reqs[i].pc == pcLock && w.locked >= 0 {
				continue
			}
			w.clock += int64(b >> 2)
			m.step(&w, i)
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
		}
		if w.state < w.ideal {
			t.Fatalf("stored %d < ideal %d at clock %d: %+v", w.state, w.ideal, w.clock, w)
		}
	})
}
