package timebase

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCoarseStartsOnFirstReferenceAndStopsOnLast(t *testing.T) {
	require.False(t, CoarseRunning(), "no reference yet")
	before := int64(time.Since(processEpoch))
	a, releaseA := Coarse()
	assert.True(t, CoarseRunning())
	assert.GreaterOrEqual(t, a.Now(), before, "first acquire publishes a fresh reading")
	b, releaseB := Coarse()
	releaseA()
	releaseA() // idempotent: one reference is released once
	assert.True(t, CoarseRunning(), "b still holds a reference")
	r1 := b.Now()
	releaseB()
	assert.False(t, CoarseRunning(), "last release stops (and joins) the ticker")

	// Restarting publishes a reading no smaller than any before.
	c, releaseC := Coarse()
	defer releaseC()
	assert.GreaterOrEqual(t, c.Now(), r1)
}

func TestCoarseAdvances(t *testing.T) {
	s, release := Coarse()
	defer release()
	first := s.Now()
	// Bounded wait for the ticker: at most 5s, far beyond one tick; yields
	// rather than sleeping a guessed amount.
	deadline := time.Now().Add(5 * time.Second)
	for s.Now() == first && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	assert.Greater(t, s.Now(), first, "the ticker advanced the reading")
	assert.LessOrEqual(t, s.Now(), int64(time.Since(processEpoch)), "the coarse reading never runs ahead")
}

func TestSourceConversions(t *testing.T) {
	m := Monotonic()
	now := time.Now()
	ns := m.At(now)
	assert.Equal(t, now.Sub(processEpoch), time.Duration(ns))
	assert.Equal(t, time.Duration(0), m.Time(ns).Sub(now), "Time inverts At")
	assert.Equal(t, int64(0), m.At(processEpoch.Add(-time.Hour)), "before the epoch counts as the epoch")
	assert.LessOrEqual(t, ns, m.Now())
}
