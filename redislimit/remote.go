package redislimit

import (
	"context"
	"errors"

	"github.com/atomiclimit/atomiclimit/gcra"
)

// A remote is one algorithm decided in Redis: the scripts it runs, their
// arguments, and how a reply becomes a gcra.Decision and a receipt. A
// Limiter holds one, GCRA's (New) or a rule's (NewRule, rule.go), and
// Allow, Take, Peek and Refund go through it, with the Redis key already
// built; it reaches Redis only through core.call (classify.go), so every script gets the same
// timeout, breaker and classification of its errors. Implementations are
// immutable.
type remote interface {
	// decide runs one decision for n on the Redis key rkey (one call): o
	// says whether it takes; with opReceipt it also returns the receipt's
	// values (zero when nothing can be given back). The caller has already turned o into
	// opPeek for an n that no state admits. nowMicros ≥ 0 replaces Redis
	// TIME (tests only). An error is call's, or wraps ErrCorrupt: then the
	// script repaired the state and the decision is made on the repair.
	decide(ctx context.Context, l *core, rkey string, n int, o op, nowMicros int64) (gcra.Decision, receipt, error)
	// refund gives back the n of the admission that returned rc, if rkey's
	// state still counts it, in one call; the caller has checked that rc
	// is not zero, that its values are below 2^53, and that 1 ≤ n ≤ maxN.
	refund(ctx context.Context, l *core, rkey string, n int, rc receipt, nowMicros int64) (bool, error)
}

// A receipt is what Take's atomiclimit.Receipt carries for a give-back in
// Redis (atomiclimit.RemoteReceipt), each value below 2^53: GCRA's taken
// (the TAT stored, the admission's time, the key's latest stamp); a fixed,
// counter or rolling window's index + 1 (then 0, 0); an anchored window's
// anchor, in µs + 1 and the ns beyond them, and its count after the
// admission. The zero receipt: nothing to give back.
type receipt [3]uint64

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

// gcraRemote is New's algorithm: decideLua and refundLua on the TAT and
// its give-back epoch.
type gcraRemote struct{}

func (gcraRemote) decide(ctx context.Context, l *core, rkey string, n int, o op, nowMicros int64) (gcra.Decision, receipt, error) {
	debt, ok, tk, err := l.eval(ctx, rkey, n, o, nowMicros)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return gcra.Decision{}, receipt{}, err
	}
	// err is nil, or reports a corrupt state that the script repaired
	// before deciding: the decision is Redis's all the same.
	// The script decided in µs exactly as Params.Decide does in ns on the same
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
	return d, receipt{tk.tat, tk.at, tk.stamp}, err
}

func (gcraRemote) refund(ctx context.Context, l *core, rkey string, n int, rc receipt, nowMicros int64) (bool, error) {
	return l.evalRefund(ctx, rkey, n, taken{tat: rc[0], at: rc[1], stamp: rc[2]}, false, nowMicros)
}
