package window_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// fakeClock is a Clock that moves only when told; safe for concurrent use.
type fakeClock struct {
	base time.Time
	ns   atomic.Int64
}

// t0 is a UTC midnight, so that AlignUTC boundaries fall on round offsets.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakeClock() *fakeClock { return &fakeClock{base: t0} }

func (c *fakeClock) Now() time.Time               { return c.base.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) At(d time.Duration) time.Time { return c.base.Add(d) }
func (c *fakeClock) Set(d time.Duration)          { c.ns.Store(int64(d)) }
func (c *fakeClock) Advance(d time.Duration) time.Duration {
	return time.Duration(c.ns.Add(int64(d)))
}

func mustFixed(t testing.TB, n int, period time.Duration, start int64) *window.FixedParams {
	t.Helper()
	p, err := window.NewFixedParams(n, period, start)
	require.NoError(t, err)
	return &p
}

func mustCounter(t testing.TB, n int, period time.Duration, start int64) *window.CounterParams {
	t.Helper()
	p, err := window.NewCounterParams(n, period, start)
	require.NoError(t, err)
	return &p
}

func mustLog(t testing.TB, n int, period time.Duration) *window.LogParams {
	t.Helper()
	p, err := window.NewLogParams(n, period)
	require.NoError(t, err)
	return &p
}

// maxInWindow returns the largest number of the sorted times ts that lie in
// one rolling window (t − w, t], over every t.
func maxInWindow(ts []int64, w int64) int {
	best, lo := 0, 0
	for hi := range ts {
		for ts[lo] <= ts[hi]-w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// wordCell is one fixed-window or sliding-counter state on the one
// CompareAndSwap loop every one-word rule shares (algo.Word), as the
// limiters hold it.
type wordCell struct{ w atomic.Uint64 }

func (c *wordCell) alg(p any) algo.Algorithm {
	switch p := p.(type) {
	case *window.FixedParams:
		return window.FixedAlgorithm(*p)
	case *window.CounterParams:
		return window.CounterAlgorithm(*p)
	}
	panic(fmt.Sprintf("no window algorithm for %T", p))
}

func (c *wordCell) state() algo.State { return algo.State{Word: &c.w} }

func (c *wordCell) AdmitN(p any, now int64, n int) (uint64, bool) {
	return c.alg(p).Admit(c.state(), now, n)
}

func (c *wordCell) AllowN(p any, now int64, n int) bool {
	_, ok := c.AdmitN(p, now, n)
	return ok
}

func (c *wordCell) DecideN(p any, now int64, n int) gcra.Decision {
	return c.alg(p).Decide(c.state(), now, n, false)
}

func (c *wordCell) PeekN(p any, now int64, n int) gcra.Decision {
	return c.alg(p).Decide(c.state(), now, n, true)
}

func (c *wordCell) Refund(p any, stored uint64, n int) bool {
	return c.alg(p).Refund(c.state(), algo.Taken{Word: stored}, zeroClock{}, n)
}

func (c *wordCell) Load() uint64 { return c.w.Load() }

// zeroClock reads 0: the windows' give-backs but the anchored one's do not
// read the clock.
type zeroClock struct{}

func (zeroClock) Now() int64 { return 0 }
