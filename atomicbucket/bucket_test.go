package atomicbucket_test

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/gcra"
)

func TestPaddedBucketIsOneCacheLine(t *testing.T) {
	assert.Equal(t, uintptr(64), unsafe.Sizeof(atomicbucket.PaddedBucket{}))
	assert.Equal(t, uintptr(8), unsafe.Sizeof(atomicbucket.Bucket{}))
}

func TestZeroBucketIsFull(t *testing.T) {
	p, err := gcra.NewParams(gcra.Per(10, time.Second), 3)
	require.NoError(t, err)
	var b atomicbucket.Bucket
	assert.Equal(t, 3, b.PeekN(&p, 12345, 0).Remaining)
	for i := 0; i < 3; i++ {
		assert.True(t, b.AllowN(&p, 12345, 1))
	}
	assert.False(t, b.AllowN(&p, 12345, 1))
}

// The Bucket's CAS loop must store exactly what gcra decides: a random
// sequential run gives the same decisions and the same state as folding
// gcra.Decide by hand.
func TestBucketFollowsDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		p, err := gcra.NewParams(gcra.Every(1+randDuration(rng, 1000)), 1+rng.IntN(6))
		require.NoError(t, err)
		var b atomicbucket.Bucket
		var tat, now int64
		for i := 0; i < 300; i++ {
			now += int64(randDuration(rng, 3*p.Interval())) - int64(p.Interval())
			now = max(now, 0)
			n := rng.IntN(p.Burst()+2) - rng.IntN(2)
			next, want := p.Decide(tat, now, n)
			switch i % 3 {
			case 0:
				assert.Equal(t, want, b.PeekN(&p, now, n), "peek %d", i)
				d, _ := b.TakeN(&p, now, n)
				assert.Equal(t, want, d, "take %d", i)
			case 1:
				assert.Equal(t, want.Allowed, b.AllowN(&p, now, n), "allow %d", i)
			case 2:
				tk, wait, ok := b.ReserveN(&p, now, n, 0)
				assert.Equal(t, want.Allowed, ok, "reserve %d", i)
				if ok {
					assert.Zero(t, wait)
					if n > 0 {
						assert.NotZero(t, tk, "an admission leaves what Refund needs")
					}
				}
			}
			tat = next
			require.Equal(t, tat, atomicbucket.TAT(&b), "step %d: state", i)
		}
	}
}

// The zero gcra.Params is an unconstructed limit: it denies every request
// on every path, as DenyAll does, and stores nothing. Before the fix its
// interval 0 looked Unlimited to AllowN and ReserveN, which admitted
// everything, while DecideN denied.
func TestZeroParamsDenyOnEveryPath(t *testing.T) {
	var p gcra.Params
	require.False(t, p.IsUnlimited())
	var b atomicbucket.Bucket
	ms := int64(time.Millisecond)
	for i, s := range []struct {
		now int64
		n   int
	}{
		{0, 1}, {0, 2}, {ms, 1}, {1000 * ms, 1}, {int64(time.Hour), 5}, {ms, 1}, // t0…t5, t5 jumps back
	} {
		assert.False(t, b.AllowN(&p, s.now, s.n), "step %d: AllowN", i)
		d, _ := b.TakeN(&p, s.now, s.n)
		assert.Equal(t, gcra.Decision{RetryAfter: gcra.Never, TokenAfter: gcra.Never}, d, "step %d: TakeN", i)
		assert.Equal(t, d, b.PeekN(&p, s.now, s.n), "step %d: PeekN", i)
		_, wait, ok := b.ReserveN(&p, s.now, s.n, int64(gcra.MaxWait))
		assert.False(t, ok, "step %d: ReserveN", i)
		assert.Equal(t, int64(gcra.Never), wait, "step %d: ReserveN's wait", i)
		_, ok = p.Admit(0, s.now, s.n)
		assert.False(t, ok, "step %d: Admit", i)
		assert.Zero(t, atomicbucket.TAT(&b), "step %d: nothing stored", i)
	}
}

func randDuration(rng interface{ Int64N(int64) int64 }, upTo time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(upTo)))
}
