package grpclimit

import (
	"fmt"
	"sync"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/httplimit"
)

// A stack is the policies a call is checked against (an atomiclimit.Stack)
// and what the interceptor keeps for them: each policy's RateLimit field
// values (its own, whatever stacks it is in), and the denials of the
// stack's calls that were built and kept (den): a denial of a stack of one
// policy is the same value for every call with the same quota, wait and
// RateLimit item, so it is built once and shared, not built per call.
type stack[K comparable] struct {
	*atomiclimit.Stack[K]
	fields []*httplimit.PolicyFields // parallel to the policies
	den    denials
}

// values returns the "ratelimit" and "ratelimit-policy" values of the
// outcomes of a call for n: each policy's item (httplimit.PolicyFields),
// in the configured order, "" when no policy has one. The items of one
// policy are the ones PolicyFields keeps; the lists of several are built
// in one allocation.
func (s *stack[K]) values(out []atomiclimit.Outcome, n int) (rl, pol string) {
	if len(s.fields) == 1 {
		return s.fields[0].RateLimit(&out[0], n), s.fields[0].Policy(out[0].Quota)
	}
	var buf [512]byte
	b := buf[:0]
	for j, f := range s.fields {
		if item := f.RateLimit(&out[j], n); item != "" {
			if len(b) > 0 {
				b = append(b, ", "...)
			}
			b = append(b, item...)
		}
	}
	split := len(b)
	for j, f := range s.fields {
		if item := f.Policy(out[j].Quota); item != "" {
			if len(b) > split {
				b = append(b, ", "...)
			}
			b = append(b, item...)
		}
	}
	v := string(b) // both lists in one string: one allocation
	return v[:split], v[split:]
}

// A policy is a configured policy as the interceptor keeps it, once
// whatever stacks it is in.
type policy[K comparable] struct {
	atomiclimit.Policy[K]
	fields  *httplimit.PolicyFields
	evicted uint64 // evictions reported so far; guarded by policies.mu
}

// policies are every configured policy once, validated: Policies,
// Messages, then the methods', for the stacks and ReportEvictions.
type policies[K comparable] struct {
	mu  sync.Mutex // serialises reportEvictions, which writes the evicted counts
	all []*policy[K]
}

// add validates p and keeps it. what names p in an error ("Policies[0]",
// a method). A policy needs a limiter and a name of printable ASCII (a
// Structured Field string, as the RateLimit fields carry it). The errors
// have no package prefix: New wraps them in ErrConfig.
func (ps *policies[K]) add(what string, p atomiclimit.Policy[K]) (*policy[K], error) {
	switch {
	case p.Limiter == nil:
		return nil, fmt.Errorf("%s has no Limiter", what)
	case p.Name == "":
		return nil, fmt.Errorf("%s has no name", what)
	}
	fields, err := httplimit.NewPolicyFields(p.Name, "")
	if err != nil { // without a unit, the name is what is invalid
		return nil, fmt.Errorf("%s name %q: only printable ASCII can be a structured-field string", what, p.Name)
	}
	pol := &policy[K]{Policy: atomiclimit.Policy[K]{Name: p.Name, Limiter: p.Limiter}, fields: fields}
	ps.all = append(ps.all, pol)
	return pol, nil
}

// addList adds the policies of the list list, in order, and returns them
// (nil for an empty list). what names the list in an error: "Policies"
// makes "Policies[1]". The lone policy of a list of one is named "default"
// if it has no name.
func (ps *policies[K]) addList(what string, list []atomiclimit.Policy[K]) ([]*policy[K], error) {
	var pols []*policy[K]
	for i, p := range list {
		if p.Name == "" && len(list) == 1 {
			p.Name = "default"
		}
		pol, err := ps.add(fmt.Sprintf("%s[%d]", what, i), p)
		if err != nil {
			return nil, err
		}
		pols = append(pols, pol)
	}
	return pols, nil
}

// newStack returns the stack of pols, in that order, or nil for none;
// what names it in an error.
func newStack[K comparable](what string, pols []*policy[K]) (*stack[K], error) {
	if len(pols) == 0 {
		return nil, nil
	}
	st := &stack[K]{fields: make([]*httplimit.PolicyFields, len(pols))}
	list := make([]atomiclimit.Policy[K], len(pols))
	for j, p := range pols {
		list[j], st.fields[j] = p.Policy, p.fields
	}
	var err error
	if st.Stack, err = atomiclimit.NewStack(list...); err != nil {
		return nil, fmt.Errorf("%w (%s)", err, what)
	}
	return st, nil
}

// statser is implemented by *atomiclimit.Keyed.
type statser interface {
	Stats() atomiclimit.Stats
}

// reportEvictions passes to h (nil: none), as Evicted events, the keys each
// policy's limiter has removed since the last call (see
// Interceptor.ReportEvictions). A limiter shared by several policies
// reports its evictions under each of them.
func (ps *policies[K]) reportEvictions(h *atomiclimit.Hook) {
	if h == nil || h.Evicted == nil {
		return
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.all {
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
