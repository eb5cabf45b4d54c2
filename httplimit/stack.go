package httplimit

import (
	"fmt"
	"net/http"

	"github.com/atomiclimit/atomiclimit/internal/door"
	"github.com/atomiclimit/atomiclimit/internal/ratefields"
)

// maxPolicies is the most policies one request is checked against.
const maxPolicies = door.MaxPolicies

// A stack is the policies one request is checked against: the Config's
// Policies, then the route's, if any, all or nothing (see door.Stack and
// "Stacked policies" in the package doc). The headers list the policies in
// their configured order.
type stack[K comparable] struct {
	d    *door.Stack[K]
	pols []*policy[K] // parallel to d.Policies
	// joined is the RateLimit-Policy value of the fields last used: the
	// items of every policy, built once per combination of quotas.
	joined ratefields.Joined
}

func newStack[K comparable](base []*policy[K], route *policy[K]) (*stack[K], error) {
	pols := append(base[:len(base):len(base)], route)
	if route == nil {
		pols = base
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

// statusClientClosed is the status of a request whose client went away
// while a limiter decided (its context ended): 499, the code proxies log
// for it. Nothing else is written; the client is no longer there to read it.
const statusClientClosed = 499

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
	if len(s.pols) == 1 {
		var out [1]door.Outcome
		var fs [1]*fields
		m.check(w, r, next, s, key, n, out[:], fs[:])
		return
	}
	var out [maxPolicies]door.Outcome
	var fs [maxPolicies]*fields
	m.check(w, r, next, s, key, n, out[:len(s.pols)], fs[:len(s.pols)])
}

// check decides r under every policy of s and serves it, or denies it.
func (m *Middleware[K]) check(w http.ResponseWriter, r *http.Request, next http.Handler, s *stack[K], key K, n int, out []door.Outcome, fs []*fields) {
	if m.headers&HeadersNone == 0 {
		for j, p := range s.pols {
			fs[j] = p.fields(key)
		}
	}
	res, at := s.d.Decide(r.Context(), key, n, out, m.errs)
	switch res {
	case door.Pass:
		if m.hook != nil {
			for j, p := range s.pols {
				if out[j].Kind == door.Admitted {
					m.hook.Allowed(p.name, n)
				}
			}
		}
		m.writeHeaders(w.Header(), s, out, fs, key, n, -1)
		next.ServeHTTP(w, r)
	case door.Gone:
		w.WriteHeader(statusClientClosed)
	case door.Overloaded:
		// A full limiter had no room for the key: the server's capacity,
		// not the client's quota. 503, with the time until it has room.
		o := &out[at]
		if m.hook != nil {
			m.hook.Overloaded(s.pols[at].name, n)
		}
		if m.dryRun {
			m.writeHeaders(w.Header(), s, out, fs, key, n, -1)
			next.ServeHTTP(w, r)
			return
		}
		ra := retryAfter(o.D)
		m.writeHeaders(w.Header(), s, out, fs, key, n, ra)
		m.deny(w, r, Denial{Policies: s.pols[at].dp.Names, Cost: n, Decision: o.D, RetryAfter: ra, Err: o.Err})
	case door.Unavailable:
		// The limiter's outage policy denied (fail closed, or a local
		// fallback that denied): 503, not 429 (DefaultDeny), with the outage
		// policy's wait as Retry-After.
		o := &out[at]
		if m.dryRun {
			m.writeHeaders(w.Header(), s, out, fs, key, n, -1)
			next.ServeHTTP(w, r)
			return
		}
		ra := retryAfter(o.D)
		m.writeHeaders(w.Header(), s, out, fs, key, n, ra)
		m.deny(w, r, Denial{Policies: s.pols[at].dp.Names, Cost: n, Decision: o.D, RetryAfter: ra, Err: o.Err})
	case door.Deny:
		den := s.d.Denied(out)
		if m.hook != nil {
			for j, p := range s.pols {
				if out[j].Kind == door.Violated {
					m.hook.Denied(p.name, n, out[j].D.RetryAfter)
				}
			}
		}
		if m.dryRun {
			m.writeHeaders(w.Header(), s, out, fs, key, n, -1)
			next.ServeHTTP(w, r)
			return
		}
		d := out[den.Longest].D
		ra := retryAfter(d)
		m.writeHeaders(w.Header(), s, out, fs, key, n, ra)
		m.deny(w, r, Denial{Policies: den.Violated, Cost: n, Decision: d, RetryAfter: ra})
	}
}
