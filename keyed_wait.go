package atomiclimit

import (
	"context"
	"fmt"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"math"
	"time"
)

// Reserve is shorthand for ReserveN(key, clock.Now(), 1).
func (k *Keyed[K]) Reserve(key K) (*Reservation, error) {
	return k.reservePtr(key, k.src.Precise(), 1)
}

// ReserveN reserves n tokens of key at now, as Limiter.ReserveN does. A new
// key that a full limiter refuses fails with ErrTooManyKeys.
func (k *Keyed[K]) ReserveN(key K, now time.Time, n int) (*Reservation, error) {
	return k.reservePtr(key, k.src.At(now), n)
}

func (k *Keyed[K]) reservePtr(key K, now int64, n int) (*Reservation, error) {
	r, err := k.reserve(key, now, n, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (k *Keyed[K]) reserve(key K, now int64, n int, maxWait int64) (Reservation, error) {
	if !k.fast {
		return Reservation{}, errPacing(k.def.cur.Load())
	}
	for {
		c, d, _ := k.cellFor(key, now, n)
		if c == nil {
			t := k.tierFor(key).cur.Load()
			if d.Allowed || n < 0 || n > t.maxN {
				// Unlimited needs no state, n = 0 takes nothing, and a
				// request no state admits fails as reserveOn says: they
				// reserve on a bucket of their own, and create no key.
				return reserveOn(new(algo.Bucket), &t.g, &k.src, now, n, maxWait)
			}
			return Reservation{}, fmt.Errorf("%w: limit %d reached", ErrTooManyKeys, k.m.Limit())
		}
		r, err := reserveOn(c.bucket(), &c.rule().g, &k.src, now, n, maxWait)
		if err == nil {
			r.owner, r.key = k, c
			return r, nil
		}
		if !c.isRetired() {
			return r, err
		}
		// The cell was retired under us: decide again on the key's new cell.
	}
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (k *Keyed[K]) Wait(ctx context.Context, key K) error { return k.WaitN(ctx, key, 1) }

// WaitN blocks until key has n tokens and takes them, as Limiter.WaitN does.
// A new key that a full limiter refuses fails at once with ErrTooManyKeys.
func (k *Keyed[K]) WaitN(ctx context.Context, key K, n int) error {
	return k.waitN(ctx, key, n, k.src.Precise(), newRealTimer)
}

func (k *Keyed[K]) waitN(ctx context.Context, key K, n int, now int64, timer newTimer) error {
	return waitFor(ctx, &k.src, now, timer, func(maxWait int64) (Reservation, error) {
		return k.reserve(key, now, n, maxWait)
	})
}
