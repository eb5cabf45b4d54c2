package atomiclimit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// A Policy is a named limit a request is checked against: its limiter, in
// process or remote, and the name a door reports it by (headers, hook
// events, metrics).
type Policy[K comparable] struct {
	Name    string
	Limiter KeyedLimiter[K]
}

// MaxPolicies is the most policies one Stack holds.
const MaxPolicies = 8

// A Stack is the policies one request is checked against, all or nothing:
// the request is admitted only if every policy admits it, and a policy ends
// exactly as if a request another policy denied had never reached it. It is
// what httplimit's middleware and grpclimit's interceptors decide with, and
// what a door of your own (another protocol, a queue consumer) builds on:
// key the request, Take, then answer the Result with the protocol's own
// statuses and headers.
//
// The policies take the request in turn. When one denies, those before it
// give their admission back (Refund, last first), and those after it are
// asked without taking (Peek), to name every violated policy and the
// longest wait. A policy whose limiter cannot give an admission back (the
// sliding log, bands: their Take returns no receipt) is asked last,
// whatever its place in the list: when it is reached, every other policy
// has admitted, and only its own denial can follow, which takes nothing.
// One such policy per stack at most (NewStack checks it).
//
// A Stack is immutable and safe for concurrent use.
type Stack[K comparable] struct {
	pols  []stacked[K] // in the configured order
	order []int        // the order they are asked in: the ones that can give back first
}

// stacked is a policy as a Stack holds it.
type stacked[K comparable] struct {
	Policy[K]
	names []string // {Name}: a Denial's Violated for this policy alone, not built per denial
	// keyed is Limiter when it is a *Keyed, called directly: through the
	// interface, a method of a generic type is reached by a wrapper that
	// copies the call's arguments and results once more, and the quota
	// comes from the decision's own lookup of the key.
	keyed *Keyed[K]
	// waiter is Limiter when it waits in order itself (WaitN), unless it
	// is a *Keyed (keyed says how that one waits): Stack.Wait hands a lone
	// policy's wait to it.
	waiter waiter[K]
}

// ErrStack is wrapped by NewStack's errors.
var ErrStack = errors.New("atomiclimit: invalid policy stack")

// NewStack returns the stack of policies, in that order: 1 to MaxPolicies,
// each with a limiter and a name, the names distinct, at most one whose
// limiter cannot give an admission back.
func NewStack[K comparable](policies ...Policy[K]) (*Stack[K], error) {
	if len(policies) == 0 || len(policies) > MaxPolicies {
		return nil, fmt.Errorf("%w: %d policies for one request (1 to %d)", ErrStack, len(policies), MaxPolicies)
	}
	s := &Stack[K]{pols: make([]stacked[K], len(policies))}
	var last []int
	var zero K
	for i, p := range policies {
		switch {
		case p.Limiter == nil:
			return nil, fmt.Errorf("%w: policy %d (%q) has no Limiter", ErrStack, i, p.Name)
		case p.Name == "":
			return nil, fmt.Errorf("%w: policy %d has no name", ErrStack, i)
		}
		for _, q := range policies[:i] {
			if q.Name == p.Name {
				return nil, fmt.Errorf("%w: two policies named %q for the same requests", ErrStack, p.Name)
			}
		}
		s.pols[i] = stacked[K]{Policy: p, names: []string{p.Name}}
		s.pols[i].keyed, _ = p.Limiter.(*Keyed[K])
		if s.pols[i].keyed == nil {
			s.pols[i].waiter, _ = p.Limiter.(waiter[K])
		}
		if p.Limiter.Quota(zero).Refunds() {
			s.order = append(s.order, i)
		} else {
			last = append(last, i)
		}
	}
	if len(last) > 1 {
		return nil, fmt.Errorf("%w: policies %q and %q cannot give an admission back (a sliding log or bands): a request checked against both could be charged by one when the other denies; make them bands of one limiter", ErrStack, policies[last[0]].Name, policies[last[1]].Name)
	}
	s.order = append(s.order, last...)
	return s, nil
}

// With returns the stack of s's policies and then extra: a door's policies
// for every request, and a route's or a method's own.
func (s *Stack[K]) With(extra ...Policy[K]) (*Stack[K], error) {
	all := make([]Policy[K], 0, len(s.pols)+len(extra))
	for _, p := range s.pols {
		all = append(all, p.Policy)
	}
	return NewStack(append(all, extra...)...)
}

// Len returns the number of policies.
func (s *Stack[K]) Len() int { return len(s.pols) }

// Policy returns policy i, in the configured order.
func (s *Stack[K]) Policy(i int) Policy[K] { return s.pols[i].Policy }

// An Outcome is what one policy made of a request.
type Outcome struct {
	Decision Decision
	// Receipt is the policy's admission, if it took one (given back if
	// Kind is Refunded).
	Receipt Receipt
	// Quota is the quota the policy holds the key to, as the decision
	// found it (Quota(key)), for every policy, asked or not.
	Quota Quota
	// Err is the limiter's error: why it could not decide (Unknown, Full),
	// or, for the decision of a fallback limiter (ErrFallback: any other
	// Kind), the outage it stood in for; or the error of the give-back of
	// a Refunded admission. Nil otherwise.
	Err  error
	Kind OutcomeKind
	// Waited is how long Stack.Wait waited for this policy before the
	// request was admitted (0 for Take, and for a policy that did not
	// make it wait).
	Waited time.Duration
}

// An OutcomeKind says what a policy did with a request.
type OutcomeKind uint8

const (
	Unasked    OutcomeKind = iota // not asked: an earlier policy denied or failed closed
	Admitted                      // admitted, and charged
	Refunded                      // admitted, then given back: another policy denied
	Violated                      // denied
	WouldAdmit                    // asked after a denial (Peek): would have admitted
	Unknown                       // the limiter could not decide (its Take or Peek failed)
	Full                          // a full limiter had no room for the key (ErrTooManyKeys)
)

// A fallback limiter's decision (its error wraps ErrFallback) is the
// policy's, of the Kind of any decision: Admitted, Refunded, Violated or
// WouldAdmit, with Err set. A full fallback's refusal is Full.

// Remaining returns the quota the outcome leaves the key for a request of
// n, and false if it describes no state (Unasked, Unknown, Full). A
// refunded admission, and a Peek that would have admitted, report the
// state without the request: the decision's Remaining plus n, at most the
// quota's Limit.
func (o *Outcome) Remaining(n int) (int, bool) {
	r := max(o.Decision.Remaining, 0)
	switch o.Kind {
	case Admitted, Violated:
	case Refunded, WouldAdmit:
		r = min(r+n, o.Quota.Limit)
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
	// back; the ones after it were asked without taking.
	Deny
	// Unavailable: a limiter could not decide and its outage policy denied
	// (fail closed; a fallback limiter's denial is a Deny). The policies
	// before it gave their admissions back.
	Unavailable
	// Gone: the caller's context ended while a limiter decided. Not an
	// outage, and not reported; the policies before it gave their
	// admissions back.
	Gone
	// Overloaded: a full limiter had no room for the key (ErrTooManyKeys):
	// the server's capacity, not the key's quota. The policies before it
	// gave their admissions back.
	Overloaded
)

// Take checks a request for n at key against every policy of s, filling
// out, one Outcome per policy in the configured order (zero on entry; a
// door keeps them on its stack: a request allocates nothing). at is the
// index of the policy that decided a Deny (the first to deny),
// Unavailable, Gone or Overloaded, and -1 for Pass.
func (s *Stack[K]) Take(ctx context.Context, key K, n int, out []Outcome) (res Result, at int) {
	out = out[:len(s.pols)]
	res, at = s.take(ctx, key, n, out)
	if res == Pass || res == Gone {
		return res, at // Pass asked every policy; Gone describes none
	}
	for j := range out {
		if out[j].Kind == Unasked {
			out[j].Quota = s.pols[j].quota(key) // described, not asked
		}
	}
	return res, at
}

func (s *Stack[K]) take(ctx context.Context, key K, n int, out []Outcome) (res Result, at int) {
	for i, j := range s.order {
		p, o := &s.pols[j], &out[j]
		err := p.take(ctx, key, n, o)
		if err != nil && fallback(ctx, err) {
			// Another limiter decided on a state of its own: its decision
			// is the policy's, the outage beside it.
			o.Err = err
			if !errors.Is(err, ErrTooManyKeys) {
				err = nil
			} // else the fallback was full: its refusal, as any full limiter's
		}
		switch {
		case err != nil && errors.Is(err, ErrTooManyKeys):
			o.Kind, o.Err = Full, err
			s.giveBack(ctx, out, i, key, n)
			return Overloaded, j
		case err != nil:
			if callerDone(ctx) {
				s.giveBack(ctx, out, i, key, n)
				return Gone, j
			}
			o.Kind, o.Err = Unknown, err
			if !o.Decision.Allowed { // the limiter's outage policy: fail closed
				s.giveBack(ctx, out, i, key, n)
				return Unavailable, j
			}
			// Fail open: go on.
		case !o.Decision.Allowed:
			o.Kind = Violated
			s.giveBack(ctx, out, i, key, n)
			s.peekRest(ctx, out, i, key, n)
			return Deny, j
		default:
			o.Kind = Admitted
		}
	}
	return Pass, -1
}

// take is p.Limiter.Take into o, with the quota: for a *Keyed from the
// decision's own lookup. The results go straight into o: each copy of
// Take's results shows in the cost of a stacked policy.
func (p *stacked[K]) take(ctx context.Context, key K, n int, o *Outcome) (err error) {
	if p.keyed != nil {
		return p.keyed.takeInto(ctx, key, n, o)
	}
	o.Decision, o.Receipt, err = p.Limiter.Take(ctx, key, n)
	o.Quota = p.Limiter.Quota(key)
	return err
}

// quota is key's quota under p.
func (p *stacked[K]) quota(key K) Quota {
	if p.keyed != nil {
		return p.keyed.Quota(key)
	}
	return p.Limiter.Quota(key)
}

// fallback reports whether err, a limiter's, comes with a decision another
// limiter made on a state of its own (ErrFallback), which is the policy's:
// not when the caller's context ended, which no limiter answers.
func fallback(ctx context.Context, err error) bool {
	return errors.Is(err, ErrFallback) && !callerDone(ctx)
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
func (s *Stack[K]) giveBack(ctx context.Context, out []Outcome, i int, key K, n int) {
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
		if o.Kind != Admitted && o.Kind != Unknown || o.Receipt == (Receipt{}) {
			continue
		}
		ok, err := s.pols[j].Limiter.Refund(ctx, key, n, o.Receipt)
		if err != nil && o.Err == nil {
			o.Err = err
		}
		if ok && o.Kind == Admitted {
			o.Kind = Refunded // an Unknown stays unknown: no state to describe
		}
	}
}

// peekRest asks the policies after the i-th (in asking order) whether they
// would have admitted, taking nothing. A fallback limiter's answer is the
// policy's, as in take.
func (s *Stack[K]) peekRest(ctx context.Context, out []Outcome, i int, key K, n int) {
	for _, j := range s.order[i+1:] {
		p, o := &s.pols[j], &out[j]
		d, err := p.Limiter.Peek(ctx, key, n)
		o.Decision, o.Quota, o.Err = d, p.quota(key), err
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

// Denied summarises the outcomes of a request Take denied. For one
// violated policy it allocates nothing (Violated is shared: do not modify
// it).
func (s *Stack[K]) Denied(out []Outcome) Denial {
	d := Denial{Longest: -1}
	count := 0
	for j := range s.pols {
		o := &out[j]
		if o.Kind != Violated {
			continue
		}
		count++
		if d.Longest < 0 || longer(o.Decision.RetryAfter, d.RetryAfter) {
			d.Longest, d.RetryAfter = j, o.Decision.RetryAfter
		}
		switch count {
		case 1:
			d.Violated = s.pols[j].names
		case 2:
			d.Violated = append(slices.Clone(d.Violated), s.pols[j].Name)
		default:
			d.Violated = append(d.Violated, s.pols[j].Name)
		}
	}
	return d
}

// longer reports whether wait a is longer than b, Never the longest.
func longer(a, b time.Duration) bool {
	if b == Never {
		return false
	}
	return a == Never || a > b
}

// Report passes to h (nil: none) the events of a request Take or Wait
// decided: each limiter error (Outcome.Err: an outage, a fallback's
// stand-in, a failed give-back) as an Error event; then, for Pass, a
// Waited event for each policy that made it wait (Outcome.Waited) and an
// Allowed event for each policy that admitted it (not one that failed
// open); for Deny, a
// Denied event with its wait for each policy that violated it (none for
// the policies that gave their admission back); for Overloaded, an
// Overloaded event for the full limiter's policy, and not an Error event
// for its refusal (ErrTooManyKeys is the server's capacity, not an
// outage; a full fallback's outage is an Error event). A Gone request is
// not reported. h's nil fields are events nobody hears. Without a hook it
// costs a request one inlined comparison.
func (s *Stack[K]) Report(h *Hook, res Result, out []Outcome, n int) {
	if h != nil && res != Gone {
		s.report(h, res, out, n)
	}
}

// report is Report's loop, out of line so that Report inlines.
func (s *Stack[K]) report(h *Hook, res Result, out []Outcome, n int) {
	for j := range s.pols {
		o, name := &out[j], s.pols[j].Name
		if o.Err != nil && h.Error != nil && (o.Kind != Full || errors.Is(o.Err, ErrFallback)) {
			h.Error(name, o.Err)
		}
		switch {
		case res == Pass && o.Kind == Admitted:
			if o.Waited > 0 && h.Waited != nil {
				h.Waited(name, n, o.Waited)
			}
			if h.Allowed != nil {
				h.Allowed(name, n)
			}
		case res == Deny && o.Kind == Violated:
			if h.Denied != nil {
				h.Denied(name, n, o.Decision.RetryAfter)
			}
		case res == Overloaded && o.Kind == Full:
			if h.Overloaded != nil {
				h.Overloaded(name, n)
			}
		}
	}
}
