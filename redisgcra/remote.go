package redisgcra

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A remote is one algorithm decided in Redis: the scripts it runs, their
// arguments, and how a reply becomes a gcra.Decision and a receipt. A
// Limiter holds one, GCRA's (New) or a rule's (NewRule, rule.go), and
// Decide, Peek, Take, Check and Refund go through it; it reaches Redis only
// through Limiter.call. Implementations are immutable.
type remote interface {
	// decide runs one decision for n on the Redis key rkey (one call): o
	// says whether it takes; with opReceipt it also returns the receipt (0
	// when nothing can be given back). The caller has already turned o into
	// opPeek for an n that no state admits. nowMicros ≥ 0 replaces Redis
	// TIME (tests only).
	decide(ctx context.Context, l *Limiter, rkey string, n int, o op, nowMicros int64) (gcra.Decision, uint64, error)
	// refund gives back the n of the admission that returned receipt, if
	// rkey's state still counts it, in one call; the caller has checked
	// that receipt is not 0 and that 1 ≤ n ≤ maxN.
	refund(ctx context.Context, l *Limiter, rkey string, n int, receipt uint64, nowMicros int64) (bool, error)
}

// A script is a Lua script and the SHA-1 that EVALSHA names it by.
type script struct{ src, sha string }

var (
	decideScript = script{decideLua, decideSHA}
	refundScript = script{refundLua, refundSHA}
)

// call runs s on keys with args and returns its reply: first EVALSHA, then
// EVAL once if the server does not have the script (NOSCRIPT: the first
// call, a restart, a failover, SCRIPT FLUSH), which caches it again. It is
// the one way this package reaches Redis: every script (GCRA's decision
// and refund, every rule's) goes through it, so that whatever applies to
// one call applies to all of them.
func (l *Limiter) call(ctx context.Context, s *script, keys []string, args ...any) (any, error) {
	cmd := l.client.EvalSha(ctx, s.sha, keys, args...)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		cmd = l.client.Eval(ctx, s.src, keys, args...)
	}
	return cmd.Val(), cmd.Err()
}

// badReply is the error of a reply whose shape the caller did not expect:
// the script that answered is not the one this package sent.
func badReply(s *script, reply any) error {
	return fmt.Errorf("redisgcra: script %.8s replied %v", s.sha, reply)
}

// ints copies reply, an array of exactly len(dst) integers, into dst, and
// reports whether it was one.
func ints(reply any, dst []int64) bool {
	vs, ok := reply.([]any)
	if !ok || len(vs) != len(dst) {
		return false
	}
	for i, v := range vs {
		if dst[i], ok = v.(int64); !ok {
			return false
		}
	}
	return true
}

// gcraRemote is New's algorithm: decideLua and refundLua on the TAT.
type gcraRemote struct{}

func (gcraRemote) decide(ctx context.Context, l *Limiter, rkey string, n int, o op, nowMicros int64) (gcra.Decision, uint64, error) {
	debt, ok, stored, err := l.eval(ctx, rkey, n, o, nowMicros)
	if err != nil {
		return gcra.Decision{}, 0, err
	}
	// The script decided in µs exactly as Decide does in ns on the same
	// values (package doc), so the two agree on Allowed; the tests check it
	// on every vector. Every field depends on TAT only through the debt; a
	// denial describes the state as stored, so its ResetAfter is the debt.
	_, d := l.params.Decide(debt, 0, n)
	if d.Allowed != ok {
		// Unreachable unless another writer stored a non-integer TAT; trust
		// what Redis did. The tests assert that this never happens.
		scriptMismatches.Add(1)
		d.Allowed = ok
		if ok {
			d.RetryAfter = 0
		}
	}
	return d, stored, nil
}

func (gcraRemote) refund(ctx context.Context, l *Limiter, rkey string, n int, receipt uint64, nowMicros int64) (bool, error) {
	return l.evalRefund(ctx, rkey, n, receipt, nowMicros)
}
