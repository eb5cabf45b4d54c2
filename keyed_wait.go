package atomiclimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
)

// Reserve is shorthand for ReserveN(key, clock.Now(), 1).
func (k *Keyed[K]) Reserve(key K) (*Reservation, error) {
	return k.reservePtr(key, k.src.Precise(), 1)
}

// ReserveN reserves n tokens of key at now, as Limiter.ReserveN does. A new
// key that a full limiter refuses fails with ErrTooManyKeys. With a hook
// (WithHook), a reservation is reported as allowed when it is made (a
// later Cancel is not an event), a full limiter's refusal as overloaded,
// and a request no wait can satisfy as denied, with the wait it needed.
func (k *Keyed[K]) ReserveN(key K, now time.Time, n int) (*Reservation, error) {
	return k.reservePtr(key, k.cells.stamp(now), n)
}

func (k *Keyed[K]) reservePtr(key K, now int64, n int) (*Reservation, error) {
	r, wait, err := k.reserve(key, now, n, math.MaxInt64)
	if k.hook != nil {
		k.reportReserved(n, wait, err)
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// reserve reserves n tokens of key at now due within maxWait, and returns
// the wait that a request failing with ErrDeadline needed (see reserveOn).
func (k *Keyed[K]) reserve(key K, now int64, n int, maxWait int64) (Reservation, int64, error) {
	if !k.fast {
		return Reservation{}, 0, errPacing(k.def.cur.Load())
	}
	for {
		c, d, _ := k.cellFor(key, now, n)
		if c == nil {
			t := k.tierFor(key).cur.Load()
			if d.Allowed || n < 0 || n > t.maxN {
				// Unlimited needs no state, n = 0 takes nothing, and a
				// request no state admits fails as reserveOn says: they
				// reserve on a bucket of their own, and create no key.
				return reserveOn(new(algo.Bucket), &t.g, &k.src, now, n, maxWait, nil)
			}
			return Reservation{}, int64(d.RetryAfter), fmt.Errorf("%w: limit %d reached", ErrTooManyKeys, k.m.Limit())
		}
		rl := k.cells.rule(c)
		if k.cells.suspect(c, rl, now) && !k.settled(c, rl, now) {
			continue // retired, or forgotten: reserve on the key's new cell
		}
		r, wait, err := reserveOn(c.bucket(), &rl.g, &k.src, now, n, maxWait, &k.cells.reach)
		if err == nil {
			r.owner, r.key = k, c
			return r, 0, nil
		}
		if !c.isRetired() {
			return r, wait, err
		}
		// The cell was retired under us: decide again on the key's new cell.
	}
}

// reportReserved reports a reservation's outcome to the hook: made
// (allowed), refused by a full limiter (overloaded), or beyond any wait
// allowed (denied, with the wait it needed). An error of the rule (no
// pacing but for GCRA) is not a decision, and is not reported.
func (k *Keyed[K]) reportReserved(n int, wait int64, err error) {
	switch {
	case err == nil:
		k.reportDecision(n, gcra.Decision{Allowed: true}, false)
	case errors.Is(err, ErrTooManyKeys):
		k.reportDecision(n, gcra.Decision{}, true)
	case errors.Is(err, ErrDeadline), errors.Is(err, gcra.ErrExceedsBurst), errors.Is(err, gcra.ErrInvalidN):
		k.reportDecision(n, gcra.Decision{RetryAfter: time.Duration(wait)}, false)
	}
}

// Wait is shorthand for WaitN(ctx, key, 1).
func (k *Keyed[K]) Wait(ctx context.Context, key K) error { return k.WaitN(ctx, key, 1) }

// WaitN blocks until key has n tokens and takes them, as Limiter.WaitN does.
// A new key that a full limiter refuses fails at once with ErrTooManyKeys.
// With a hook (WithHook), it reports when it returns: allowed when it took
// the tokens, overloaded or denied as ReserveN reports its failures, and
// nothing when ctx ended first (the caller gave up: its tokens, if
// reserved, were given back as far as no later reservation depends on
// them).
func (k *Keyed[K]) WaitN(ctx context.Context, key K, n int) error {
	return k.waitN(ctx, key, n, k.src.Precise(), newRealTimer)
}

func (k *Keyed[K]) waitN(ctx context.Context, key K, n int, now int64, timer newTimer) error {
	var (
		reserved bool  // the reservation was made or refused: a decision
		wait     int64 // the wait a refused reservation needed
		rerr     error // the reservation's error
	)
	err := waitFor(ctx, &k.src, now, timer, func(maxWait int64) (Reservation, error) {
		var r Reservation
		r, wait, rerr = k.reserve(key, now, n, maxWait)
		reserved = true
		return r, rerr
	})
	if k.hook != nil && reserved {
		switch {
		case rerr != nil:
			k.reportReserved(n, wait, rerr)
		case err == nil:
			k.reportDecision(n, gcra.Decision{Allowed: true}, false)
		}
	}
	return err
}
