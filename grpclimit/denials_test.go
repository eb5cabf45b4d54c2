package grpclimit

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
)

// The allocations a denied unary call costs, the wait fixed (a fake
// clock), so that every call after the first finds its denial kept:
//
//   - MetadataNone: 0. The error is the kept one; the outcomes live on the
//     stack.
//   - default metadata: at most 6, all for the metadata. Ours: the fresh
//     metadata.MD map (2: its header and its one group), which the
//     receiver may keep; the values are the kept slices. The transport's
//     SetHeader (headerStream does what it does) merges it into a fresh
//     map with metadata.Join: its map (2) and one slice per key (2).
func TestDenyPathAllocs(t *testing.T) {
	const peer = "203.0.113.9:4711"
	run := func(name string, md MetadataSet, want float64, exact bool) {
		t.Helper()
		lim := newKeyed[netip.Prefix](t, newFakeClock(), gcra.Every(time.Hour), 1)
		m := mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "hour", Limiter: lim}}, Metadata: md})
		icpt := m.Unary()
		ctx, hs := callCtx(peer)
		info := &grpc.UnaryServerInfo{FullMethod: echo.Say}
		if _, err := icpt(ctx, nil, info, okHandler); err != nil { // the burst
			t.Fatal(err)
		}
		if _, err := icpt(ctx, nil, info, okHandler); status.Code(err) != codes.ResourceExhausted { // builds the denial
			t.Fatalf("%s: %v, want ResourceExhausted", name, err)
		}
		got := testing.AllocsPerRun(200, func() {
			hs.header = nil // as a fresh call's stream
			icpt(ctx, nil, info, okHandler)
		})
		t.Logf("%s: %v allocs per denied call", name, got)
		if exact && got != want || got > want {
			t.Errorf("%s: %v allocs per denied call, want %v", name, got, want)
		}
	}
	run("metadata=none", MetadataNone, 0, true)
	run("metadata=default", DefaultMetadata, 6, false)
}

// Denials with one wait share one error value, and it carries what a
// freshly built one does: the same status, details and text.
func TestDenialKept(t *testing.T) {
	c := newFakeClock()
	lim := newKeyed[netip.Prefix](t, c, gcra.Every(time.Minute), 1)
	m := mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "minute", Limiter: lim}}})
	ctx := callCtxOnly("192.0.2.7:1")
	if err := unary(m, ctx, echo.Say); err != nil {
		t.Fatal(err)
	}
	c.Add(1500 * time.Millisecond)
	first := unary(m, callCtxOnly("192.0.2.7:1"), echo.Say)
	ctx2, hs := callCtx("192.0.2.7:2")
	second := unary(m, ctx2, echo.Say)
	if first == nil || first != second {
		t.Fatalf("two denials with one wait: %p, %p; want one shared error", first, second)
	}
	if d, ok := RetryDelay(second); !ok || d != 58500*time.Millisecond {
		t.Errorf("RetryInfo %v %v, want 58.5s", d, ok)
	}
	if got := hs.header.Get(mdRateLimit); !slices.Equal(got, []string{`"minute";r=0;t=59`}) {
		t.Errorf("ratelimit %q", got)
	}
	// What deniedWith builds afresh for the same call.
	st := status.Convert(second)
	fresh := deniedFresh(t, m, netip.MustParsePrefix("192.0.2.7/32"))
	if fs := status.Convert(fresh); fs.Code() != st.Code() || fs.Message() != st.Message() || fmt.Sprint(fs.Details()) != fmt.Sprint(st.Details()) || fresh.Error() != second.Error() {
		t.Errorf("kept %v %q %v, fresh %v %q %v", st.Code(), st.Message(), st.Details(), fs.Code(), fs.Message(), fs.Details())
	}
	if !errors.Is(second, ErrLimited) {
		t.Error("a kept denial does not wrap ErrLimited")
	}
	// Another wait: another denial.
	c.Add(time.Second)
	if third := unary(m, callCtxOnly("192.0.2.7:1"), echo.Say); third == second {
		t.Error("a denial with another wait is the kept one")
	} else if d, _ := RetryDelay(third); d != 57500*time.Millisecond {
		t.Errorf("RetryInfo %v, want 57.5s", d)
	}
}

// deniedFresh builds the denial of key under m's one policy afresh:
// what the cache must hand out.
func deniedFresh(t *testing.T, m *Interceptor[netip.Prefix], key netip.Prefix) error {
	t.Helper()
	s := m.def
	lim := s.Policy(0).Limiter
	d, err := lim.Peek(t.Context(), key, 1)
	if err != nil || d.Allowed {
		t.Fatalf("peek: %v %v", d, err)
	}
	var out [1]atomiclimit.Outcome
	out[0].Decision, out[0].Kind, out[0].Quota = d, atomiclimit.Violated, lim.Quota(key)
	return denied(s.Stack, out[:], s.Denied(out[:]))
}

// A stack keeps at most maxKeptDenials denials in its slots, and the last.
func TestDenialsBounded(t *testing.T) {
	var first denials // a call that no wait admits has slot 0
	never := &denial{denialKey: denialKey{ms: -1}}
	first.keep(never)
	first.last.Store(nil)
	if first.get(&denialKey{ms: -1}) != never {
		t.Error("a never-admitted denial is not kept in slot 0")
	}
	var c denials
	for ms := int64(1); ms < denialSlots; ms++ {
		c.keep(&denial{denialKey: denialKey{ms: ms}})
	}
	if got := c.kept.Load(); got != maxKeptDenials {
		t.Errorf("kept %d, want %d", got, maxKeptDenials)
	}
	n := 0
	for i := range c.slots.Load() {
		if c.slots.Load()[i].Load() != nil {
			n++
		}
	}
	if n != maxKeptDenials {
		t.Errorf("%d slots filled, want %d", n, maxKeptDenials)
	}
	for _, ms := range []int64{1, maxKeptDenials, denialSlots - 1} {
		if c.get(&denialKey{ms: ms}) == nil {
			t.Errorf("wait %d ms: not kept", ms)
		}
	}
	if c.get(&denialKey{ms: maxKeptDenials + 1}) != nil {
		t.Error("a denial past the bound is kept")
	}
	never = &denial{denialKey: denialKey{ms: -1}} // past the bound: the last one only
	c.keep(never)
	if c.get(&denialKey{ms: -1}) != never || c.slots.Load()[0].Load() != nil {
		t.Error("a never-admitted denial past the bound: not the last one, or kept in its slot")
	}
	long := &denial{denialKey: denialKey{ms: 3_600_000}}
	c.keep(long)
	if c.get(&denialKey{ms: 3_600_000}) != long {
		t.Error("a long wait is not kept as the last denial")
	}
	// The same wait under another quota replaces the slot's denial.
	other := &denial{denialKey: denialKey{ms: 1, rl: `"p";r=1`}}
	c.keep(other)
	if c.get(&denialKey{ms: 1, rl: `"p";r=1`}) != other || c.kept.Load() != maxKeptDenials {
		t.Error("a denial for a filled slot did not replace it")
	}
}

// Concurrent denials share kept errors and metadata values while the clock
// moves (waits from a few ms to seconds, slots and the last one racing):
// each call's error carries a RetryInfo, a QuotaFailure and metadata that
// agree with one another, and nothing a caller can reach changes a kept
// denial. Run it with -race.
//
// A call whose reading of the clock went stale before it was decided (the
// clock moved on, and another call admitted at the later time) waits up to
// B·T plus that lag: the waits are at most 3 s + the 700 ms the clock moves
// in the whole run (seen at 16 cores: 3.007 s).
func TestDenialsConcurrent(t *testing.T) {
	const workers, calls = 8, 400
	c := newFakeClock()
	lim := newKeyed[netip.Prefix](t, c, gcra.Every(3*time.Second), 1)
	m := mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "slow", Limiter: lim}}})
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				if w == 0 && i%4 == 0 {
					c.Add(7 * time.Millisecond)
				}
				ctx, hs := callCtx(fmt.Sprintf("198.51.100.%d:1", i%3))
				err := unary(m, ctx, echo.Say)
				if err == nil {
					continue
				}
				if e := checkDenial(err, hs.header.Get(mdRateLimit), hs.header.Get(mdPolicy), 3*time.Second+calls/4*7*time.Millisecond); e != nil {
					errs <- e
					return
				}
				// A caller that mutates what it got changes nothing shared.
				for _, d := range status.Convert(err).Details() {
					if ri, ok := d.(*errdetails.RetryInfo); ok {
						ri.RetryDelay.Seconds = -1
					}
				}
				if md := hs.header; md != nil {
					md.Set(mdRateLimit, "changed")
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// checkDenial checks that a denial's status, details and metadata agree.
// The wait must be at most maxWait.
func checkDenial(err error, rl, pol []string, maxWait time.Duration) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted || !errors.Is(err, ErrLimited) {
		return fmt.Errorf("%v: not a rate-limit denial", err)
	}
	d, ok := RetryDelay(err)
	if !ok || d <= 0 || d > maxWait || d%time.Millisecond != 0 {
		return fmt.Errorf("%v: RetryInfo %v %v", err, d, ok)
	}
	if want := fmt.Sprintf("%s: policy %q; retry after %v", ErrLimited, "slow", d); st.Message() != want {
		return fmt.Errorf("message %q, want %q", st.Message(), want)
	}
	if qf := quotaFailureOf(err); len(qf) != 1 || qf[0].GetSubject() != "slow" || qf[0].GetQuotaValue() != 1 {
		return fmt.Errorf("%v: QuotaFailure %v", err, qf)
	}
	wantRL := fmt.Sprintf(`"slow";r=0;t=%d`, (d+time.Second-1)/time.Second)
	if !slices.Equal(rl, []string{wantRL}) || !slices.Equal(pol, []string{`"slow";q=1;w=3`}) {
		return fmt.Errorf("metadata %q %q with RetryInfo %v, want %q", rl, pol, d, wantRL)
	}
	return nil
}

func quotaFailureOf(err error) []*errdetails.QuotaFailure_Violation {
	for _, d := range status.Convert(err).Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok {
			return qf.GetViolations()
		}
	}
	return nil
}
