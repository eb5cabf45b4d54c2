package door

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// policy is a door's public Policy type: a struct of its own with Spec's
// underlying type.
type policy struct {
	Name    string
	Limiter atomiclimit.KeyedLimiter[string]
}

// A Set validates what a door's user configured, names a lone unnamed
// policy "default", gives every policy its unit, and stacks a list.
func TestSetAddStack(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	g := keyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))
	set := Set[string]{Unit: "requests"}
	s, err := AddStack(&set, "Policies", []policy{{Limiter: g}})
	if err != nil || s.Policies[0].Name != "default" || s.Policies[0].Names[0] != "default" {
		t.Fatalf("lone policy: %v %+v", err, s)
	}
	if f := s.Policies[0].Fields("k"); f.Policy != `"default";q=1;w=60;qu="requests"` {
		t.Errorf("fields %q", f.Policy)
	}
	if s, err := AddStack(&set, "Messages", []policy(nil)); s != nil || err != nil {
		t.Errorf("no policies: %v %v", s, err)
	}
	for _, tc := range []struct {
		ps   []policy
		want string
	}{
		{[]policy{{Name: "a", Limiter: g}, {Limiter: g}}, "Policies[1] has no name"},
		{[]policy{{Name: "a"}}, "Policies[0] has no Limiter"},
		{[]policy{{Name: "é", Limiter: g}}, `Policies[0] name "é": only printable ASCII can be a structured-field string`},
		{[]policy{{Name: "a", Limiter: g}, {Name: "a", Limiter: g}}, `invalid policy stack: two policies named "a" for the same requests (Policies)`},
	} {
		if _, err := AddStack(&set, "Policies", tc.ps); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v, want %s", tc.ps, err, tc.want)
		}
	}
	nine := make([]policy, MaxPolicies+1)
	for i := range nine {
		nine[i] = policy{Name: string(rune('a' + i)), Limiter: g}
	}
	if _, err := AddStack(&set, "Policies", nine); !errors.Is(err, ErrStack) {
		t.Errorf("nine policies: %v", err)
	}
	if _, err := set.Add("route", Spec[string]{Name: "x", Limiter: g}); err != nil {
		t.Error(err)
	}
	if err := CheckString("QuotaUnit", "bytes\n"); err == nil || !strings.HasPrefix(err.Error(), `QuotaUnit "bytes\n"`) {
		t.Errorf("CheckString: %v", err)
	}
}

// With stacks a route's policy on the door's: each route gets its own
// list, the door's is left as it was, and a door with no policies of its
// own has the route's alone.
func TestStackWith(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	var set Set[string]
	g := keyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))
	base, _ := AddStack(&set, "Policies", []policy{{Name: "a", Limiter: g}, {Name: "b", Limiter: g}})
	r1, _ := set.Add("r1", Spec[string]{Name: "r1", Limiter: g})
	r2, _ := set.Add("r2", Spec[string]{Name: "r2", Limiter: g})
	s1, err1 := base.With(r1)
	s2, err2 := base.With(r2)
	if err1 != nil || err2 != nil || len(base.Policies) != 2 || s1.Policies[2] != r1 || s2.Policies[2] != r2 {
		t.Fatalf("With: %v %v; base %d policies, s1 %v, s2 %v", err1, err2, len(base.Policies), s1.Policies[2].Name, s2.Policies[2].Name)
	}
	var none *Stack[string]
	if s, err := none.With(r1); err != nil || len(s.Policies) != 1 || s.Policies[0] != r1 {
		t.Errorf("no base: %v %+v", err, s)
	}
	if _, err := base.With(base.Policies[0]); !errors.Is(err, ErrStack) {
		t.Errorf("a duplicate name: %v", err)
	}
}

// evicting is a limiter whose evictions a test sets.
type evicting struct {
	*atomiclimit.Keyed[string]
	n atomic.Uint64
}

func (e *evicting) Stats() atomiclimit.Stats { return atomiclimit.Stats{Evicted: e.n.Load()} }

// ReportEvictions reports every eviction exactly once, however many
// goroutines call it while evictions go on; a limiter without Stats, and a
// nil hook, report nothing.
func TestReportEvictions(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	ev := &evicting{Keyed: keyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))}
	var set Set[string]
	if _, err := AddStack(&set, "Policies", []policy{{Name: "ev", Limiter: ev}, {Name: "plain", Limiter: plainLimiter{ev.Keyed}}}); err != nil {
		t.Fatal(err)
	}
	var reported atomic.Int64
	var mu sync.Mutex
	names := map[string]int{}
	h, _ := FillHook(&atomiclimit.Hook{Evicted: func(p string, n int) {
		reported.Add(int64(n))
		mu.Lock()
		names[p]++
		mu.Unlock()
	}})
	set.ReportEvictions(nil) // no hook: nothing, no panic
	const workers, rounds = 4, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if w == 0 {
					ev.n.Add(3)
				}
				set.ReportEvictions(h)
			}
		}()
	}
	wg.Wait()
	set.ReportEvictions(h)
	if got, want := reported.Load(), int64(3*rounds); got != want || names["plain"] != 0 {
		t.Errorf("reported %d evictions, want %d; by policy %v", got, want, names)
	}
}

// plainLimiter hides Keyed's Stats.
type plainLimiter struct{ k *atomiclimit.Keyed[string] }

func (p plainLimiter) Take(ctx context.Context, key string, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	return p.k.Take(ctx, key, n)
}
func (p plainLimiter) Peek(ctx context.Context, key string, n int) (gcra.Decision, error) {
	return p.k.Peek(ctx, key, n)
}
func (p plainLimiter) Refund(ctx context.Context, key string, n int, r atomiclimit.Receipt) (bool, error) {
	return p.k.Refund(ctx, key, n, r)
}
func (p plainLimiter) Quota(key string) atomiclimit.Quota { return p.k.Quota(key) }

// The hook events of a decision: Allowed for each policy that admitted,
// Denied (with its wait) for each that violated, none for a policy that
// gave its admission back; a filled hook's nil fields do nothing.
func TestReportEvents(t *testing.T) {
	if h, sink := FillHook(nil); h != nil || sink != nil {
		t.Fatal("FillHook(nil)")
	}
	var got []string
	h, sink := FillHook(&atomiclimit.Hook{
		Allowed: func(p string, n int) { got = append(got, "allowed "+p) },
		Denied:  func(p string, n int, d time.Duration) { got = append(got, "denied "+p+" "+d.String()) },
	})
	h.Overloaded("x", 1)
	h.Evicted("x", 1)
	sink("x", errDown)
	c := &clock{t: time.Unix(1e9, 0)}
	a := keyed(t, c, atomiclimit.GCRA(gcra.Per(2, time.Minute), 2))
	b := keyed(t, c, atomiclimit.GCRA(gcra.Per(1, time.Minute), 1))
	s := stackOf(t, newPolicy[string]("a", a, ""), newPolicy[string]("b", b, ""))
	out := make([]Outcome, 2)
	res, _ := s.Decide(context.Background(), "k", 1, out, nil)
	s.Report(h, res, out, 1)
	out = make([]Outcome, 2)
	res, _ = s.Decide(context.Background(), "k", 1, out, nil)
	s.Report(h, res, out, 1)
	s.Report(h, Unavailable, out, 1) // nothing
	s.Report(nil, res, out, 1)
	if want := "allowed a,allowed b,denied b 1m0s"; strings.Join(got, ",") != want {
		t.Errorf("events %q, want %q", got, want)
	}
}
