package httplimit

import (
	"fmt"
	"net/http"

	"github.com/atomiclimit/atomiclimit/internal/door"
	"github.com/atomiclimit/atomiclimit/internal/ratefields"
)

// statusClientClosed is the status of a request whose client went away
// while a limiter decided (its context ended): 499, the code proxies log
// for it. Nothing else is written; the client is no longer there to read it.
const statusClientClosed = 499

// serve checks r against its stack (door.Stack): the Config's Policies,
// then its route's, if any, all or nothing (see "Stacked policies" in the
// package doc), and serves it or denies it.
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
	// The outcomes live on the stack: one for the common single policy.
	if len(s.Policies) == 1 {
		var sc door.Scratch1
		m.check(w, r, next, s, key, n, sc.Out[:], sc.Fields[:])
		return
	}
	var sc door.Scratch
	m.check(w, r, next, s, key, n, sc.Out[:len(s.Policies)], sc.Fields[:len(s.Policies)])
}

// check decides r under every policy of s and serves it, or denies it.
func (m *Middleware[K]) check(w http.ResponseWriter, r *http.Request, next http.Handler, s *stack[K], key K, n int, out []door.Outcome, fs []*ratefields.Fields) {
	if m.headers&HeadersNone != 0 {
		fs = nil
	}
	res, at := s.DecideFields(r.Context(), key, n, out, fs, m.errs)
	var den Denial
	switch res {
	case door.Pass:
		s.Report(m.hook, res, out, n)
		m.writeHeaders(w.Header(), s.Stack, out, fs, key, n, -1)
		next.ServeHTTP(w, r)
		return
	case door.Gone:
		w.WriteHeader(statusClientClosed)
		return
	case door.Overloaded, door.Unavailable:
		// Overloaded: a full limiter had no room for the key, the server's
		// capacity, not the client's quota. Unavailable: the limiter's outage
		// policy denied (fail closed; a local fallback's denial is a Deny).
		// Either is a 503, not a 429 (DefaultDeny), with the limiter's wait
		// as Retry-After.
		if res == door.Overloaded && m.hook != nil {
			m.hook.Overloaded(s.Policies[at].Name, n)
		}
		o := &out[at]
		den = Denial{Policies: s.Policies[at].Names, Decision: o.D, Err: o.Err}
	case door.Deny:
		d := s.Denied(out)
		at = d.Longest
		s.Report(m.hook, res, out, n)
		den = Denial{Policies: d.Violated, Decision: out[d.Longest].D}
	}
	if m.dryRun {
		m.writeHeaders(w.Header(), s.Stack, out, fs, key, n, -1)
		next.ServeHTTP(w, r)
		return
	}
	den.Cost, den.RetryAfter = n, retryAfter(den.Decision)
	m.writeHeaders(w.Header(), s.Stack, out, fs, key, n, den.RetryAfter)
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

// A stack is the policies a request is checked against (door.Stack), and
// DefaultDeny's bodies for a denial by each of them alone.
type stack[K comparable] struct {
	*door.Stack[K]
	problems []*problemCache // parallel to Policies
}

// newStack returns s with the problem caches of its policies, taken from
// (or added to) byPolicy: a policy's bodies are kept once, whatever
// stacks it is in.
func newStack[K comparable](s *door.Stack[K], byPolicy map[*door.Policy[K]]*problemCache) *stack[K] {
	if s == nil {
		return nil
	}
	st := &stack[K]{Stack: s, problems: make([]*problemCache, len(s.Policies))}
	for j, p := range s.Policies {
		c := byPolicy[p]
		if c == nil {
			c = &problemCache{names: p.Names}
			byPolicy[p] = c
		}
		st.problems[j] = c
	}
	return st
}
