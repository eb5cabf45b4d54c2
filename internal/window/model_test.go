package window_test

import (
	"math/big"
	"sync"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// The reference models below are plain, mutex-guarded implementations of
// the three algorithms, written without the packed state: a map from window
// index to count, and a list of admission times. Stale times follow the
// package's documented rule: a now whose window precedes the latest window
// that admitted anything is decided in that latest window (at its start, for
// the counter).

type refDecision struct {
	ok        bool
	remaining int
	retry     time.Duration
}

type refFixed struct {
	mu     sync.Mutex
	limit  int
	period int64
	start  int64
	counts map[int64]int
	top    int64 // latest window with an admission
}

func newRefFixed(limit int, period time.Duration, start int64) *refFixed {
	return &refFixed{limit: limit, period: int64(period), start: start, counts: map[int64]int{}}
}

func (m *refFixed) request(now int64, n int) refDecision {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := int64(0)
	if now > m.start {
		w = (now - m.start) / m.period
	}
	w = max(w, m.top)
	end := time.Duration(m.start + (w+1)*m.period - now)
	var d refDecision
	switch {
	case n == 0: // a peek: admitted, changes nothing
		d.ok = true
	case n < 0 || n > m.limit:
		d.retry = gcra.Never
	case m.counts[w]+n <= m.limit:
		d.ok = true
		m.counts[w] += n
		m.top = w
	default:
		d.retry = end
	}
	d.remaining = m.limit - m.counts[w]
	return d
}

type refCounter struct {
	mu     sync.Mutex
	limit  int
	period int64
	start  int64
	counts map[int64]int
	top    int64
}

func newRefCounter(limit int, period time.Duration, start int64) *refCounter {
	return &refCounter{limit: limit, period: int64(period), start: start, counts: map[int64]int{}}
}

// estimate returns prev·(W − pos)/W + cur as an exact rational, with the
// window and position a request at now is decided at.
func (m *refCounter) estimate(now int64) (est *big.Rat, w int64) {
	now = max(now, m.start)
	w = (now - m.start) / m.period
	if w < m.top {
		w, now = m.top, m.start+m.top*m.period
	}
	pos := now - (m.start + w*m.period)
	est = big.NewRat(int64(m.counts[w-1]), 1)
	est.Mul(est, big.NewRat(m.period-pos, m.period))
	return est.Add(est, big.NewRat(int64(m.counts[w]), 1)), w
}

func (m *refCounter) request(now int64, n int) refDecision {
	m.mu.Lock()
	defer m.mu.Unlock()
	est, w := m.estimate(now)
	var d refDecision
	after := new(big.Rat).Add(est, big.NewRat(int64(n), 1))
	switch {
	case n == 0: // a peek: admitted, changes nothing
		d.ok = true
	case n < 0 || n > m.limit:
		d.retry = gcra.Never
	case after.Cmp(big.NewRat(int64(m.limit), 1)) <= 0:
		d.ok = true
		m.counts[w] += n
		m.top = w
		est = after
	default:
		d.retry = -1 // checked by property, not by formula
	}
	// remaining = ⌊N − est⌋, at least 0
	left := new(big.Rat).Sub(big.NewRat(int64(m.limit), 1), est)
	if left.Sign() > 0 {
		d.remaining = int(new(big.Int).Quo(left.Num(), left.Denom()).Int64())
	}
	return d
}

type refLog struct {
	mu     sync.Mutex
	limit  int
	period int64
	times  []int64 // effective times of the admissions, in order
	latest int64   // running maximum of admitted nows
}

func newRefLog(limit int, period time.Duration) *refLog {
	return &refLog{limit: limit, period: int64(period), latest: -1 << 62}
}

// request admits iff fewer than N admissions have an effective time in
// (now − W, ∞): with monotone nows, the textbook sliding log.
func (m *refLog) request(now int64) refDecision {
	m.mu.Lock()
	defer m.mu.Unlock()
	var inWindow []int64
	for _, e := range m.times {
		if e > now-m.period {
			inWindow = append(inWindow, e)
		}
	}
	var d refDecision
	if len(inWindow) < m.limit {
		d.ok = true
		m.latest = max(m.latest, now)
		m.times = append(m.times, m.latest)
	} else {
		// the N-th latest leaves the window at its time + W
		d.retry = time.Duration(inWindow[len(inWindow)-m.limit] + m.period - now)
	}
	live := 0
	for _, e := range m.times {
		if e > now-m.period {
			live++
		}
	}
	d.remaining = max(m.limit-live, 0)
	return d
}
