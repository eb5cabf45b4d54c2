package door

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

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

func keyed(t *testing.T, c *clock, rule atomiclimit.Rule) *atomiclimit.Keyed[string] {
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

type errs []string

func (e *errs) Error(policy string, err error) { *e = append(*e, policy+": "+err.Error()) }

func stackOf(t *testing.T, pols ...*Policy[string]) *Stack[string] {
	t.Helper()
	s, err := NewStack(pols)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The outcomes of every path through Decide, and what each policy was
// charged: a denial gives back the admissions before it and checks the
// policies after it; an outage that fails closed gives back; one that fails
// open goes on; a caller gone gives back and reports nothing.
func TestDecide(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	ctx := context.Background()
	a := keyed(t, c, atomiclimit.GCRA(gcra.Per(2, time.Minute), 2))
	b := keyed(t, c, atomiclimit.FixedWindow(1, time.Minute))
	z := keyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))
	s := stackOf(t, newPolicy[string]("a", a, ""), newPolicy[string]("b", b, ""), newPolicy[string]("z", z, ""))

	out := make([]Outcome, 3)
	if res, _ := s.Decide(ctx, "k", 1, out, nil); res != Pass || out[0].Kind != Admitted || out[2].Kind != Admitted {
		t.Fatalf("first: %v %+v", res, out)
	}
	out = make([]Outcome, 3)
	res, at := s.Decide(ctx, "k", 1, out, nil)
	if res != Deny || at != 1 || out[0].Kind != Refunded || out[1].Kind != Violated || out[2].Kind != Violated {
		t.Fatalf("second: %v at %d %+v", res, at, out)
	}
	if r := stacktest.Peek(a, "k", 0).Remaining; r != 1 {
		t.Fatalf("a remaining %d, want 1: charged for the denied request", r)
	}
	d := s.Denied(out)
	if len(d.Violated) != 2 || d.Violated[0] != "b" || d.Violated[1] != "z" || d.Longest != 1 || d.RetryAfter != time.Minute {
		t.Fatalf("denial %+v", d)
	}
	if r, ok := out[0].Remaining(1, 2); !ok || r != 1 {
		t.Fatalf("refunded outcome's remaining %d %v", r, ok)
	}

	// n above z's burst: never. Never is the longest wait.
	out = make([]Outcome, 3)
	s.Decide(ctx, "other", 2, out, nil)
	if d := s.Denied(out); d.RetryAfter != gcra.Never || d.Violated[len(d.Violated)-1] != "z" {
		t.Fatalf("never: %+v", d)
	}

	// Outages.
	var got errs
	closed := &failing{Keyed: keyed(t, c, atomiclimit.GCRA(gcra.Per(9, time.Minute), 9))}
	s2 := stackOf(t, newPolicy[string]("a", a, ""), newPolicy[string]("remote", closed, ""))
	before := stacktest.Peek(a, "u", 0)
	out = make([]Outcome, 2)
	if res, at := s2.Decide(ctx, "u", 1, out, got.Error); res != Unavailable || at != 1 || out[1].Kind != Unknown || out[0].Kind != Refunded {
		t.Fatalf("fail closed: %v %d %+v", res, at, out)
	}
	if stacktest.Peek(a, "u", 0) != before || len(got) != 1 || got[0] != "remote: store down" {
		t.Fatalf("fail closed: a charged, or errors %q", got)
	}
	closed.open = true
	out = make([]Outcome, 2)
	if res, _ := s2.Decide(ctx, "u", 1, out, got.Error); res != Pass || out[0].Kind != Admitted || out[1].Kind != Unknown {
		t.Fatalf("fail open: %v %+v", res, out)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	before = stacktest.Peek(a, "u", 0)
	out = make([]Outcome, 2)
	got = nil
	if res, _ := s2.Decide(cctx, "u", 1, out, got.Error); res != Gone || len(got) != 0 || stacktest.Peek(a, "u", 0) != before {
		t.Fatalf("gone: %v errors %q, a %+v then %+v", res, got, before, stacktest.Peek(a, "u", 0))
	}
}

// A policy that cannot give back is asked last; two are refused, as are
// duplicate names, none, and more than MaxPolicies.
func TestNewStack(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	log := keyed(t, c, atomiclimit.SlidingLog(1, time.Minute))
	g := keyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))
	s := stackOf(t, newPolicy[string]("log", log, ""), newPolicy[string]("g", g, ""))
	out := make([]Outcome, 2)
	s.Decide(context.Background(), "k", 1, out, nil)
	out = make([]Outcome, 2)
	if res, at := s.Decide(context.Background(), "k", 1, out, nil); res != Deny || at != 1 || out[0].Kind != Violated {
		t.Fatalf("%v at %d %+v: the log must be asked last", res, at, out)
	}
	bad := [][]*Policy[string]{
		nil,
		{newPolicy[string]("a", log, ""), newPolicy[string]("b", keyed(t, c, atomiclimit.SlidingLog(1, time.Minute)), "")},
		{newPolicy[string]("a", g, ""), newPolicy[string]("a", g, "")},
		make([]*Policy[string], MaxPolicies+1),
	}
	for i, pols := range bad {
		if _, err := NewStack(pols); !errors.Is(err, ErrStack) {
			t.Errorf("case %d: %v", i, err)
		}
	}
}

// pastDeadline is a context whose deadline has passed while its Err is
// still nil: the moment before its timer fires, which a remote limiter may
// already have seen as the caller giving up.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }

// A caller past its deadline is gone, even before ctx.Err() says so: no
// error reported, nothing charged, no 503.
func TestDecideDeadlinePassed(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	a := keyed(t, c, atomiclimit.GCRA(gcra.Per(2, time.Minute), 2))
	remote := &failing{Keyed: keyed(t, c, atomiclimit.GCRA(gcra.Per(9, time.Minute), 9))}
	s := stackOf(t, newPolicy[string]("a", a, ""), newPolicy[string]("remote", remote, ""))
	var got errs
	out := make([]Outcome, 2)
	before := stacktest.Peek(a, "k", 0)
	if res, _ := s.Decide(pastDeadline{context.Background()}, "k", 1, out, got.Error); res != Gone || len(got) != 0 || stacktest.Peek(a, "k", 0) != before {
		t.Fatalf("%v, errors %q, a %+v then %+v", res, got, before, stacktest.Peek(a, "k", 0))
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

// events counts a hook's Allowed and Denied events per policy, and the
// waits of the denials.
type events struct {
	allowed, denied map[string]int
	waits           []time.Duration
}

func (e *events) hook() *atomiclimit.Hook {
	e.allowed, e.denied = map[string]int{}, map[string]int{}
	return &atomiclimit.Hook{
		Allowed: func(p string, _ int) { e.allowed[p]++ },
		Denied:  func(p string, _ int, w time.Duration) { e.denied[p]++; e.waits = append(e.waits, w) },
	}
}

// Issue 28, "a fallback's decision is the fallback's": a limiter whose
// error wraps atomiclimit.ErrFallback decided on a state of its own, and
// its decision is the policy's. Its admission passes and is an Allowed
// event, given back when another policy denies; its denial is a Deny (not
// Unavailable) with its own wait, and a Denied event; asked after another
// policy's denial (Peek), it names itself violated or would admit. Each
// time the outage goes to the error sink beside the decision. A full
// fallback's refusal is Overloaded, as any full limiter's.
func TestDecideFallback(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	ctx := context.Background()
	local := keyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 2))
	fb := fallingBack{local}
	a := keyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 5))
	s := stackOf(t, newPolicy[string]("a", a, ""), newPolicy[string]("fallback", fb, ""))

	var got errs
	var ev events
	h := ev.hook()
	for i := range 2 {
		out := make([]Outcome, 2)
		res, _ := s.Decide(ctx, "k", 1, out, got.Error)
		s.Report(h, res, out, 1)
		if res != Pass || out[1].Kind != Admitted || !errors.Is(out[1].Err, atomiclimit.ErrFallback) || out[1].D.Remaining != 1-i {
			t.Fatalf("admission %d: %v %+v", i, res, out)
		}
		if r, ok := out[1].Remaining(1, 2); !ok || r != 1-i {
			t.Fatalf("admission %d: the fallback's state is described: %d %v", i, r, ok)
		}
	}
	out := make([]Outcome, 2)
	res, at := s.Decide(ctx, "k", 1, out, got.Error)
	s.Report(h, res, out, 1)
	if res != Deny || at != 1 || out[1].Kind != Violated || out[0].Kind != Refunded {
		t.Fatalf("the fallback's denial: %v at %d %+v", res, at, out)
	}
	if d := s.Denied(out); len(d.Violated) != 1 || d.Violated[0] != "fallback" || d.RetryAfter != time.Minute {
		t.Fatalf("the fallback's denial: %+v, want its own wait of 1m", d)
	}
	if ev.allowed["a"] != 2 || ev.allowed["fallback"] != 2 || ev.denied["fallback"] != 1 || ev.denied["a"] != 0 {
		t.Fatalf("hook events: allowed %v denied %v", ev.allowed, ev.denied)
	}
	if len(got) != 3 || got[2] != "fallback: store down (atomiclimit: decided by a fallback limiter)" {
		t.Fatalf("errors %q: one per fallback decision", got)
	}
	if r := stacktest.Peek(a, "k", 0).Remaining; r != 3 {
		t.Fatalf("a remaining %d, want 3: charged for the request the fallback denied", r)
	}

	// Asked after a denial: the fallback's Peek names it violated.
	strict := keyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))
	s2 := stackOf(t, newPolicy[string]("strict", strict, ""), newPolicy[string]("fallback", fb, ""))
	out = make([]Outcome, 2)
	if s2.Decide(ctx, "j", 1, out, nil); out[1].Kind != Admitted { // strict and the fallback admit j
		t.Fatalf("j: %+v", out)
	}
	out = make([]Outcome, 2)
	got = nil
	if res, _ := s2.Decide(ctx, "j", 1, out, got.Error); res != Deny || out[0].Kind != Violated || out[1].Kind != WouldAdmit || len(got) != 1 {
		t.Fatalf("j, strict denies: %v %+v, errors %q; want the fallback's Peek: would admit, its outage reported", res, out, got)
	}
	stacktest.Decide(strict, "k", 1) // strict empty for k, as the fallback is
	out = make([]Outcome, 2)
	if res, at := s2.Decide(ctx, "k", 1, out, nil); res != Deny || at != 0 || out[1].Kind != Violated || !errors.Is(out[1].Err, atomiclimit.ErrFallback) {
		t.Fatalf("k, strict denies: %v at %d %+v, want the fallback's Peek: violated", res, at, out)
	}
	if d := s2.Denied(out); len(d.Violated) != 2 || d.Violated[1] != "fallback" {
		t.Fatalf("k: %+v, want both violated", d)
	}

	// A full fallback refuses a new key: Overloaded, as any full limiter.
	full, err := atomiclimit.NewKeyed[string](gcra.Per(1, time.Minute), 1, atomiclimit.WithClock(c),
		atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	if err != nil {
		t.Fatal(err)
	}
	s4 := stackOf(t, newPolicy[string]("fallback", fallingBack{full}, ""))
	s4.Decide(ctx, "first", 1, make([]Outcome, 1), nil)
	out = make([]Outcome, 1)
	if res, _ := s4.Decide(ctx, "second", 1, out, nil); res != Overloaded || out[0].Kind != Full {
		t.Fatalf("a full fallback: %v %+v", res, out)
	}
}
