package atomiclimit

import "github.com/atomiclimit/atomiclimit/internal/core"

// A KeyedLimiter is any keyed limiter, in process or remote, as the doors
// take it: httplimit's middleware checks each request against one or
// several of them, and gives back what the others took when one denies.
// *Keyed[K] implements it for every rule, as redisgcra.Limiter does for
// limits kept in Redis; neither needs an adapter.
type KeyedLimiter[K comparable] = core.KeyedLimiter[K]

// A Receipt identifies an admission that Take made, for Refund. It is
// opaque; the zero Receipt means there is nothing to give back (a denial, a
// peek, or a rule whose admissions cannot be given back: the sliding log,
// and bands).
type Receipt = core.Receipt

var _ KeyedLimiter[string] = (*Keyed[string])(nil)

// RemoteReceipt returns a receipt that carries v, for a KeyedLimiter kept
// outside this module (a remote store, as redisgcra's): its Refund reads v
// back with Receipt.Remote. v must not be all zero (the zero Receipt).
func RemoteReceipt(v [3]uint64) Receipt { return core.RemoteReceipt(v) }
