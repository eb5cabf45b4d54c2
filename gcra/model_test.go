package gcra_test

import (
	"sync"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// refBucket is the reference model the decision functions are checked
// against. It is written independently of decide.go, in the other classic
// formulation of the same algorithm: the continuous-state leaky bucket of
// ITU-T I.371. The bucket holds level ns of work and drains at one ns per
// ns; a request for n tokens adds n·T and conforms if the bucket, drained to
// now, then holds at most B·T. It is guarded by a mutex, as a plain
// implementation would be.
type refBucket struct {
	mu       sync.Mutex
	interval int64 // T
	burst    int64 // B
	level    int64 // X: content after the last conforming request
	lct      int64 // last conformance time
}

func newRefBucket(interval time.Duration, burst int) *refBucket {
	return &refBucket{interval: int64(interval), burst: int64(burst)}
}

type refDecision struct {
	ok                      bool
	remaining               int
	retry, reset, nextToken time.Duration
}

func (m *refBucket) request(now int64, n int) refDecision {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity := m.burst * m.interval
	// Drain since the last conformance time (a backward now fills it up).
	x := m.level - (now - m.lct)
	if x < 0 {
		x = 0
	}
	var d refDecision
	switch {
	case n == 0: // a peek: admitted, changes nothing
		d.ok = true
	case n < 0 || int64(n) > m.burst:
		d.retry = gcra.Never
	case x+int64(n)*m.interval <= capacity:
		d.ok = true
		x += int64(n) * m.interval
		m.level, m.lct = x, now
	default:
		d.retry = time.Duration(x + int64(n)*m.interval - capacity)
	}
	if x < capacity {
		d.remaining = int((capacity - x) / m.interval)
	}
	d.reset = time.Duration(x)
	if x > capacity-m.interval {
		d.nextToken = time.Duration(x - (capacity - m.interval))
	}
	return d
}
