package atomiclimit_test

import (
	"math"
	"sync"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// Plain reference models of the bands, guarded by one mutex: a request is
// admitted iff every model would admit it, and then recorded in all of them.

type refBand interface {
	// would returns whether n fits at now, the remaining after it would be
	// recorded (or now, if it does not fit) and the wait when it does not.
	would(now int64, n int) (ok bool, remaining int, retry time.Duration)
	record(now int64, n int)
}

type refBands struct {
	mu    sync.Mutex
	bands []refBand
}

type refResult struct {
	ok        bool
	remaining int
	retry     time.Duration
}

func (m *refBands) request(now int64, n int) refResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := refResult{ok: n >= 0, remaining: math.MaxInt} // n = 0: a peek, admitted
	if n < 0 {
		r.retry = gcra.Never // (would(now, 0) is the state query below)
	}
	for _, b := range m.bands {
		if n < 1 {
			break
		}
		ok, _, retry := b.would(now, n)
		if !ok {
			r.ok = false
			r.retry = max(r.retry, retry)
		}
	}
	if r.ok && n > 0 { // a peek records nothing
		for _, b := range m.bands {
			b.record(now, n)
		}
	}
	for _, b := range m.bands {
		_, rem, _ := b.would(now, 0) // n = 0: just the state
		r.remaining = min(r.remaining, rem)
	}
	return r
}

// refGCRA is the continuous leaky bucket (ITU-T I.371): level drains one ns
// per ns; a request adds n·T and fits if the level stays ≤ B·T.
type refGCRA struct {
	interval, burst int64
	level, lct      int64
}

func (m *refGCRA) drained(now int64) int64 { return max(m.level-(now-m.lct), 0) }

func (m *refGCRA) would(now int64, n int) (bool, int, time.Duration) {
	x, capacity := m.drained(now), m.burst*m.interval
	rem := 0
	if x < capacity {
		rem = int((capacity - x) / m.interval)
	}
	switch {
	case n == 0:
		return true, rem, 0
	case n < 0 || int64(n) > m.burst:
		return false, rem, gcra.Never
	case x+int64(n)*m.interval <= capacity:
		return true, rem, 0
	}
	return false, rem, time.Duration(x + int64(n)*m.interval - capacity)
}

func (m *refGCRA) record(now int64, n int) {
	m.level, m.lct = m.drained(now)+int64(n)*m.interval, now
}

// refFixed counts per window index; a stale now counts in the latest
// window that admitted anything.
type refFixed struct {
	limit         int
	period, start int64
	counts        map[int64]int
	top           int64
}

func (m *refFixed) window(now int64) int64 {
	return max((max(now, m.start)-m.start)/m.period, m.top)
}

func (m *refFixed) would(now int64, n int) (bool, int, time.Duration) {
	w := m.window(now)
	rem := m.limit - m.counts[w]
	switch {
	case n == 0:
		return true, rem, 0
	case n < 0 || n > m.limit:
		return false, rem, gcra.Never
	case m.counts[w]+n <= m.limit:
		return true, rem, 0
	}
	return false, rem, time.Duration(m.start + (w+1)*m.period - now)
}

func (m *refFixed) record(now int64, n int) {
	w := m.window(now)
	m.counts[w] += n
	m.top = w
}

// refLog keeps every admission's effective time (the running maximum of
// admitted nows) and admits iff fewer than N are within (now − W, ∞).
type refLog struct {
	limit  int
	period int64
	times  []int64
}

func (m *refLog) live(now int64) []int64 {
	var in []int64
	for _, e := range m.times {
		if e > now-m.period {
			in = append(in, e)
		}
	}
	return in
}

func (m *refLog) would(now int64, n int) (bool, int, time.Duration) {
	in := m.live(now)
	rem := max(m.limit-len(in), 0)
	switch {
	case n == 0:
		return true, rem, 0
	case n != 1:
		return false, rem, gcra.Never
	case len(in) < m.limit:
		return true, rem, 0
	}
	return false, rem, time.Duration(in[len(in)-m.limit] + m.period - now)
}

func (m *refLog) record(now int64, _ int) {
	if k := len(m.times); k > 0 {
		now = max(now, m.times[k-1])
	}
	m.times = append(m.times, now)
}
