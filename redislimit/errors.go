package redislimit

import (
	"errors"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// ErrConfig is matched (errors.Is) by every error of the constructors and
// the options: a nil client, a rate faster than Redis TIME resolves, a
// rule NewRule does not decide in Redis (which matches
// errors.ErrUnsupported too), a window not whole in microseconds, a key
// type with no Redis encoding, an invalid option or lease. The message
// names which. A limit gcra rejects matches gcra's sentinel as well
// (gcra.ErrInvalidLimit, gcra.ErrRateTooHigh, gcra.ErrInvalidBurst,
// gcra.ErrOverflow), wrapped with the prefix "redislimit: ".
var ErrConfig = errors.New("redislimit: invalid configuration")

// A configError is one kind of ErrConfig, with its own message, that may
// match another sentinel too.
type configError struct {
	msg  string
	also error
}

// configErr returns the ErrConfig kind that msg describes.
func configErr(msg string) error { return &configError{msg: "redislimit: " + msg} }

func (e *configError) Error() string { return e.msg }

func (e *configError) Is(target error) bool {
	return target == ErrConfig || (e.also != nil && target == e.also)
}

// The kinds of ErrConfig.
var (
	// errNilClient: New was given a nil redis.Scripter.
	errNilClient = configErr("nil redis client")
	// errRateTooHigh: faster than one event per microsecond, the resolution
	// of Redis TIME and of the stored TAT. It also matches
	// gcra.ErrRateTooHigh, its in-process analogue (one per nanosecond).
	errRateTooHigh error = rateTooHigh{}
	// errInvalidPrefix: WithHashTag and a key prefix containing '{' or '}',
	// which would move the hash tag off the key.
	errInvalidPrefix = configErr("key prefix must not contain '{' or '}' with WithHashTag")
	// errInvalidTimeout: a negative WithTimeout.
	errInvalidTimeout = configErr("invalid timeout")
	// errContextTimeoutDisabled: WithTimeout on a go-redis client whose
	// ContextTimeoutEnabled is false. Such a client ignores context
	// deadlines on the connection, so the timeout could not bound a call.
	errContextTimeoutDisabled = configErr("WithTimeout needs a go-redis client with ContextTimeoutEnabled")
	// errInvalidCacheSize: WithOverLimitCache with a size < 1.
	errInvalidCacheSize = configErr("invalid over-limit cache size")
	// errInvalidOutage: the zero Outage, or FallbackTo(nil).
	errInvalidOutage = configErr("invalid outage policy")
	// errInvalidMaxWait: a negative WithMaxWait.
	errInvalidMaxWait = configErr("invalid longest wait")
)

// ErrUnavailable is wrapped by the error of a call Redis did not decide (an
// error or the timeout), whose decision the Outage policy made. The error
// from Redis is wrapped too: errors.Is(err, context.DeadlineExceeded)
// reports a timeout.
var ErrUnavailable = errors.New("redislimit: redis unavailable")

// rateTooHigh is errRateTooHigh: its own message, and errors.Is matches
// gcra.ErrRateTooHigh and gcra.ErrInvalidLimit too (as gcra's own does).
type rateTooHigh struct{}

func (rateTooHigh) Error() string {
	return "redislimit: rate faster than one event per microsecond"
}

func (rateTooHigh) Is(target error) bool {
	return target == ErrConfig || target == gcra.ErrRateTooHigh || target == gcra.ErrInvalidLimit
}
