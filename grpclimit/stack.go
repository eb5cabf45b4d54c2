package grpclimit

import (
	"fmt"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/internal/door"
	"github.com/atomiclimit/atomiclimit/internal/ratefields"
)

// policy is a Policy with the metadata values it needs, cached per quota.
type policy[K comparable] struct {
	name    string
	dp      *door.Policy[K]
	lim     atomiclimit.KeyedLimiter[K]
	evicted uint64 // evictions reported so far; guarded by the owner's evictMu
	cache   ratefields.Cache
}

func newPolicy[K comparable](what string, p Policy[K]) (*policy[K], error) {
	if p.Limiter == nil {
		return nil, fmt.Errorf("%w: %s has no Limiter", ErrConfig, what)
	}
	if p.Name == "" {
		return nil, fmt.Errorf("%w: %s has no name", ErrConfig, what)
	}
	if !ratefields.ValidString(p.Name) {
		return nil, fmt.Errorf("%w: %s name %q: only printable ASCII can be a structured-field string", ErrConfig, what, p.Name)
	}
	pol := &policy[K]{name: p.Name, dp: door.NewPolicy(p.Name, p.Limiter), lim: p.Limiter}
	pol.cache.Init(p.Name, "")
	var zero K
	pol.fields(zero) // build the values now, and fail here if Quota panics
	return pol, nil
}

// fields returns the metadata values for key's quota (built once per quota).
func (p *policy[K]) fields(key K) *ratefields.Fields { return p.cache.For(p.lim.Quota(key)) }

// A stack is the policies one call is checked against: the Config's
// Policies, then the method's, if any, all or nothing (door.Stack). The
// metadata lists them in their configured order.
type stack[K comparable] struct {
	d      *door.Stack[K]
	pols   []*policy[K] // parallel to d.Policies
	joined ratefields.Joined
}

func newStack[K comparable](base []*policy[K], extra *policy[K]) (*stack[K], error) {
	pols := base
	if extra != nil {
		pols = append(base[:len(base):len(base)], extra)
	}
	dps := make([]*door.Policy[K], len(pols))
	for i, p := range pols {
		dps[i] = p.dp
	}
	d, err := door.NewStack(dps)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &stack[K]{d: d, pols: pols}, nil
}

// statser is implemented by *atomiclimit.Keyed.
type statser interface {
	Stats() atomiclimit.Stats
}

// reportEvictions reports to h the evictions of each policy's limiter since
// the last call. The caller serialises calls.
func reportEvictions[K comparable](h *atomiclimit.Hook, pols []*policy[K]) {
	for _, p := range pols {
		s, ok := p.lim.(statser)
		if !ok {
			continue
		}
		st := s.Stats()
		if total := st.Evicted + st.EvictedActive; total > p.evicted {
			h.Evicted(p.name, int(total-p.evicted))
			p.evicted = total
		}
	}
}
