package atomicbucket

import (
	"context"
	"time"

	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// WithSource makes a Limiter read src (tests drive the coarse path by hand).
func WithSource(src timebase.Source) Option {
	return optionFunc(func(cfg *config) { cfg.source = &src })
}

// WaitNWithTimer is WaitN with a hand-fired timer.
func (l *Limiter) WaitNWithTimer(ctx context.Context, n int, timer func(time.Duration) (<-chan time.Time, func() bool)) error {
	return l.waitN(ctx, n, l.src.Now(), timer)
}

// CoarseRunning reports whether the process-wide coarse ticker runs.
var CoarseRunning = timebase.CoarseRunning

// CancelReporting is Cancel, reporting whether it refunded anything.
func (r *Reservation) CancelReporting() bool {
	if r.finished {
		return false
	}
	return r.cancelAt(r.lim.src.Now())
}
