package redislimit

import (
	"errors"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// Configuration errors, returned (wrapped with details) by New. Match them
// with errors.Is. New also returns gcra's sentinels (gcra.ErrInvalidLimit,
// gcra.ErrRateTooHigh, gcra.ErrInvalidBurst, gcra.ErrOverflow), wrapped with
// the prefix "redislimit: ".
var (
	// ErrNilClient: New was given a nil redis.Scripter.
	ErrNilClient = errors.New("redislimit: nil redis client")
	// ErrRateTooHigh: faster than one event per microsecond, the resolution
	// of Redis TIME and of the stored TAT. It also matches
	// gcra.ErrRateTooHigh, its in-process analogue (one per nanosecond).
	ErrRateTooHigh error = rateTooHigh{}
	// ErrInvalidPrefix: WithHashTag and a key prefix containing '{' or '}',
	// which would move the hash tag off the key.
	ErrInvalidPrefix = errors.New("redislimit: key prefix must not contain '{' or '}' with WithHashTag")
	// ErrInvalidTimeout: a negative WithTimeout.
	ErrInvalidTimeout = errors.New("redislimit: invalid timeout")
	// ErrContextTimeoutDisabled: WithTimeout on a go-redis client whose
	// ContextTimeoutEnabled is false. Such a client ignores context
	// deadlines on the connection, so the timeout could not bound a call.
	ErrContextTimeoutDisabled = errors.New("redislimit: WithTimeout needs a go-redis client with ContextTimeoutEnabled")
	// ErrInvalidCacheSize: WithOverLimitCache with a size < 1.
	ErrInvalidCacheSize = errors.New("redislimit: invalid over-limit cache size")
	// ErrInvalidOutage: the zero Outage, or FallbackTo(nil).
	ErrInvalidOutage = errors.New("redislimit: invalid outage policy")
	// ErrInvalidMaxWait: a negative WithMaxWait.
	ErrInvalidMaxWait = errors.New("redislimit: invalid longest wait")
)

// ErrUnavailable is wrapped by the error of a call Redis did not decide (an
// error or the timeout), whose decision the Outage policy made. The error
// from Redis is wrapped too: errors.Is(err, context.DeadlineExceeded)
// reports a timeout.
var ErrUnavailable = errors.New("redislimit: redis unavailable")

// rateTooHigh is ErrRateTooHigh: its own message, and errors.Is matches
// gcra.ErrRateTooHigh and gcra.ErrInvalidLimit too (as gcra's own does).
type rateTooHigh struct{}

func (rateTooHigh) Error() string {
	return "redislimit: rate faster than one event per microsecond"
}

func (rateTooHigh) Is(target error) bool {
	return target == gcra.ErrRateTooHigh || target == gcra.ErrInvalidLimit
}
