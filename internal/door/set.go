package door

import (
	"fmt"
	"sync"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/internal/ratefields"
)

// A Spec is a policy as a door's user configures it. Each door declares
// its own public Policy type, documented for its users, with this
// underlying struct: Add converts one (door.Spec[K](p)), AddStack takes a
// list of them as they are.
type Spec[K comparable] struct {
	Name    string
	Limiter atomiclimit.KeyedLimiter[K]
}

// A Set makes a door's policies and holds each once, for ReportEvictions.
// Its zero value is ready to use; set Unit before the first Add.
type Set[K comparable] struct {
	// Unit, if not empty, is the qu parameter of every policy's
	// RateLimit-Policy item (httplimit's Config.QuotaUnit).
	Unit string
	mu   sync.Mutex // serialises ReportEvictions, which writes the policies' evicted
	all  []*Policy[K]
}

// Add validates p and returns it as a Policy, kept in s. what names p in an
// error ("Policies[0]", a route). A policy needs a limiter and a name of
// printable ASCII (a Structured Field string). The field values of the zero
// key's quota are built now, so that a limiter whose Quota panics fails
// here, not on a request. The errors have no package prefix: a door wraps
// them in its own configuration error.
func (s *Set[K]) Add(what string, p Spec[K]) (*Policy[K], error) {
	switch {
	case p.Limiter == nil:
		return nil, fmt.Errorf("%s has no Limiter", what)
	case p.Name == "":
		return nil, fmt.Errorf("%s has no name", what)
	}
	if err := CheckString(what+" name", p.Name); err != nil {
		return nil, err
	}
	pol := newPolicy(p.Name, p.Limiter, s.Unit)
	var zero K
	pol.Fields(zero)
	s.all = append(s.all, pol)
	return pol, nil
}

// AddStack adds the policies of the list ps to s, in order, and returns
// their stack (nil for an empty list). what names the list in an error:
// "Policies" makes "Policies[1]". The lone policy of a list of one is named
// "default" if it has no name.
func AddStack[K comparable, P ~struct {
	Name    string
	Limiter atomiclimit.KeyedLimiter[K]
}](s *Set[K], what string, ps []P) (*Stack[K], error) {
	if len(ps) == 0 {
		return nil, nil
	}
	pols := make([]*Policy[K], len(ps))
	for i, p := range ps {
		spec := Spec[K](p)
		if spec.Name == "" && len(ps) == 1 {
			spec.Name = "default"
		}
		var err error
		if pols[i], err = s.Add(fmt.Sprintf("%s[%d]", what, i), spec); err != nil {
			return nil, err
		}
	}
	st, err := NewStack(pols)
	if err != nil {
		return nil, fmt.Errorf("%w (%s)", err, what)
	}
	return st, nil
}

// CheckString returns an error if s, a name or a unit what (QuotaUnit),
// cannot be a Structured Field string: printable ASCII only.
func CheckString(what, s string) error {
	if !ratefields.ValidString(s) {
		return fmt.Errorf("%s %q: only printable ASCII can be a structured-field string", what, s)
	}
	return nil
}

// statser is implemented by *atomiclimit.Keyed.
type statser interface {
	Stats() atomiclimit.Stats
}

// ReportEvictions passes to h (nil: none), as Evicted events, the keys each
// policy's limiter has removed since the last call: idle keys and, under
// atomiclimit.EvictStalest, active ones. It reads the counters of the
// limiters that have a Stats() atomiclimit.Stats method. A limiter shared
// by several policies reports its evictions under each of them.
func (s *Set[K]) ReportEvictions(h *atomiclimit.Hook) {
	if h == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.all {
		st, ok := p.Limiter.(statser)
		if !ok {
			continue
		}
		stats := st.Stats()
		if total := stats.Evicted + stats.EvictedActive; total > p.evicted {
			h.Evicted(p.Name, int(total-p.evicted))
			p.evicted = total
		}
	}
}
