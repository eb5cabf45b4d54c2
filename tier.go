package atomiclimit

import (
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Tier is a rule shared by the keys of a Keyed limiter that use it: the
// limiter's default tier, a tier a tier function chooses for a key when the
// key is first seen, or a key's own rule from SetKeyRule. Changing a tier's
// rule changes it for all its keys at once, from their next decision on;
// each key keeps its state (see Limiter.SetRule). Create tiers with
// Keyed.NewTier.
type Tier struct {
	cur atomic.Pointer[rule]
	// def is the limiter's first rule: every rule of every tier must be
	// compatible with it (ErrIncompatible), so that any tier's rule reads
	// any key's state. Immutable.
	def *rule
	// A copy of the owning limiter's clock, to validate rules against, and
	// its start (see newRule). A copy, not a pointer into the limiter: cells
	// point at tiers, and the background sweeper reaches the cells, so a
	// pointer would keep an abandoned limiter alive.
	src   timebase.Source
	start int64
	// reach is the limiter's (cells.reach), raised by every rule the tier
	// takes before any decision under it.
	reach *atomic.Int64
	id    uint64 // its index in the limiter's tiers, which its keys' cells hold
}

func newTier(src timebase.Source, start int64, def *rule, spec Rule, reach *atomic.Int64) (*Tier, error) {
	t := &Tier{def: def, src: src, start: start, reach: reach}
	if err := t.SetRule(spec); err != nil {
		return nil, err
	}
	return t, nil
}

// SetRule changes the tier's rule. It returns the errors of NewKeyedRule, or
// ErrIncompatible for a rule of another algorithm or window than the
// limiter's, and changes nothing on error.
func (t *Tier) SetRule(spec Rule) error {
	r, err := newRule(spec, &t.src, t.start)
	if err != nil {
		return err
	}
	if t.def != nil {
		if err := compatible(t.def, r); err != nil {
			return err
		}
	}
	algo.Raise(t.reach, r.far)
	t.cur.Store(r)
	return nil
}
