// Package door is what the doors (httplimit, grpclimit) share: a request
// checked against a stack of policies at once, each a named
// atomiclimit.KeyedLimiter, all or nothing. It knows nothing of HTTP or
// gRPC: a door keys the request, asks Decide, and turns the outcomes into
// its own headers, statuses and hook events, with what this package gives
// every door alike: the policies, validated and kept in a Set (for
// eviction reports), each with the RateLimit field values of its quotas;
// the stacks a door builds of them; the field values of a request's
// outcomes; and the hook events of a decision.
package door

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/ratefields"
)

// ErrStack is wrapped by NewStack's errors; a door wraps it in its own
// configuration error.
var ErrStack = errors.New("invalid policy stack")

// MaxPolicies is the most policies one request is checked against.
const MaxPolicies = 8

// A Policy is a named limit, and the RateLimit field values of each quota
// its keys are seen under. A door makes its policies with a Set.
type Policy[K comparable] struct {
	Name    string
	Names   []string // {Name}: a verdict's Violated for this policy alone, not built per denial
	Limiter atomiclimit.KeyedLimiter[K]
	// keyed is Limiter when it is a *atomiclimit.Keyed, called directly:
	// through the interface, a method of a generic type is reached by a
	// wrapper that copies the call's arguments and results once more.
	keyed   *atomiclimit.Keyed[K]
	fields  ratefields.Cache
	evicted uint64 // evictions reported so far; guarded by its Set's mu
}

// newPolicy returns the policy name enforced by lim; unit, if not empty, is
// the qu parameter of its RateLimit-Policy items.
func newPolicy[K comparable](name string, lim atomiclimit.KeyedLimiter[K], unit string) *Policy[K] {
	p := &Policy[K]{Name: name, Names: []string{name}, Limiter: lim}
	p.keyed, _ = lim.(*atomiclimit.Keyed[K])
	p.fields.Init(name, unit)
	return p
}

// Fields returns the field values of key's quota (atomiclimit.Quota), built
// once per quota: a key on another tier, or a rule changed by SetRule, has
// its own.
func (p *Policy[K]) Fields(key K) *ratefields.Fields {
	if p.keyed != nil {
		return p.fields.For(p.keyed.Quota(key))
	}
	return p.fields.For(p.Limiter.Quota(key))
}

// take is p.Limiter.Take into o; with fs (not nil) it sets fs[j] to the
// fields of key's quota, for a *atomiclimit.Keyed from the decision's own
// lookup (TakeQuota). The results go straight into o: each copy of Take's
// 96 bytes shows in the cost of a stacked policy.
func (p *Policy[K]) take(ctx context.Context, key K, n int, o *Outcome, fs []*ratefields.Fields, j int) (err error) {
	switch {
	case p.keyed != nil && fs != nil:
		var q atomiclimit.Quota
		o.D, o.Receipt, q, err = p.keyed.TakeQuota(ctx, key, n)
		fs[j] = p.fields.For(q)
	case p.keyed != nil:
		o.D, o.Receipt, err = p.keyed.Take(ctx, key, n)
	default:
		o.D, o.Receipt, err = p.Limiter.Take(ctx, key, n)
		if fs != nil {
			fs[j] = p.Fields(key)
		}
	}
	return err
}

// A Stack is the policies one request is checked against. A request is
// admitted only if every policy admits it. The policies take the request in
// turn; when one denies, those before it give their admission back (Refund,
// last first), so that no policy is charged for a request another denied,
// and those after it are asked without taking (Check), to name every
// violated policy and the longest wait.
//
// A policy whose limiter cannot give an admission back (the sliding log,
// bands: Quota().Refunds() is false) is asked last, whatever its place in
// the list: when it is reached, every other policy has admitted, and only
// its own denial can follow, which takes nothing. One such policy per stack
// at most (NewStack checks it). Outcomes are in the configured order.
type Stack[K comparable] struct {
	Policies []*Policy[K] // in the configured order
	order    []int        // the order they are asked in: the ones that can give back first
	// joined is the RateLimit-Policy value of the fields last used: the
	// items of every policy, built once per combination of quotas.
	joined joined
}

// NewStack returns the stack of pols, in that order.
func NewStack[K comparable](pols []*Policy[K]) (*Stack[K], error) {
	if len(pols) == 0 || len(pols) > MaxPolicies {
		return nil, fmt.Errorf("%w: %d policies for one request (1 to %d)", ErrStack, len(pols), MaxPolicies)
	}
	s := &Stack[K]{Policies: slices.Clip(pols)}
	var last []int
	var zero K
	for i, p := range pols {
		for _, q := range pols[:i] {
			if q.Name == p.Name {
				return nil, fmt.Errorf("%w: two policies named %q for the same requests", ErrStack, p.Name)
			}
		}
		if p.Limiter.Quota(zero).Refunds() {
			s.order = append(s.order, i)
		} else {
			last = append(last, i)
		}
	}
	if len(last) > 1 {
		return nil, fmt.Errorf("%w: policies %q and %q cannot give an admission back (a sliding log or bands): a request checked against both could be charged by one when the other denies; make them bands of one limiter", ErrStack, pols[last[0]].Name, pols[last[1]].Name)
	}
	s.order = append(s.order, last...)
	return s, nil
}

// With returns the stack of s's policies and then extra: a door's policies
// for every request, and a route's or a method's own. s may be nil, for a
// door with no policy for every request.
func (s *Stack[K]) With(extra *Policy[K]) (*Stack[K], error) {
	if s == nil {
		return NewStack([]*Policy[K]{extra})
	}
	return NewStack(append(s.Policies, extra)) // a copy: s.Policies is clipped
}

// An Outcome is what one policy made of a request.
type Outcome struct {
	D       gcra.Decision
	Receipt atomiclimit.Receipt
	// Err is the limiter's error: why it could not decide (Unknown, Full),
	// or, for the decision of a fallback limiter (atomiclimit.ErrFallback:
	// any other Kind), the outage it stood in for. Nil otherwise.
	Err  error
	Kind Kind
}

// A Kind says what a policy did with a request.
type Kind uint8

const (
	Unasked    Kind = iota // not asked: an earlier policy denied or failed closed
	Admitted               // admitted, and charged
	Refunded               // admitted, then given back: another policy denied
	Violated               // denied
	WouldAdmit             // asked after a denial (Check): would have admitted
	Unknown                // the limiter could not decide (its Take or Check failed)
	Full                   // a full limiter had no room for the key (ErrTooManyKeys)
)

// A fallback limiter's decision (its error wraps atomiclimit.ErrFallback)
// is the policy's, of the Kind of any decision: Admitted, Refunded,
// Violated or WouldAdmit, with Err set. A full fallback's refusal is Full.

// Remaining returns the quota the outcome leaves the key, and false if it
// describes no state (Unasked, Unknown). A refunded admission, and a Check
// that would have admitted, report the state without the request: the
// decision's Remaining plus n, at most limit.
func (o *Outcome) Remaining(n, limit int) (int, bool) {
	r := max(o.D.Remaining, 0)
	switch o.Kind {
	case Admitted, Violated:
	case Refunded, WouldAdmit:
		r = min(r+n, limit)
	default:
		return 0, false
	}
	return r, true
}

// A Result says how a request fared.
type Result uint8

const (
	// Pass: every policy admitted (a fallback limiter's admission
	// included), or, having failed, its outage policy admitted (fail
	// open).
	Pass Result = iota
	// Deny: a policy denied. The policies before it gave their admissions
	// back; the ones after it were checked.
	Deny
	// Unavailable: a limiter could not decide and its outage policy denied
	// (fail closed; a fallback limiter's denial is Deny). The policies
	// before it gave their admissions back.
	Unavailable
	// Gone: the caller's context ended while a limiter decided. Not an
	// outage: nothing is reported, and the policies before it gave their
	// admissions back.
	Gone
	// Overloaded: a full limiter had no room for the key (ErrTooManyKeys):
	// the server's capacity, not the key's quota. The policies before it
	// gave their admissions back.
	Overloaded
)

// FillHook returns a copy of h whose nil fields do nothing, so that a door
// calls every field without a check, and its Error field as the ErrorSink
// of the door's limiters; nil and nil for a nil h.
func FillHook(h *atomiclimit.Hook) (*atomiclimit.Hook, ErrorSink) {
	if h == nil {
		return nil, nil
	}
	f := *h
	if f.Allowed == nil {
		f.Allowed = func(string, int) {}
	}
	if f.Denied == nil {
		f.Denied = func(string, int, time.Duration) {}
	}
	if f.Overloaded == nil {
		f.Overloaded = func(string, int) {}
	}
	if f.Evicted == nil {
		f.Evicted = func(string, int) {}
	}
	if f.Error == nil {
		f.Error = func(string, error) {}
	}
	return &f, f.Error
}

// An ErrorSink receives the error of a policy's limiter: a door's
// Hook.Error, or nil.
type ErrorSink = func(policy string, err error)

// Decide checks a request for n at key against every policy of s, filling
// out (len(s.Policies) outcomes, zero on entry) in the configured order.
// onError, if not nil, receives each limiter error that is not the caller's
// context ending. at is the index (configured order) of the policy that
// denied or failed closed, for Deny and Unavailable.
func (s *Stack[K]) Decide(ctx context.Context, key K, n int, out []Outcome, onError ErrorSink) (res Result, at int) {
	return s.decide(ctx, key, n, out, nil, onError)
}

// DecideFields is Decide that also fills fs (parallel to s.Policies, nil
// on entry) with the field values of key's quota under each policy, as
// Fields does, but for a policy whose limiter is a *atomiclimit.Keyed from
// the decision's own lookup of key: one lookup per policy a request takes
// from, whatever the headers need.
func (s *Stack[K]) DecideFields(ctx context.Context, key K, n int, out []Outcome, fs []*ratefields.Fields, onError ErrorSink) (res Result, at int) {
	res, at = s.decide(ctx, key, n, out, fs, onError)
	for j, f := range fs {
		if f == nil { // not taken from: a policy after one that denied, or not asked
			fs[j] = s.Policies[j].Fields(key)
		}
	}
	return res, at
}

// decide is Decide, filling fs if it is not nil (DecideFields).
func (s *Stack[K]) decide(ctx context.Context, key K, n int, out []Outcome, fs []*ratefields.Fields, onError ErrorSink) (res Result, at int) {
	for i, j := range s.order {
		p, o := s.Policies[j], &out[j]
		err := p.take(ctx, key, n, o, fs, j)
		if err != nil && fallback(ctx, err) {
			// Another limiter decided on a state of its own: report the
			// outage, and take its decision as the policy's.
			o.Err = err
			if onError != nil {
				onError(p.Name, err)
			}
			if !errors.Is(err, atomiclimit.ErrTooManyKeys) {
				err = nil
			} // else the fallback was full: its refusal, as any full limiter's
		}
		switch {
		case err != nil && errors.Is(err, atomiclimit.ErrTooManyKeys):
			o.Kind, o.Err = Full, err
			s.giveBack(ctx, out, i, key, n, onError)
			return Overloaded, j
		case err != nil:
			if callerDone(ctx) {
				s.giveBack(ctx, out, i, key, n, onError)
				return Gone, j
			}
			o.Kind, o.Err = Unknown, err
			if onError != nil {
				onError(p.Name, err)
			}
			if !o.D.Allowed { // the limiter's outage policy: fail closed
				s.giveBack(ctx, out, i, key, n, onError)
				return Unavailable, j
			}
			// Fail open: go on.
		case !o.D.Allowed:
			o.Kind = Violated
			s.giveBack(ctx, out, i, key, n, onError)
			s.checkRest(ctx, out, i, key, n, onError)
			return Deny, j
		default:
			o.Kind = Admitted
		}
	}
	return Pass, -1
}

// fallback reports whether err, a limiter's, comes with a decision another
// limiter made on a state of its own (atomiclimit.ErrFallback), which is
// the policy's: not when the caller's context ended, which no limiter
// answers.
func fallback(ctx context.Context, err error) bool {
	return errors.Is(err, atomiclimit.ErrFallback) && !callerDone(ctx)
}

// callerDone reports whether the caller's context has ended, or is past its
// deadline: a remote limiter may see the deadline pass (and answer that the
// caller gave up) a moment before the context's own timer sets ctx.Err().
func callerDone(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// giveBack refunds the admissions of the policies asked before the i-th (in
// asking order), last first. A refund is made even if the caller has gone:
// the admission was not used.
func (s *Stack[K]) giveBack(ctx context.Context, out []Outcome, i int, key K, n int, onError ErrorSink) {
	if i == 0 {
		return
	}
	if ctx.Done() != nil { // a context that can end; WithoutCancel allocates
		ctx = context.WithoutCancel(ctx)
	}
	for k := i - 1; k >= 0; k-- {
		j := s.order[k]
		o := &out[j]
		// An admission (a fallback limiter's too: its receipt is that
		// limiter's), or an outage policy's that has a receipt: both were
		// charged somewhere.
		if o.Kind != Admitted && o.Kind != Unknown || o.Receipt == (atomiclimit.Receipt{}) {
			continue
		}
		ok, err := s.Policies[j].Limiter.Refund(ctx, key, n, o.Receipt)
		if err != nil && onError != nil {
			onError(s.Policies[j].Name, err)
		}
		if ok && o.Kind == Admitted {
			o.Kind = Refunded // an Unknown stays unknown: no state to describe
		}
	}
}

// checkRest asks the policies after the i-th (in asking order) whether they
// would have admitted, taking nothing. A fallback limiter's answer is the
// policy's, as in decide.
func (s *Stack[K]) checkRest(ctx context.Context, out []Outcome, i int, key K, n int, onError ErrorSink) {
	for _, j := range s.order[i+1:] {
		p, o := s.Policies[j], &out[j]
		d, err := p.Limiter.Peek(ctx, key, n)
		o.D = d
		if err != nil {
			o.Err = err
			if onError != nil && !callerDone(ctx) {
				onError(p.Name, err)
			}
		}
		switch {
		case err != nil && !fallback(ctx, err):
			o.Kind = Unknown
		case d.Allowed:
			o.Kind = WouldAdmit
		default:
			o.Kind = Violated
		}
	}
}

// A Denial summarises the violated policies of a denied request.
type Denial struct {
	// Violated names every violated policy, in the configured order.
	Violated []string
	// Longest is the index of the violated policy with the longest wait
	// (Never is longest), and RetryAfter its wait.
	Longest    int
	RetryAfter time.Duration
}

// Denied summarises the outcomes of a request Decide denied.
func (s *Stack[K]) Denied(out []Outcome) Denial {
	d := Denial{Longest: -1}
	count := 0
	for j, p := range s.Policies {
		o := &out[j]
		if o.Kind != Violated {
			continue
		}
		count++
		if d.Longest < 0 || longer(o.D.RetryAfter, d.RetryAfter) {
			d.Longest, d.RetryAfter = j, o.D.RetryAfter
		}
		switch count {
		case 1:
			d.Violated = p.Names // no allocation for one violated policy
		case 2:
			d.Violated = append(slices.Clone(d.Violated), p.Name)
		default:
			d.Violated = append(d.Violated, p.Name)
		}
	}
	return d
}

// Report passes to h (nil: none) the events of a request Decide decided:
// for Pass an Allowed event for each policy that admitted it (not one that
// failed open), for Deny a Denied event, with its wait, for each policy
// that violated it (none for the policies that gave their admission back);
// nothing for any other result. Without a hook it costs a request one
// inlined comparison.
func (s *Stack[K]) Report(h *atomiclimit.Hook, res Result, out []Outcome, n int) {
	if h != nil && (res == Pass || res == Deny) {
		s.report(h, res, out, n)
	}
}

// report is Report's loop, out of line so that Report inlines.
func (s *Stack[K]) report(h *atomiclimit.Hook, res Result, out []Outcome, n int) {
	for j, p := range s.Policies {
		switch o := &out[j]; {
		case res == Pass && o.Kind == Admitted:
			h.Allowed(p.Name, n)
		case res == Deny && o.Kind == Violated:
			h.Denied(p.Name, n, o.D.RetryAfter)
		}
	}
}

// longer reports whether wait a is longer than b, Never the longest.
func longer(a, b time.Duration) bool {
	if b == gcra.Never {
		return false
	}
	return a == gcra.Never || a > b
}
