package grpclimit

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// modelPolicy is the plain GCRA of DESIGN.md §1 for one policy, per key: a
// map of TATs in nanoseconds on the test's timeline, no atomics, no cells.
type modelPolicy struct {
	name string
	T    int64 // emission interval, ns
	B    int64 // burst
	tat  map[netip.Prefix]int64
}

// decide returns what a request for n at now would get, without storing.
func (p *modelPolicy) decide(key netip.Prefix, now, n int64) (ok bool, next int64, retry time.Duration) {
	base := max(p.tat[key], now)
	next = base + n*p.T
	if n > p.B {
		return false, 0, gcra.Never
	}
	if next-now <= p.B*p.T {
		return true, next, 0
	}
	return false, 0, time.Duration(base + n*p.T - p.B*p.T - now)
}

// item is the policy's expected "ratelimit" item for state tat at now.
func (p *modelPolicy) item(tat, now int64) string {
	used := max(0, tat-now)
	r := (p.B*p.T - used) / p.T
	s := fmt.Sprintf("%q;r=%d", p.name, r)
	if r == 0 {
		if ta := used - (p.B-1)*p.T; ta > 0 {
			s += fmt.Sprintf(";t=%d", (ta+int64(time.Second)-1)/int64(time.Second))
		}
	}
	return s
}

// policyItem is the expected "ratelimit-policy" item: w the window B·T
// rounded up to seconds, q the burst scaled to w, never below it.
func (p *modelPolicy) policyItem() string {
	win := p.B * p.T
	w := max((win+int64(time.Second)-1)/int64(time.Second), 1)
	q := max(p.B, p.B*w*int64(time.Second)/win)
	return fmt.Sprintf("%q;q=%d;w=%d", p.name, q, w)
}

// Random calls on three clients and three methods, one with a policy of
// its own and costs of 1, 2 and 6 (above every burst), at random steps of a
// fake clock, through the unary interceptor, against the model of stacked
// GCRA policies: admitted exactly when every policy admits (all or
// nothing: a denial leaves every state as it was), the RetryInfo delay the
// longest violated wait rounded up to the millisecond (none when a policy
// can never admit), the QuotaFailure naming exactly the violated policies,
// and the metadata items of every policy exact.
func TestUnaryAgainstModel(t *testing.T) {
	c := newFakeClock()
	start := c.Now()
	mk := func(name string, every time.Duration, burst int) (*modelPolicy, atomiclimit.Policy[netip.Prefix]) {
		return &modelPolicy{name: name, T: int64(every), B: int64(burst), tat: map[netip.Prefix]int64{}},
			atomiclimit.Policy[netip.Prefix]{Name: name, Limiter: newKeyed[netip.Prefix](t, c, gcra.Every(every), burst)}
	}
	ma, pa := mk("a", 100*time.Millisecond, 3)
	mb, pb := mk("b", 700*time.Millisecond, 5)
	mbig, pbig := mk("big", 1500*time.Millisecond, 4)
	const say, big, huge = "/demo.Echo/Say", "/x.Y/Big", "/x.Y/Huge"
	m := mustNew(t, Config[netip.Prefix]{
		Key:      PeerIP,
		Policies: []atomiclimit.Policy[netip.Prefix]{pa, pb},
		Methods:  map[string]atomiclimit.Policy[netip.Prefix]{big: pbig},
		Costs:    map[string]int{big: 2, huge: 6},
		Metadata: MetadataOnAllow,
	})
	stacks := map[string][]*modelPolicy{say: {ma, mb}, big: {ma, mb, mbig}, huge: {ma, mb}}
	costs := map[string]int64{say: 1, big: 2, huge: 6}
	peers := []string{"192.0.2.1:5", "192.0.2.2:5", "[2001:db8::1]:5"}
	steps := []time.Duration{0, 0, 0, time.Millisecond, 10 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 333 * time.Millisecond, time.Second}
	methods := []string{say, say, say, big, big, huge}

	rng := rand.New(rand.NewPCG(1, 2))
	admitted, denials, nevers := 0, 0, 0
	for i := range 5000 {
		c.Add(steps[rng.IntN(len(steps))])
		now := int64(c.Now().Sub(start))
		addr := peers[rng.IntN(len(peers))]
		method := methods[rng.IntN(len(methods))]
		key, _ := PeerIP(callCtxOnly(addr), method)
		n := costs[method]
		pols := stacks[method]

		// The model: each policy's decision on its own state.
		allOK, longest := true, time.Duration(0)
		var violated []string
		nexts := make([]int64, len(pols))
		for j, p := range pols {
			ok, next, retry := p.decide(key, now, n)
			nexts[j] = next
			if !ok {
				allOK = false
				violated = append(violated, p.name)
				if longest != gcra.Never && (retry == gcra.Never || retry > longest) {
					longest = retry
				}
			}
		}
		if allOK {
			for j, p := range pols {
				p.tat[key] = nexts[j]
			}
		}
		var wantRL, wantPol []string
		for _, p := range pols {
			wantRL = append(wantRL, p.item(p.tat[key], now))
			wantPol = append(wantPol, p.policyItem())
		}

		ctx, hs := callCtx(addr)
		err := unary(m, ctx, method)
		where := fmt.Sprintf("step %d: %s from %s at %v", i, method, addr, time.Duration(now))
		if allOK != (err == nil) {
			t.Fatalf("%s: err = %v, model admits = %v", where, err, allOK)
		}
		if got, want := hs.header.Get(mdRateLimit), []string{strings.Join(wantRL, ", ")}; !slices.Equal(got, want) {
			t.Fatalf("%s: ratelimit = %q, want %q", where, got, want)
		}
		if got, want := hs.header.Get(mdPolicy), []string{strings.Join(wantPol, ", ")}; !slices.Equal(got, want) {
			t.Fatalf("%s: ratelimit-policy = %q, want %q", where, got, want)
		}
		if allOK {
			admitted++
			continue
		}
		denials++
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted {
			t.Fatalf("%s: code %v, want ResourceExhausted", where, st.Code())
		}
		d, ok := RetryDelay(err)
		if longest == gcra.Never {
			nevers++
			if ok {
				t.Fatalf("%s: RetryInfo %v for a call no policy can ever admit", where, d)
			}
		} else if want := ((longest + time.Millisecond - 1) / time.Millisecond) * time.Millisecond; !ok || d != want {
			t.Fatalf("%s: RetryInfo %v (%v), want %v (the exact wait %v rounded up)", where, d, ok, want, longest)
		}
		var got []string
		for _, det := range st.Details() {
			if qf, ok := det.(*errdetails.QuotaFailure); ok {
				for _, v := range qf.GetViolations() {
					got = append(got, v.GetSubject())
				}
			}
		}
		if !slices.Equal(got, violated) {
			t.Fatalf("%s: QuotaFailure names %q, want the violated %q", where, got, violated)
		}
	}
	t.Logf("%d admitted, %d denied (%d never admissible)", admitted, denials, nevers)
	if admitted < 500 || denials < 500 || nevers == 0 {
		t.Errorf("the walk did not exercise both sides: %d admitted, %d denied, %d never", admitted, denials, nevers)
	}
}
