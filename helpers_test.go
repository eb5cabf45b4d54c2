package atomiclimit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// fakeClock is a Clock that moves only when told; safe for concurrent use.
type fakeClock struct {
	base time.Time
	ns   atomic.Int64
}

func newFakeClock() *fakeClock { return &fakeClock{base: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time               { return c.base.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) At(d time.Duration) time.Time { return c.base.Add(d) }
func (c *fakeClock) Set(d time.Duration)          { c.ns.Store(int64(d)) }
func (c *fakeClock) Advance(d time.Duration) time.Duration {
	return time.Duration(c.ns.Add(int64(d)))
}

func newLimiter(t testing.TB, l gcra.Limit, burst int, opts ...atomiclimit.Option) *atomiclimit.Limiter {
	t.Helper()
	lim, err := atomiclimit.NewRule(atomiclimit.GCRA(l, burst), opts...)
	require.NoError(t, err)
	return lim
}

func randDuration(rng interface{ Int64N(int64) int64 }, upTo time.Duration) time.Duration {
	return time.Duration(rng.Int64N(int64(upTo)))
}

// bucketDecide is a Bucket's TakeN decision alone.
func bucketDecide(b *algo.Bucket, p *gcra.Params, now int64, n int) gcra.Decision {
	d, _ := b.TakeN(p, now, n)
	return d
}

// decide is a Keyed limiter's Take decision alone.
func decide[K comparable](k *atomiclimit.Keyed[K], key K, n int) gcra.Decision {
	d, _, _ := k.Take(context.Background(), key, n)
	return d
}

// decideN is a Keyed limiter's TakeN decision alone.
func decideN[K comparable](k *atomiclimit.Keyed[K], key K, now time.Time, n int) gcra.Decision {
	d, _, _ := k.TakeN(key, now, n)
	return d
}

// peek is a Keyed limiter's Peek decision alone.
func peek[K comparable](k *atomiclimit.Keyed[K], key K, n int) gcra.Decision {
	d, _ := k.Peek(context.Background(), key, n)
	return d
}
