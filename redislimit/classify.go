package redislimit

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The errors of a call that Redis did not decide normally fall in three
// classes, each matched with errors.Is on the error of Take, Peek, Refund
// and Reset:
//
//   - an outage (ErrUnavailable): Redis did not answer, or answered that it
//     cannot serve now. The Outage policy decides, and the breaker counts it.
//   - a rejection (ErrRejected): Redis answered with an error that is not an
//     outage (READONLY, NOPERM, …). No Outage policy applies: FallbackTo's
//     limiter decides, or the call is denied; FailOpen never admits.
//   - a corrupt state (ErrCorrupt): the key held a value that is not a state
//     of this limiter. The script repaired it and decided; see ErrCorrupt.
//
// A caller whose ctx ended is none of these (SourceCaller).
var (
	// ErrRejected is wrapped by the error of a call that Redis answered
	// with an error that is not an outage: the configuration or the server's
	// role is wrong, and repeating the call would fail the same way.
	// READONLY (a replica; also a demoted master during a failover, until
	// the client reconnects), NOPERM (an ACL without EVALSHA, EVAL or the
	// key pattern), NOAUTH, WRONGPASS, an unknown or renamed command, MOVED
	// or ASK to a client that is not a cluster client, a script error, a
	// reply of the wrong shape, and every error reply not listed as an
	// outage. The Redis error is wrapped too.
	//
	// The decision is FallbackTo's local limiter, under that policy, and
	// otherwise a denial as FailClosed's (FailOpen does not apply: a
	// misconfiguration must not unlimit every key). Nothing is written, so
	// once the cause is fixed every key decides as before; the breaker does
	// not count rejections (Redis answered).
	ErrRejected = errors.New("redislimit: redis rejected the call")

	// ErrCorrupt is wrapped by the error of a call whose key held a value
	// that is not a state of this limiter: not a string (WRONGTYPE: a list,
	// a hash, …), not a decimal integer of µs below 2^53 ("garbage", "nan",
	// "inf", "1e19", "0x10", "-5", ""), optionally followed by ":" and a
	// give-back epoch of the same form, and then by ":" and a queue stamp,
	// or a TAT (or a stamp) more than 2·B·T ahead of now, or a TAT more
	// than B·T ahead with no expiry: either would deny for longer than any
	// state this limiter writes (SET key <now + 1 year> EX <1 year> would
	// lock the key out for a year). No decision but a reservation stores a
	// TAT more than B·T ahead; the second B·T lets Redis TIME step back (a
	// failover to a server whose clock is behind) without a repair. A key
	// with a queue stamp (a reservation queued) may be B·T + gcra.MaxWait
	// further ahead, as far as reservations go.
	//
	// The script repairs it in the same call: it stores the empty bucket,
	// TAT = now + B·T, expiring as every state does (⌈B·T/1 ms⌉ + 1 ms),
	// and decides on that: Redis's denial (n ≥ 1, SourceRedis) with
	// RetryAfter n·T. The key is thus neither unlimited (the repair is the
	// strictest state a key can be in) nor locked out for ever: it refills
	// as any key does, and is full after B·T. Peek repairs too.
	// The error names the key and the value it held. NewRule's rules are
	// repaired likewise, as every band's strictest state (see the package
	// doc, "Every rule").
	ErrCorrupt = errors.New("redislimit: corrupt state")

	// ErrCircuitOpen is wrapped, with ErrUnavailable, by the error of a call
	// that the breaker (WithBreaker) kept from Redis after repeated outages.
	ErrCircuitOpen = errors.New("redislimit: circuit open")
)

// errCircuitOpen is the error of every call the breaker skips: made once,
// so that skipping allocates nothing for it.
var errCircuitOpen = fmt.Errorf("%w: %w", ErrUnavailable, ErrCircuitOpen)

// outagePrefixes are the error replies that mean "cannot serve now": the
// server is loading its data set, running a slow script (BUSY), failing
// over or resharding (TRYAGAIN, CLUSTERDOWN, MASTERDOWN), short of replicas
// (NOREPLICAS), memory (OOM) or disk (MISCONF), or of client slots. They
// end without any change on our side, as a refused connection does.
var outagePrefixes = [...]string{
	"LOADING ", "BUSY ", "TRYAGAIN ", "CLUSTERDOWN ", "MASTERDOWN ",
	"NOREPLICAS ", "OOM ", "MISCONF ", "ERR max number of clients reached",
}

// isOutage reports whether err, from a call that the caller's ctx did not
// cut short, is an outage: anything but an error reply (a refused, reset or
// closed connection, a timeout, the pool's timeout, a closed client) or an
// error reply in outagePrefixes. Every other error reply is a rejection.
func isOutage(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return true // Redis did not answer
	}
	msg := reply.Error()
	for _, p := range outagePrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// A script is a Lua script and the SHA-1 that EVALSHA names it by.
type script struct{ src, sha string }

var (
	decideScript = script{decideLua, decideSHA}
	refundScript = script{refundLua, refundSHA}
)

// call runs s on keys with args and returns its reply. It is the one way
// this package reaches Redis: every script (decide, refund, reset, and each
// algorithm's) goes through it, so that each gets the same WithTimeout, the
// same breaker and the same classification of its error. ctx is the
// caller's.
//
// First EVALSHA, then EVAL once if the server does not have the script
// (NOSCRIPT: the first call, a restart, a failover, SCRIPT FLUSH). A
// non-nil error is classified and is exactly one of:
//
//   - the caller's: ctx ended, before the call (no call is made) or during
//     it; it wraps ctx.Err() and neither sentinel below;
//   - an outage: it wraps ErrUnavailable and the cause (ErrCircuitOpen when
//     the breaker skipped Redis; context.DeadlineExceeded for WithTimeout);
//   - a rejection: it wraps ErrRejected and the error reply.
//
// The breaker sees every outcome but the caller's: an outage counts
// towards opening it, any answer from Redis (a reply or a rejection)
// closes it.
func (l *core) call(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, callerErr(err, nil) // no round trip for a caller that left
	}
	var probe bool
	if l.breaker != nil {
		var ok bool
		if probe, ok = l.breaker.allow(l); !ok {
			return nil, errCircuitOpen
		}
	}
	callCtx := ctx // ctx stays the caller's: callerDone tells its end from ours
	if l.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	cmd := l.client.EvalSha(callCtx, s.sha, keys, args...)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = l.client.Eval(callCtx, s.src, keys, args...)
	}
	err := cmd.Err()
	if err == nil {
		if l.breaker != nil {
			l.breaker.answered(probe)
		}
		return cmd.Val(), nil
	}
	// First the caller's end, then ours: a call cut short by the caller's
	// context is not an outage, whatever Redis reported.
	if cerr := callerDone(ctx); cerr != nil {
		if probe {
			l.breaker.abandon() // no verdict: the next call probes again
		}
		return nil, callerErr(cerr, err)
	}
	err = deadlineErr(callCtx, err)
	if isOutage(err) {
		if l.breaker != nil {
			l.breaker.failed(l, probe)
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if l.breaker != nil {
		l.breaker.answered(probe)
	}
	return nil, fmt.Errorf("%w: %w", ErrRejected, err)
}

// rejectedReply is the error of a reply whose shape the caller did not
// expect: the script that answered is not the one this package sent.
func rejectedReply(s *script, reply any) error {
	return fmt.Errorf("%w: script %.8s replied %v", ErrRejected, s.sha, reply)
}

// corrupt returns the error that reports the repair of rkey, which held
// what (as the script describes it).
func corrupt(rkey string, what any) error {
	return fmt.Errorf("%w: key %q held %v; repaired as an empty bucket", ErrCorrupt, rkey, what)
}

// isRejected reports whether err is a rejection (see call).
func isRejected(err error) bool { return errors.Is(err, ErrRejected) }

// isUnavailable reports whether err is an outage (see call).
func isUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) }
