package atomiclimit

import (
	"context"
	"time"
)

// WaitWithKit is Stack.Wait with a hand-fired timer (nil: a real one) and
// a jitter drawn by draw (nil: at random).
func (s *Stack[K]) WaitWithKit(ctx context.Context, key K, n int, maxWait time.Duration, out []Outcome,
	timer func(time.Duration) (<-chan time.Time, func() bool), draw func(int64) int64) (Result, int, error) {
	return s.wait(ctx, key, n, maxWait, out, &waitKit{timer: timer, draw: draw})
}
