package redislimit

import (
	"context"
	"time"
)

// HoldAt is Hold at an explicit Redis time (µs).
func (l *Limiter[K]) HoldAt(ctx context.Context, key K, d time.Duration, nowMicros int64) error {
	return l.hold(ctx, key, d, nowMicros)
}
