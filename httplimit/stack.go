package httplimit

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/atomiclimit/atomiclimit"
)

// statusClientClosed is the status of a request whose client went away
// while a limiter decided (its context ended): 499, the code proxies log
// for it. Nothing else is written; the client is no longer there to read it.
const statusClientClosed = 499

// serve checks r against its stack: the Config's Policies, then its
// route's, if any, all or nothing (see "Stacked policies" in the package
// doc), and serves it or denies it.
func (m *Middleware[K]) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if m.exclude != nil && m.exclude(r) {
		next.ServeHTTP(w, r)
		return
	}
	s := m.stackFor(r)
	if s == nil {
		next.ServeHTTP(w, r) // no policy for this request
		return
	}
	key, err := m.key(r)
	if err != nil {
		m.fail(w, r, next, s, err)
		return
	}
	n := 1
	if m.cost != nil {
		if n = m.cost(r); n < 0 {
			m.fail(w, r, next, s, fmt.Errorf("%w: %d", ErrCost, n))
			return
		}
	}
	// The outcomes live on the goroutine's stack, as few as the policies
	// need: Take wants them zero, and zeroing MaxPolicies of them costs a
	// request measurable time.
	switch l := s.Len(); {
	case l == 1:
		var out [1]atomiclimit.Outcome
		m.check(w, r, next, s, key, n, out[:])
	case l == 2:
		var out [2]atomiclimit.Outcome
		m.check(w, r, next, s, key, n, out[:])
	case l <= 4:
		var out [4]atomiclimit.Outcome
		m.check(w, r, next, s, key, n, out[:l])
	default:
		var out [atomiclimit.MaxPolicies]atomiclimit.Outcome
		m.check(w, r, next, s, key, n, out[:l])
	}
}

// check decides r under every policy of s and serves it, or denies it.
func (m *Middleware[K]) check(w http.ResponseWriter, r *http.Request, next http.Handler, s *stack[K], key K, n int, out []atomiclimit.Outcome) {
	res, at := s.Take(r.Context(), key, n, out)
	s.Report(m.hook, res, out, n) // errors, and the events of res (none for Gone)
	var den Denial
	switch res {
	case atomiclimit.Pass:
		m.writeHeaders(w.Header(), s, out, key, n, -1)
		next.ServeHTTP(w, r)
		return
	case atomiclimit.Gone:
		w.WriteHeader(statusClientClosed)
		return
	case atomiclimit.Overloaded, atomiclimit.Unavailable:
		// Overloaded: a full limiter had no room for the key, the server's
		// capacity, not the client's quota. Unavailable: the limiter's outage
		// policy denied (fail closed; a local fallback's denial is a Deny).
		// Either is a 503, not a 429 (DefaultDeny), with the limiter's wait
		// as Retry-After.
		o := &out[at]
		den = Denial{Policies: s.problems[at].names, Decision: o.Decision, Err: o.Err}
	case atomiclimit.Deny:
		d := s.Denied(out)
		at = d.Longest
		den = Denial{Policies: d.Violated, Decision: out[d.Longest].Decision}
	}
	if m.dryRun {
		m.writeHeaders(w.Header(), s, out, key, n, -1)
		next.ServeHTTP(w, r)
		return
	}
	den.Cost, den.RetryAfter = n, retryAfter(den.Decision)
	m.writeHeaders(w.Header(), s, out, key, n, den.RetryAfter)
	switch {
	case m.deny != nil:
		m.deny(w, r, den)
	case den.Err == nil && len(den.Policies) == 1:
		// DefaultDeny's body for one violated policy, kept.
		p := s.problems[at].get(den.RetryAfter)
		writeProblem(w, http.StatusTooManyRequests, p.body, p.length)
	default:
		DefaultDeny(w, r, den)
	}
}

// A stack is the policies a request is checked against, and what the
// middleware keeps for each of them (a policy's own, whatever stacks it
// is in): the field values of its quotas, and DefaultDeny's bodies for a
// denial by it alone.
type stack[K comparable] struct {
	*atomiclimit.Stack[K]
	fields   []*PolicyFields // parallel to the policies
	problems []*problemCache // parallel to the policies
	// joined is the RateLimit-Policy value of the fields last used: the
	// items of every policy, built once per combination of quotas.
	joined joined
}

// A policy is a configured policy as the middleware keeps it, once
// whatever stacks it is in.
type policy[K comparable] struct {
	atomiclimit.Policy[K]
	fields   *PolicyFields
	problems *problemCache
	evicted  uint64 // evictions reported so far; guarded by policies.mu
}

// policies are every configured policy once, validated: Policies, then the
// routes', for the stacks and ReportEvictions.
type policies[K comparable] struct {
	unit string     // Config.QuotaUnit
	mu   sync.Mutex // serialises ReportEvictions, which writes the evicted counts
	all  []*policy[K]
}

// add validates p and keeps it. what names p in an error
// ("Policies[0]", a route). A policy needs a limiter and a name of
// printable ASCII (a Structured Field string). The errors have no package
// prefix: New wraps them in ErrConfig.
func (ps *policies[K]) add(what string, p atomiclimit.Policy[K]) (*policy[K], error) {
	switch {
	case p.Limiter == nil:
		return nil, fmt.Errorf("%s has no Limiter", what)
	case p.Name == "":
		return nil, fmt.Errorf("%s has no name", what)
	}
	if err := checkString(what+" name", p.Name); err != nil {
		return nil, err
	}
	pol := &policy[K]{
		Policy:   atomiclimit.Policy[K]{Name: p.Name, Limiter: p.Limiter},
		fields:   newPolicyFields(p.Name, ps.unit),
		problems: &problemCache{names: []string{p.Name}},
	}
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

// newStack returns the stack of pols, in that order; what names it in an
// error.
func newStack[K comparable](what string, pols []*policy[K]) (*stack[K], error) {
	st := &stack[K]{fields: make([]*PolicyFields, len(pols)), problems: make([]*problemCache, len(pols))}
	list := make([]atomiclimit.Policy[K], len(pols))
	for j, p := range pols {
		list[j], st.fields[j], st.problems[j] = p.Policy, p.fields, p.problems
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
// Middleware.ReportEvictions).
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
