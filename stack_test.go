package atomiclimit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/stacktest"
)

// stackClock is a Clock that reads a fixed time.
type stackClock struct{ t time.Time }

func (c *stackClock) Now() time.Time { return c.t }

func stackKeyed(t *testing.T, c atomiclimit.Clock, rule atomiclimit.Rule) *atomiclimit.Keyed[string] {
	t.Helper()
	k, err := atomiclimit.NewKeyedRule[string](rule, atomiclimit.WithClock(c), atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// failing is a limiter whose store is down: its outage policy admits (open)
// or denies; Take after cancel reports the caller's context.
type failing struct {
	*atomiclimit.Keyed[string]
	open bool
}

var errDown = errors.New("store down")

func (f *failing) Take(ctx context.Context, key string, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	if ctx.Err() != nil {
		return gcra.Decision{}, atomiclimit.Receipt{}, ctx.Err()
	}
	return gcra.Decision{Allowed: f.open, RetryAfter: time.Second}, atomiclimit.Receipt{}, errDown
}

func newStack(t *testing.T, pols ...atomiclimit.Policy[string]) *atomiclimit.Stack[string] {
	t.Helper()
	s, err := atomiclimit.NewStack(pols...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pol(name string, l atomiclimit.KeyedLimiter[string]) atomiclimit.Policy[string] {
	return atomiclimit.Policy[string]{Name: name, Limiter: l}
}

// stackEvents counts a hook's events per policy, and the waits of the
// denials and the errors.
type stackEvents struct {
	allowed, denied, overloaded map[string]int
	waits                       []time.Duration
	errs                        []string
}

func (e *stackEvents) hook() *atomiclimit.Hook {
	e.allowed, e.denied, e.overloaded = map[string]int{}, map[string]int{}, map[string]int{}
	return &atomiclimit.Hook{
		Allowed:    func(p string, _ int) { e.allowed[p]++ },
		Denied:     func(p string, _ int, w time.Duration) { e.denied[p]++; e.waits = append(e.waits, w) },
		Overloaded: func(p string, _ int) { e.overloaded[p]++ },
		Error:      func(p string, err error) { e.errs = append(e.errs, p+": "+err.Error()) },
	}
}

// The outcomes of every path through Take, and what each policy was
// charged: a denial gives back the admissions before it and peeks at the
// policies after it; an outage that fails closed gives back; one that
// fails open goes on; a caller gone gives back and reports nothing. Every
// outcome carries its policy's quota.
func TestStackTake(t *testing.T) {
	c := &stackClock{t: time.Unix(1e9, 0)}
	ctx := context.Background()
	a := stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(2, time.Minute), 2))
	b := stackKeyed(t, c, atomiclimit.FixedWindow(1, time.Minute))
	z := stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))
	s := newStack(t, pol("a", a), pol("b", b), pol("z", z))

	out := make([]atomiclimit.Outcome, 3)
	if res, at := s.Take(ctx, "k", 1, out); res != atomiclimit.Pass || at != -1 || out[0].Kind != atomiclimit.Admitted || out[2].Kind != atomiclimit.Admitted {
		t.Fatalf("first: %v %+v", res, out)
	}
	for j, k := range []*atomiclimit.Keyed[string]{a, b, z} {
		if out[j].Quota != k.Quota("k") {
			t.Fatalf("policy %d's outcome: quota %+v, want %+v", j, out[j].Quota, k.Quota("k"))
		}
	}
	out = make([]atomiclimit.Outcome, 3)
	res, at := s.Take(ctx, "k", 1, out)
	if res != atomiclimit.Deny || at != 1 || out[0].Kind != atomiclimit.Refunded || out[1].Kind != atomiclimit.Violated || out[2].Kind != atomiclimit.Violated {
		t.Fatalf("second: %v at %d %+v", res, at, out)
	}
	if r := stacktest.Peek(a, "k", 0).Remaining; r != 1 {
		t.Fatalf("a remaining %d, want 1: charged for the denied request", r)
	}
	d := s.Denied(out)
	if len(d.Violated) != 2 || d.Violated[0] != "b" || d.Violated[1] != "z" || d.Longest != 1 || d.RetryAfter != time.Minute {
		t.Fatalf("denial %+v", d)
	}
	if r, ok := out[0].Remaining(1); !ok || r != 1 {
		t.Fatalf("refunded outcome's remaining %d %v", r, ok)
	}

	// n above z's burst: never. Never is the longest wait.
	out = make([]atomiclimit.Outcome, 3)
	s.Take(ctx, "other", 2, out)
	if d := s.Denied(out); d.RetryAfter != gcra.Never || d.Violated[len(d.Violated)-1] != "z" {
		t.Fatalf("never: %+v", d)
	}

	// Outages, reported as errors.
	var ev stackEvents
	h := ev.hook()
	closed := &failing{Keyed: stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(9, time.Minute), 9))}
	s2 := newStack(t, pol("a", a), pol("remote", closed))
	before := stacktest.Peek(a, "u", 0)
	out = make([]atomiclimit.Outcome, 2)
	res, at = s2.Take(ctx, "u", 1, out)
	s2.Report(h, res, out, 1)
	if res != atomiclimit.Unavailable || at != 1 || out[1].Kind != atomiclimit.Unknown || out[0].Kind != atomiclimit.Refunded {
		t.Fatalf("fail closed: %v %d %+v", res, at, out)
	}
	if stacktest.Peek(a, "u", 0) != before || len(ev.errs) != 1 || ev.errs[0] != "remote: store down" {
		t.Fatalf("fail closed: a charged, or errors %q", ev.errs)
	}
	closed.open = true
	out = make([]atomiclimit.Outcome, 2)
	if res, _ := s2.Take(ctx, "u", 1, out); res != atomiclimit.Pass || out[0].Kind != atomiclimit.Admitted || out[1].Kind != atomiclimit.Unknown {
		t.Fatalf("fail open: %v %+v", res, out)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	before = stacktest.Peek(a, "u", 0)
	out = make([]atomiclimit.Outcome, 2)
	ev.errs = nil
	res, _ = s2.Take(cctx, "u", 1, out)
	s2.Report(h, res, out, 1)
	if res != atomiclimit.Gone || len(ev.errs) != 0 || stacktest.Peek(a, "u", 0) != before {
		t.Fatalf("gone: %v errors %q, a %+v then %+v", res, ev.errs, before, stacktest.Peek(a, "u", 0))
	}
}

// A policy that cannot give back is asked last; two are refused, as are
// duplicate names, none, a policy without a name or a limiter, and more
// than MaxPolicies. With adds policies after the stack's.
func TestNewStack(t *testing.T) {
	c := &stackClock{t: time.Unix(1e9, 0)}
	log := stackKeyed(t, c, atomiclimit.SlidingLog(1, time.Minute))
	g := stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))
	s := newStack(t, pol("log", log), pol("g", g))
	s.Take(context.Background(), "k", 1, make([]atomiclimit.Outcome, 2))
	out := make([]atomiclimit.Outcome, 2)
	if res, at := s.Take(context.Background(), "k", 1, out); res != atomiclimit.Deny || at != 1 || out[0].Kind != atomiclimit.Violated {
		t.Fatalf("%v at %d %+v: the log must be asked last", res, at, out)
	}
	many := make([]atomiclimit.Policy[string], atomiclimit.MaxPolicies+1)
	for i := range many {
		many[i] = pol(fmt.Sprint(i), g)
	}
	for i, pols := range [][]atomiclimit.Policy[string]{
		nil,
		{pol("a", log), pol("b", stackKeyed(t, c, atomiclimit.SlidingLog(1, time.Minute)))},
		{pol("a", g), pol("a", g)},
		{pol("", g)},
		{{Name: "nil"}},
		many,
	} {
		if _, err := atomiclimit.NewStack(pols...); !errors.Is(err, atomiclimit.ErrStack) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	w, err := newStack(t, pol("g", g)).With(pol("route", log))
	if err != nil || w.Len() != 2 || w.Policy(1).Name != "route" {
		t.Fatalf("With: %v %v", w, err)
	}
	if _, err := w.With(pol("g", g)); !errors.Is(err, atomiclimit.ErrStack) {
		t.Fatalf("With a duplicate name: %v", err)
	}
}

// pastDeadline is a context whose deadline has passed while its Err is
// still nil: the moment before its timer fires, which a remote limiter may
// already have seen as the caller giving up.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }

// A caller past its deadline is gone, even before ctx.Err() says so: no
// error reported, nothing charged.
func TestStackDeadlinePassed(t *testing.T) {
	c := &stackClock{t: time.Unix(1e9, 0)}
	a := stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(2, time.Minute), 2))
	remote := &failing{Keyed: stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(9, time.Minute), 9))}
	s := newStack(t, pol("a", a), pol("remote", remote))
	var ev stackEvents
	out := make([]atomiclimit.Outcome, 2)
	before := stacktest.Peek(a, "k", 0)
	res, _ := s.Take(pastDeadline{context.Background()}, "k", 1, out)
	s.Report(ev.hook(), res, out, 1)
	if res != atomiclimit.Gone || len(ev.errs) != 0 || stacktest.Peek(a, "k", 0) != before {
		t.Fatalf("%v, errors %q, a %+v then %+v", res, ev.errs, before, stacktest.Peek(a, "k", 0))
	}
}

// fallingBack is a remote limiter whose store is down and whose outage
// policy is a local fallback: Take and Peek are the local limiter's, with
// an error that wraps atomiclimit.ErrFallback beside the outage (and the
// local limiter's own error, ErrTooManyKeys, when it is full), as
// redislimit's FallbackTo returns them.
type fallingBack struct {
	*atomiclimit.Keyed[string]
}

func fallbackErr(local error) error {
	if local != nil {
		return fmt.Errorf("%w (%w: %w)", errDown, atomiclimit.ErrFallback, local)
	}
	return fmt.Errorf("%w (%w)", errDown, atomiclimit.ErrFallback)
}

func (f fallingBack) Take(ctx context.Context, key string, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	d, r, err := f.Keyed.Take(ctx, key, n)
	return d, r, fallbackErr(err)
}

func (f fallingBack) Peek(ctx context.Context, key string, n int) (gcra.Decision, error) {
	d, err := f.Keyed.Peek(ctx, key, n)
	return d, fallbackErr(err)
}

// Issue 28, "a fallback's decision is the fallback's": a limiter whose
// error wraps atomiclimit.ErrFallback decided on a state of its own, and
// its decision is the policy's. Its admission passes and is an Allowed
// event, given back when another policy denies; its denial is a Deny (not
// Unavailable) with its own wait, and a Denied event; asked after another
// policy's denial (Peek), it names itself violated or would admit. Each
// time the outage is reported as an error beside the decision. A full
// fallback's refusal is Overloaded, as any full limiter's.
func TestStackFallback(t *testing.T) {
	c := &stackClock{t: time.Unix(1e9, 0)}
	ctx := context.Background()
	local := stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 2))
	fb := fallingBack{local}
	a := stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 5))
	s := newStack(t, pol("a", a), pol("fallback", fb))

	var ev stackEvents
	h := ev.hook()
	for i := range 2 {
		out := make([]atomiclimit.Outcome, 2)
		res, _ := s.Take(ctx, "k", 1, out)
		s.Report(h, res, out, 1)
		if res != atomiclimit.Pass || out[1].Kind != atomiclimit.Admitted || !errors.Is(out[1].Err, atomiclimit.ErrFallback) || out[1].Decision.Remaining != 1-i {
			t.Fatalf("admission %d: %v %+v", i, res, out)
		}
		if r, ok := out[1].Remaining(1); !ok || r != 1-i {
			t.Fatalf("admission %d: the fallback's state is described: %d %v", i, r, ok)
		}
	}
	out := make([]atomiclimit.Outcome, 2)
	res, at := s.Take(ctx, "k", 1, out)
	s.Report(h, res, out, 1)
	if res != atomiclimit.Deny || at != 1 || out[1].Kind != atomiclimit.Violated || out[0].Kind != atomiclimit.Refunded {
		t.Fatalf("the fallback's denial: %v at %d %+v", res, at, out)
	}
	if d := s.Denied(out); len(d.Violated) != 1 || d.Violated[0] != "fallback" || d.RetryAfter != time.Minute {
		t.Fatalf("the fallback's denial: %+v, want its own wait of 1m", d)
	}
	if ev.allowed["a"] != 2 || ev.allowed["fallback"] != 2 || ev.denied["fallback"] != 1 || ev.denied["a"] != 0 {
		t.Fatalf("hook events: allowed %v denied %v", ev.allowed, ev.denied)
	}
	if len(ev.errs) != 3 || ev.errs[2] != "fallback: store down (atomiclimit: decided by a fallback limiter)" {
		t.Fatalf("errors %q: one per fallback decision", ev.errs)
	}
	if r := stacktest.Peek(a, "k", 0).Remaining; r != 3 {
		t.Fatalf("a remaining %d, want 3: charged for the request the fallback denied", r)
	}

	// Asked after a denial: the fallback's Peek names it violated.
	strict := stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))
	s2 := newStack(t, pol("strict", strict), pol("fallback", fb))
	out = make([]atomiclimit.Outcome, 2)
	if s2.Take(ctx, "j", 1, out); out[1].Kind != atomiclimit.Admitted { // strict and the fallback admit j
		t.Fatalf("j: %+v", out)
	}
	out = make([]atomiclimit.Outcome, 2)
	if res, _ := s2.Take(ctx, "j", 1, out); res != atomiclimit.Deny || out[0].Kind != atomiclimit.Violated || out[1].Kind != atomiclimit.WouldAdmit || out[1].Err == nil {
		t.Fatalf("j, strict denies: %v %+v; want the fallback's Peek: would admit, its outage beside it", res, out)
	}
	stacktest.Decide(strict, "k", 1) // strict empty for k, as the fallback is
	out = make([]atomiclimit.Outcome, 2)
	if res, at := s2.Take(ctx, "k", 1, out); res != atomiclimit.Deny || at != 0 || out[1].Kind != atomiclimit.Violated || !errors.Is(out[1].Err, atomiclimit.ErrFallback) {
		t.Fatalf("k, strict denies: %v at %d %+v, want the fallback's Peek: violated", res, at, out)
	}
	if d := s2.Denied(out); len(d.Violated) != 2 || d.Violated[1] != "fallback" {
		t.Fatalf("k: %+v, want both violated", d)
	}

	// A full fallback refuses a new key: Overloaded, as any full limiter,
	// and an Overloaded event beside its outage's Error event.
	full, err := atomiclimit.NewKeyed[string](gcra.Per(1, time.Minute), 1, atomiclimit.WithClock(c),
		atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	if err != nil {
		t.Fatal(err)
	}
	s4 := newStack(t, pol("fallback", fallingBack{full}))
	s4.Take(ctx, "first", 1, make([]atomiclimit.Outcome, 1))
	out = make([]atomiclimit.Outcome, 1)
	ev.errs = nil
	res, _ = s4.Take(ctx, "second", 1, out)
	s4.Report(h, res, out, 1)
	if res != atomiclimit.Overloaded || out[0].Kind != atomiclimit.Full || ev.overloaded["fallback"] != 1 || len(ev.errs) != 1 {
		t.Fatalf("a full fallback: %v %+v, overloaded events %v, errors %q", res, out, ev.overloaded, ev.errs)
	}

	// A full limiter of its own: an Overloaded event, and no Error event
	// (its refusal is the server's capacity, not an outage).
	own, err := atomiclimit.NewKeyed[string](gcra.Per(1, time.Minute), 1, atomiclimit.WithClock(c),
		atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	if err != nil {
		t.Fatal(err)
	}
	s5 := newStack(t, pol("own", own))
	s5.Take(ctx, "first", 1, make([]atomiclimit.Outcome, 1))
	out = make([]atomiclimit.Outcome, 1)
	ev.errs = nil
	res, _ = s5.Take(ctx, "second", 1, out)
	s5.Report(h, res, out, 1)
	if res != atomiclimit.Overloaded || out[0].Kind != atomiclimit.Full || !errors.Is(out[0].Err, atomiclimit.ErrTooManyKeys) || ev.overloaded["own"] != 1 || len(ev.errs) != 0 {
		t.Fatalf("a full limiter: %v %+v, overloaded events %v, errors %q", res, out, ev.overloaded, ev.errs)
	}
}

// Stacked policies under contention, every kind before every other: eight
// goroutines send 300 requests each for one key, a generous policy first
// and a strict one (5 per hour) after it. The generous policy is charged
// exactly what was served (a window), or at most a token more (a bucket,
// whose give-backs are stricter by the time between an admission and its
// give-back); the strict one too; and at most 5 are served.
func TestStackContention(t *testing.T) {
	const workers, calls = 8, 300
	ctx := context.Background()
	for _, p := range stacktest.Pairs() {
		t.Run(stacktest.Name(p), func(t *testing.T) {
			gen := stacktest.Keyed[string](t, p[0].Generous)
			strict := stacktest.Keyed[string](t, p[1].Strict)
			s := newStack(t, pol("generous", gen), pol("strict", strict))
			served := stacktest.Hammer(workers, calls, func(int, int) bool {
				var out [2]atomiclimit.Outcome
				res, _ := s.Take(ctx, "k", 1, out[:])
				return res == atomiclimit.Pass
			})
			if served == 0 || served > stacktest.StrictQuota {
				t.Fatalf("served %d of %d, want 1 to %d", served, workers*calls, stacktest.StrictQuota)
			}
			stacktest.Check(t, "generous", p[0], stacktest.Charged[string](gen, "k", p[0].Quota), served)
			stacktest.Check(t, "strict", p[1], stacktest.Charged[string](strict, "k", stacktest.StrictQuota), served)
			t.Logf("served %d; generous charged %d, strict %d", served,
				stacktest.Charged[string](gen, "k", p[0].Quota), stacktest.Charged[string](strict, "k", stacktest.StrictQuota))
		})
	}
}

// A request through a stack of in-process limiters allocates nothing, with
// its outcomes on the caller's stack.
func TestStackAllocatesNothing(t *testing.T) {
	c := &stackClock{t: time.Unix(1e9, 0)}
	ctx := context.Background()
	a := stackKeyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1000))
	b := stackKeyed(t, c, atomiclimit.FixedWindow(1, time.Hour))
	s := newStack(t, pol("a", a), pol("b", b))
	s.Take(ctx, "k", 1, make([]atomiclimit.Outcome, 2)) // b full, the key held
	if n := testing.AllocsPerRun(1000, func() {
		var out [2]atomiclimit.Outcome
		res, _ := s.Take(ctx, "k", 1, out[:])
		_ = s.Denied(out[:])
		s.Report(nil, res, out[:], 1)
	}); n != 0 {
		t.Fatalf("%v allocations per denied request", n)
	}
}
