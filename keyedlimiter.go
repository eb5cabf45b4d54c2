package atomiclimit

import (
	"context"

	"github.com/atomiclimit/atomiclimit/internal/core"
)

// A KeyedLimiter is any keyed limiter, in process or remote, as the doors
// take it: httplimit's middleware checks each request against one or
// several of them, and gives back what the others took when one denies.
// *Keyed[K] implements it for every rule, as redisgcra.Limiter does for
// limits kept in Redis; neither needs an adapter.
type KeyedLimiter[K comparable] interface {
	// Take decides a request for n at key and takes n if it is admitted;
	// n = 0 is an admitted peek that takes nothing. The receipt lets Refund
	// give an admission back (0: there is nothing to give back).
	//
	// A non-nil error means the limiter could not reach key's state: a
	// remote store failed or timed out (an outage), or ctx ended first (the
	// caller gave up: errors.Is(err, ctx.Err()), not an outage). The
	// decision is then the limiter's own answer to that (fail open, fail
	// closed, or a local fallback: see redisgcra.WithOutage) and describes
	// no state. An in-process limiter never fails.
	Take(ctx context.Context, key K, n int) (Decision, Receipt, error)
	// Check returns the decision Take would make now, taking nothing (a
	// door asks it of the policies after one that denied, to name every
	// policy violated and the longest wait). Its error is Take's.
	Check(ctx context.Context, key K, n int) (Decision, error)
	// Refund gives back the n that an admission of key took, identified by
	// its receipt, if key's state still counts it, and reports whether it
	// did. It never creates quota: once something else was admitted on key
	// (or the admission's window has passed), it gives back nothing.
	Refund(ctx context.Context, key K, n int, r Receipt) (bool, error)
	// Quota describes the rule key is held to: its own tier's, if it has
	// one. It never makes a remote call.
	Quota(key K) Quota
}

// A Receipt identifies an admission that Take made, for Refund. It is
// opaque; 0 means there is nothing to give back (a denial, a peek, or a rule
// whose admissions cannot be given back: the sliding log, and bands).
type Receipt = core.Receipt

var _ KeyedLimiter[string] = (*Keyed[string])(nil)
