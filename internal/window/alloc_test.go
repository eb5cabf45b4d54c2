package window_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
)

// The hot paths allocate nothing: admissions, denials, decisions and peeks,
// on the limiters (clock read included) and on the cells.
func TestHotPathsAllocateNothing(t *testing.T) {
	clk := newFakeClock()
	f, err := atomiclimit.NewRule(atomiclimit.FixedWindow(1<<20, time.Hour))
	require.NoError(t, err)
	c, err := atomiclimit.NewRule(atomiclimit.SlidingCounter(1<<10, time.Hour))
	require.NoError(t, err)
	l, err := atomiclimit.NewRule(atomiclimit.SlidingLog(64, time.Hour))
	require.NoError(t, err)
	fc, err := atomiclimit.NewRule(atomiclimit.FixedWindow(3, time.Hour), atomiclimit.WithClock(clk))
	require.NoError(t, err)
	now := clk.Now()
	for name, fn := range map[string]func(){
		"fixed/allow":   func() { f.Allow() },
		"fixed/allowN":  func() { f.AllowN(now, 1) },
		"fixed/decide":  func() { f.Take(1) },
		"fixed/peek":    func() { f.Peek(1) },
		"fixed/clock":   func() { fc.Allow() }, // an injected clock, mostly denials
		"counter/allow": func() { c.Allow() },
		"counter/decide": func() {
			c.TakeN(now, 1)
		},
		"log/allow":  func() { l.Allow() }, // 64 admissions, then denials
		"log/decide": func() { l.TakeN(now, 1) },
		"log/peek":   func() { l.Peek(1) },
	} {
		assert.Zero(t, testing.AllocsPerRun(1000, fn), name)
	}
}
