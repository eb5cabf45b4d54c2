package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// A stack is the policies one request is checked against: the Config's
// Policies, then the route's, if any. A request is admitted only if every
// policy admits it; when one denies, the admissions of the policies before
// it are given back (Refund, last first), so that no policy is charged for a
// request another policy denied.
//
// A policy whose limiter cannot give an admission back (the sliding log,
// bands: their Take returns no receipt) is asked last, whatever its place in
// the list: when it is reached, every other policy has admitted, and only
// its own denial can follow, which takes nothing. One such policy per stack
// at most (New checks it). The headers list the policies in their
// configured order.
type stack[K comparable] struct {
	pols  []*policy[K] // in the configured order: the headers' order
	order []int        // the order they are asked in: the ones that can give back first
	// joined is the RateLimit-Policy value of the fields last used: the
	// items of every policy, built once per combination of quotas.
	joined atomic.Pointer[joinedPolicy]
}

type joinedPolicy struct {
	fs    [maxPolicies]*fields
	value string
}

func newStack[K comparable](base []*policy[K], route *policy[K]) (*stack[K], error) {
	pols := slices.Clip(base)
	if route != nil {
		pols = append(slices.Clone(base), route)
	}
	if len(pols) > maxPolicies {
		return nil, fmt.Errorf("%w: %d policies for one request (at most %d)", ErrConfig, len(pols), maxPolicies)
	}
	s := &stack[K]{pols: pols}
	var last []int
	var zero K
	for i, p := range pols {
		for _, q := range pols[:i] {
			if q.name == p.name {
				return nil, fmt.Errorf("%w: two policies named %q for the same requests", ErrConfig, p.name)
			}
		}
		if p.lim.Quota(zero).Refunds() {
			s.order = append(s.order, i)
		} else {
			last = append(last, i)
		}
	}
	if len(last) > 1 {
		return nil, fmt.Errorf("%w: policies %q and %q cannot give an admission back (a sliding log or bands): a request checked against both could be charged by one when the other denies; make them bands of one limiter", ErrConfig, pols[last[0]].name, pols[last[1]].name)
	}
	s.order = append(s.order, last...)
	return s, nil
}

// An outcome is what one policy made of a request.
type outcome struct {
	d    gcra.Decision
	rc   atomiclimit.Receipt
	f    *fields // the policy's header values; nil with HeadersNone
	err  error
	kind outcomeKind
}

type outcomeKind uint8

const (
	unasked    outcomeKind = iota // not asked: an earlier policy denied, or failed closed
	admitted                      // admitted, and charged
	refunded                      // admitted, then given back: another policy denied
	violated                      // denied
	wouldAdmit                    // asked after a denial (Check): would have admitted
	unknown                       // the limiter could not decide (Take or Check failed)
)

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
		var out [1]outcome
		m.check(w, r, next, s, key, n, out[:])
		return
	}
	var out [maxPolicies]outcome
	m.check(w, r, next, s, key, n, out[:len(s.pols)])
}

// check takes n from every policy of s in turn and serves r if all admit;
// otherwise it gives back what was taken and denies.
func (m *Middleware[K]) check(w http.ResponseWriter, r *http.Request, next http.Handler, s *stack[K], key K, n int, out []outcome) {
	ctx := r.Context()
	for i, j := range s.order {
		p, o := s.pols[j], &out[j]
		if m.headers&HeadersNone == 0 {
			o.f = p.fields(key)
		}
		d, rc, err := p.lim.Take(ctx, key, n)
		o.d, o.rc = d, rc
		switch {
		case err != nil:
			if ctx.Err() != nil {
				// The client is gone: not an outage, and nothing to serve.
				m.giveBack(ctx, s, out, i, key, n)
				w.WriteHeader(statusClientClosed)
				return
			}
			o.kind, o.err = unknown, err
			if m.hook != nil {
				m.hook.Error(p.name, err)
			}
			if !d.Allowed { // the limiter's outage policy: fail closed
				m.unavailable(w, r, next, s, out, i, key, n)
				return
			}
			// Fail open, or a local fallback admitted: go on, without this
			// policy's state in the headers (there is none to describe).
		case !d.Allowed:
			o.kind = violated
			m.denied(w, r, next, s, out, i, key, n)
			return
		default:
			o.kind = admitted
		}
	}
	if m.hook != nil {
		for j, p := range s.pols {
			if out[j].kind == admitted {
				m.hook.Allowed(p.name, n)
			}
		}
	}
	m.writeHeaders(w.Header(), s, out, key, n, -1)
	next.ServeHTTP(w, r)
}

// giveBack refunds the admissions of the policies asked before the i-th (in
// asking order), last first. A refund is made even if the client has gone
// (its context is ended): the admission was not used.
func (m *Middleware[K]) giveBack(ctx context.Context, s *stack[K], out []outcome, i int, key K, n int) {
	if i == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for k := i - 1; k >= 0; k-- {
		j := s.order[k]
		o := &out[j]
		if o.kind != admitted || o.rc == 0 {
			continue
		}
		ok, err := s.pols[j].lim.Refund(ctx, key, n, o.rc)
		if err != nil && m.hook != nil {
			m.hook.Error(s.pols[j].name, err)
		}
		if ok {
			o.kind = refunded
		}
	}
}

// denied handles a request the i-th policy asked (in asking order) denied:
// it gives back what the policies before it took, asks the ones after it
// whether they would have admitted (to name every violated policy and the
// longest wait), and denies, or serves under DryRun.
func (m *Middleware[K]) denied(w http.ResponseWriter, r *http.Request, next http.Handler, s *stack[K], out []outcome, i int, key K, n int) {
	ctx := r.Context()
	m.giveBack(ctx, s, out, i, key, n)
	for _, j := range s.order[i+1:] {
		p, o := s.pols[j], &out[j]
		if m.headers&HeadersNone == 0 {
			o.f = p.fields(key)
		}
		d, err := p.lim.Check(ctx, key, n)
		o.d = d
		switch {
		case err != nil:
			o.kind, o.err = unknown, err
			if m.hook != nil && ctx.Err() == nil {
				m.hook.Error(p.name, err)
			}
		case d.Allowed:
			o.kind = wouldAdmit
		default:
			o.kind = violated
		}
	}
	den := Denial{Cost: n, RetryAfter: 0}
	count := 0
	for j, p := range s.pols {
		o := &out[j]
		if o.kind != violated {
			continue
		}
		count++
		if m.hook != nil {
			m.hook.Denied(p.name, n, o.d.RetryAfter)
		}
		ra := retryAfter(o.d)
		if count == 1 || den.RetryAfter >= 0 && (ra < 0 || ra > den.RetryAfter) {
			den.RetryAfter, den.Decision = ra, o.d
		}
		if count == 1 {
			den.Policies = p.names // no allocation for one violated policy
		} else {
			if count == 2 {
				den.Policies = slices.Clone(den.Policies)
			}
			den.Policies = append(den.Policies, p.name)
		}
	}
	if m.dryRun {
		m.writeHeaders(w.Header(), s, out, key, n, -1)
		next.ServeHTTP(w, r)
		return
	}
	m.writeHeaders(w.Header(), s, out, key, n, den.RetryAfter)
	m.deny(w, r, den)
}

// unavailable handles a request whose i-th policy (in asking order) could
// not be decided and whose outage policy denied (fail closed, or a local
// fallback that denied): 503, not 429 (DefaultDeny), with the outage
// policy's wait as Retry-After.
func (m *Middleware[K]) unavailable(w http.ResponseWriter, r *http.Request, next http.Handler, s *stack[K], out []outcome, i int, key K, n int) {
	m.giveBack(r.Context(), s, out, i, key, n)
	j := s.order[i]
	o := &out[j]
	if m.dryRun {
		m.writeHeaders(w.Header(), s, out, key, n, -1)
		next.ServeHTTP(w, r)
		return
	}
	ra := retryAfter(o.d)
	m.writeHeaders(w.Header(), s, out, key, n, ra)
	m.deny(w, r, Denial{Policies: s.pols[j].names, Cost: n, Decision: o.d, RetryAfter: ra, Err: o.err})
}
