package atomiclimit_test

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// checkGCRABound asserts the GCRA bound on sorted admission times: for
// every i ≤ j, the j−i+1 admissions in [t_i, t_j] are at most B + (t_j−t_i)/T,
// i.e. (j+1−B)·T − t_j ≤ i·T − t_i, checked in one pass against the running
// minimum of the right-hand side.
func checkGCRABound(t *testing.T, ts []int64, interval, burst int64) {
	t.Helper()
	best := int64(1) << 62
	for j, tj := range ts {
		best = min(best, int64(j)*interval-tj)
		require.LessOrEqual(t, (int64(j)+1-burst)*interval-tj, best, "admission %d at %d: over B + d/T", j, tj)
	}
}

// maxInWindow is the most sorted times ts holds in any half-open window
// (t − w, t].
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

const (
	gInterval = 20 * time.Microsecond
	gBurst    = 4
	fN        = 10
	fWindow   = 500 * time.Microsecond
	lN        = 6
	lWindow   = 200 * time.Microsecond
)

func hammerBands(clk *fakeClock) (*atomiclimit.Limiter, error) {
	return atomiclimit.NewRule(atomiclimit.Bands(
		atomiclimit.GCRA(gcra.Every(gInterval), gBurst),
		atomiclimit.FixedWindow(fN, fWindow),
		atomiclimit.SlidingLog(lN, lWindow),
	), atomiclimit.WithClock(clk))
}

// checkBands checks each band's bound on the admission times nows (ns since
// the limiter's epoch, where its fixed windows start).
func checkBands(t *testing.T, nows []int64, perWindow bool) {
	t.Helper()
	slices.Sort(nows)
	checkGCRABound(t, nows, int64(gInterval), gBurst)
	require.LessOrEqual(t, maxInWindow(nows, int64(lWindow)), lN, "log band")
	if perWindow {
		counts := map[int64]int{}
		for _, now := range nows {
			counts[now/int64(fWindow)]++
			require.LessOrEqual(t, counts[now/int64(fWindow)], fN, "fixed band, window %d", now/int64(fWindow))
		}
	}
}

// Rounds at frozen instants, the clock moved by a random step between them:
// every goroutine takes what it can. Each band keeps its bound (the fixed
// one per window, exactly: at a frozen instant every admission counts in the
// instant's window), and the rounds admit no more than one goroutine alone
// admits. (They may admit less: a GCRA refund dropped behind a later
// admission leaves its tokens spent.)
func TestBandsConcurrentRounds(t *testing.T) {
	clk, seqClk := newFakeClock(), newFakeClock()
	conc, err := hammerBands(clk)
	require.NoError(t, err)
	seq, err := hammerBands(seqClk)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(9, 10))
	var nows []int64
	got, want := 0, 0
	rounds := 3000
	if raceEnabled {
		rounds = 300
	}
	for range rounds {
		step := time.Duration(rng.Int64N(int64(60 * time.Microsecond)))
		at, seqAt := clk.Advance(step), seqClk.Advance(step)
		now, seqNow := clk.At(at), seqClk.At(seqAt)
		for seq.AllowN(seqNow, 1) {
			want++
		}
		for _, k := range hammerEach(func(int) int {
			k := 0
			for conc.AllowN(now, 1) {
				k++
			}
			return k
		}) {
			got += k
			for range k {
				nows = append(nows, int64(at))
			}
		}
	}
	checkBands(t, nows, true)
	assert.LessOrEqual(t, got, want)
	assert.Greater(t, got, want*9/10, "refunds lose little")
	t.Logf("%d rounds: %d admitted concurrently, %d alone", rounds, got, want)
}

// A clock that every call moves, and callers that yield between reading it
// and deciding (stale nows): the GCRA and log bands keep their bounds on the
// nows the callers passed.
func TestBandsConcurrentStaleNow(t *testing.T) {
	clk := newFakeClock()
	l, err := hammerBands(clk)
	require.NoError(t, err)
	calls := 20000
	if raceEnabled {
		calls = 2000
	}
	logs := hammerEach(func(g int) []int64 {
		var got []int64
		for i := range calls {
			at := clk.Advance(time.Microsecond)
			if i%4 == g%4 {
				runtime.Gosched()
			}
			if l.AllowN(clk.At(at), 1) {
				got = append(got, int64(at))
			}
		}
		return got
	})
	nows := slices.Concat(logs...)
	checkBands(t, nows, false)
	assert.Greater(t, len(nows), 100)
	t.Logf("%d admitted over %v", len(nows), time.Duration(goroutines*calls)*time.Microsecond)
}
