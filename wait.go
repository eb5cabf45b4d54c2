package atomiclimit

import (
	"context"
	"math"
	"time"

	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// Wait is shorthand for WaitN(ctx, 1).
func (l *Limiter) Wait(ctx context.Context) error { return l.WaitN(ctx, 1) }

// WaitN blocks until n tokens are available and takes them, leaky-bucket
// style: concurrent waiters are served in the order they reserved.
//
// It fails at once, consuming nothing, if ctx is already done or its
// deadline is not after now (with ctx.Err(), or context.DeadlineExceeded if
// ctx has not noticed its deadline yet), whatever tokens are spare; if n < 0
// (gcra.ErrInvalidN) or n > burst (gcra.ErrExceedsBurst), or if the tokens
// would be due after ctx's deadline (ErrDeadline). If ctx is done while it
// waits, it cancels its reservation and returns ctx.Err(); the tokens come
// back if no later reservation depends on them (see Reservation.CancelAt).
// It starts no goroutine, and stops its timer before returning. With
// WithClock, the deadline is compared with the injected clock's time, as
// x/time/rate does.
func (l *Limiter) WaitN(ctx context.Context, n int) error {
	return l.waitN(ctx, n, l.src.Precise(), newRealTimer)
}

// newTimer abstracts time.NewTimer so tests can fire timers by hand.
type newTimer func(time.Duration) (c <-chan time.Time, stop func() bool)

func newRealTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

func (l *Limiter) waitN(ctx context.Context, n int, now int64, timer newTimer) error {
	return waitFor(ctx, &l.src, now, timer, func(maxWait int64) (Reservation, error) {
		r, _, err := l.reserve(now, n, maxWait)
		return r, err
	})
}

// waitFor reserves with reserve, giving it the longest wait ctx allows, and
// waits for the reservation's tokens; see WaitN.
func waitFor(ctx context.Context, src *timebase.Source, now int64, timer newTimer, reserve func(maxWait int64) (Reservation, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	maxWait := int64(math.MaxInt64)
	if deadline, ok := ctx.Deadline(); ok {
		// Both sides carry monotonic readings with the default clock.
		maxWait = int64(deadline.Sub(src.Time(now)))
		if maxWait <= 0 {
			// The deadline has passed (or is now) on the limiter's clock,
			// whether or not ctx has noticed yet: ctx is done, and a done
			// ctx consumes nothing, however many tokens are spare.
			return context.DeadlineExceeded
		}
	}
	r, err := reserve(maxWait)
	if err != nil {
		return err
	}
	delay := time.Duration(r.actAt - now)
	if delay <= 0 {
		return nil
	}
	c, stop := timer(delay)
	defer stop()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		r.Cancel()
		return ctx.Err()
	}
}
