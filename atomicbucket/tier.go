package atomicbucket

import (
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Tier is a limit shared by the keys of a Keyed limiter that use it: the
// limiter's default tier, a tier a TierFunc chooses for a key when the key is
// first seen, or a key's own limit from SetKeyLimit. Changing a tier's limit
// changes it for all its keys at once, from their next decision on; each key
// keeps its TAT (see Limiter.SetLimit). Create tiers with Keyed.NewTier.
type Tier struct {
	params atomic.Pointer[gcra.Params]
	// A copy of the owning limiter's clock, to validate limits against. A
	// copy, not a pointer into the limiter: cells point at tiers, and the
	// background sweeper reaches the cells, so a pointer would keep an
	// abandoned limiter alive.
	src timebase.Source
}

func newTier(src timebase.Source, limit gcra.Limit, burst int) (*Tier, error) {
	p, err := paramsFor(&src, limit, burst)
	if err != nil {
		return nil, err
	}
	t := &Tier{src: src}
	t.params.Store(p)
	return t, nil
}

// SetLimit changes the tier's limit and burst. It returns the same errors as
// New and changes nothing on error.
func (t *Tier) SetLimit(limit gcra.Limit, burst int) error {
	p, err := paramsFor(&t.src, limit, burst)
	if err != nil {
		return err
	}
	t.params.Store(p)
	return nil
}

// Params returns the tier's current parameters.
func (t *Tier) Params() *gcra.Params { return t.params.Load() }

// String describes the tier's limit, e.g. "100/1s burst 10".
func (t *Tier) String() string { return paramsString(t.params.Load()) }
