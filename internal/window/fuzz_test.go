package window_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/internal/window"
)

// The fuzz targets decode ops as pairs of bytes: a signed time step, scaled
// to the window so that sequences cross boundaries in both directions, and a
// request size from 0 to N+1 (0 and N+1 rare). Each target checks every
// decision against its reference model and the algorithm's own bound on the
// admitted times.

type fuzzStep struct {
	now int64
	n   int
}

func decodeOps(limit int, period int64, start int64, ops []byte) []fuzzStep {
	var steps []fuzzStep
	now := max(start, 0)
	for i := 0; i+1 < len(ops); i += 2 {
		now = max(now+int64(int8(ops[i]))*period/32, 0)
		steps = append(steps, fuzzStep{now, int(ops[i+1]) % (limit + 2)})
	}
	return steps
}

func FuzzFixed(f *testing.F) {
	f.Add(uint8(3), uint16(100), uint16(0), []byte{0, 1, 10, 2, 60, 3, 0, 1, 200, 1, 127, 4})
	f.Add(uint8(1), uint16(1), uint16(1), []byte{1, 1, 0, 1, 255, 1, 1, 1})
	f.Fuzz(func(t *testing.T, limit uint8, period, startFrac uint16, ops []byte) {
		if limit == 0 || period == 0 {
			return // rejected at construction, covered by TestFixedErrors
		}
		w := int64(period)
		start := int64(startFrac)%w - w/2 // a start before the epoch too
		pv, err := window.NewFixedParams(int(limit), time.Duration(w), start)
		if errors.Is(err, window.ErrOverflow) {
			return // tiny windows leave too few index bits; TestFixedErrors
		}
		require.NoError(t, err)
		p := &pv
		ref := newRefFixed(int(limit), time.Duration(w), start)
		var cell wordCell
		perWindow := map[int64]int{}
		for i, s := range decodeOps(int(limit), w, start, ops) {
			d := cell.DecideN(p, s.now, s.n)
			r := ref.request(s.now, s.n)
			require.Equal(t, r, refDecision{d.Allowed, d.Remaining, d.RetryAfter}, "step %d: now %d n %d", i, s.now, s.n)
			if d.Allowed {
				// RetryAfter is 0; the window it was counted in ends
				// ResetAfter from now.
				perWindow[s.now+int64(d.ResetAfter)] += s.n
				require.LessOrEqual(t, perWindow[s.now+int64(d.ResetAfter)], int(limit), "step %d: over N in one window", i)
			}
		}
	})
}

func FuzzCounter(f *testing.F) {
	f.Add(uint8(3), uint16(100), []byte{0, 3, 31, 1, 1, 1, 30, 2, 200, 1, 64, 3})
	f.Add(uint8(10), uint16(1000), []byte{31, 10, 32, 1, 30, 9, 1, 1})
	f.Fuzz(func(t *testing.T, limit uint8, period uint16, ops []byte) {
		if limit == 0 || period == 0 {
			return // rejected at construction, covered by TestCounterErrors
		}
		w := int64(period)
		pv, err := window.NewCounterParams(int(limit), time.Duration(w), 0)
		if errors.Is(err, window.ErrOverflow) {
			return // short windows leave too few index bits; TestCounterErrors
		}
		require.NoError(t, err)
		p := &pv
		ref := newRefCounter(int(limit), time.Duration(w), 0)
		var cell wordCell
		var admitted []int64
		perWindow := map[int64]int{}
		for i, s := range decodeOps(int(limit), w, 0, ops) {
			if d := checkCounterStep(t, p, &cell, ref, s.now, s.n, "step "+itoa(i)); d.Allowed {
				// Admitted, so cur > 0 and ResetAfter = start + 2W − now.
				start := s.now + int64(d.ResetAfter) - 2*w
				perWindow[start] += s.n
				require.LessOrEqual(t, perWindow[start], int(limit), "step %d: over N in one fixed window", i)
				for range s.n {
					admitted = append(admitted, max(s.now, start))
				}
			}
		}
		// The documented worst case, on the times the decisions were made
		// at (a stale now is decided at the start of the stored window):
		// 2N−1 in any rolling window.
		slices.Sort(admitted)
		require.LessOrEqual(t, maxInWindow(admitted, w), 2*int(limit)-1)
	})
}

func FuzzLog(f *testing.F) {
	f.Add(uint8(3), uint16(100), []byte{0, 10, 10, 10, 200, 10, 127, 2, 1, 1})
	f.Add(uint8(1), uint16(1), []byte{0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, limit uint8, period uint16, ops []byte) {
		if limit == 0 || period == 0 {
			return
		}
		var nows []int64
		for _, s := range decodeOps(int(limit), int64(period), 0, ops) {
			nows = append(nows, s.now)
		}
		checkLogSequence(t, int(limit), time.Duration(period), nows)
	})
}
