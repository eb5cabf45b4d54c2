package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
)

// A timeline on one key: the metadata of admissions (MetadataOnAllow) and
// of denials, and the denial's status: ResourceExhausted, RetryInfo,
// QuotaFailure, and an error that errors.Is matches with ErrLimited.
func TestUnaryTimeline(t *testing.T) {
	c := newFakeClock()
	lim := newKeyed[netip.Prefix](t, c, gcra.Every(time.Second), 2)
	m := mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "second", Limiter: lim}}, Metadata: MetadataOnAllow})
	steps := []struct {
		advance  time.Duration
		wantErr  bool
		wantRL   string
		wantWait time.Duration
	}{
		{0, false, `"second";r=1`, 0},
		{0, false, `"second";r=0;t=1`, 0},
		{0, true, `"second";r=0;t=1`, time.Second},
		{400 * time.Millisecond, true, `"second";r=0;t=1`, 600 * time.Millisecond},
		{600*time.Millisecond - 1, true, `"second";r=0;t=1`, time.Millisecond}, // 1 ns short: rounded up to 1 ms
		{time.Nanosecond, false, `"second";r=0;t=1`, 0},
		{5 * time.Second, false, `"second";r=1`, 0},
	}
	for i, s := range steps {
		c.Add(s.advance)
		ctx, hs := callCtx("192.0.2.1:40000")
		err := unary(m, ctx, echo.Say)
		if (err != nil) != s.wantErr {
			t.Fatalf("step %d: err = %v, want error %v", i, err, s.wantErr)
		}
		if got := hs.header.Get(mdRateLimit); !slices.Equal(got, []string{s.wantRL}) {
			t.Errorf("step %d: ratelimit = %q, want %q", i, got, s.wantRL)
		}
		if got := hs.header.Get(mdPolicy); !slices.Equal(got, []string{`"second";q=2;w=2`}) {
			t.Errorf("step %d: ratelimit-policy = %q", i, got)
		}
		if !s.wantErr {
			continue
		}
		if !errors.Is(err, ErrLimited) {
			t.Errorf("step %d: errors.Is(%v, ErrLimited) = false", i, err)
		}
		st := status.Convert(err)
		if st.Code() != codes.ResourceExhausted || !strings.HasPrefix(st.Message(), `grpclimit: rate limit exceeded: policy "second"; retry after `) {
			t.Errorf("step %d: status %v %q", i, st.Code(), st.Message())
		}
		if d, ok := RetryDelay(err); !ok || d != s.wantWait {
			t.Errorf("step %d: RetryInfo %v %v, want %v", i, d, ok, s.wantWait)
		}
		qf := quotaFailure(t, err)
		if len(qf) != 1 || qf[0].GetSubject() != "second" || qf[0].GetQuotaId() != "second" || qf[0].GetQuotaValue() != 2 || qf[0].GetDescription() != lim.Quota(netip.Prefix{}).String {
			t.Errorf("step %d: QuotaFailure %v", i, qf)
		}
	}
}

func quotaFailure(t *testing.T, err error) []*errdetails.QuotaFailure_Violation {
	t.Helper()
	for _, d := range status.Convert(err).Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok {
			return qf.GetViolations()
		}
	}
	t.Fatalf("%v: no QuotaFailure", err)
	return nil
}

// By default the fields go out on denials only: an admitted call sends no
// metadata (and so allocates nothing for it); MetadataNone sends none at
// all, and a MetadataSet names which fields.
func TestMetadataSets(t *testing.T) {
	for _, tc := range []struct {
		md              MetadataSet
		allowRL, allowP bool
		denyRL, denyP   bool
	}{
		{0, false, false, true, true},
		{MetadataOnAllow, true, true, true, true},
		{MetadataRateLimit, false, false, true, false},
		{MetadataPolicy | MetadataOnAllow, false, true, false, true},
		{MetadataNone | MetadataOnAllow | DefaultMetadata, false, false, false, false},
	} {
		lim := newKeyed[string](t, newFakeClock(), gcra.Every(time.Hour), 1)
		m := mustNew(t, Config[string]{Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Name: "p", Limiter: lim}}, Metadata: tc.md})
		for i, want := range [][2]bool{{tc.allowRL, tc.allowP}, {tc.denyRL, tc.denyP}} {
			ctx, hs := callCtx("192.0.2.1:1")
			err := unary(m, ctx, echo.Say)
			if (err != nil) != (i == 1) {
				t.Fatalf("%#x call %d: %v", tc.md, i, err)
			}
			if got := [2]bool{len(hs.header.Get(mdRateLimit)) > 0, len(hs.header.Get(mdPolicy)) > 0}; got != want {
				t.Errorf("metadata %#x, call %d: ratelimit, ratelimit-policy sent = %v, want %v", tc.md, i, got, want)
			}
		}
	}
}

// The retry delay is the exact wait rounded up to the millisecond, never 0.
func TestRetryDelayRounding(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{1, time.Millisecond},
		{time.Millisecond, time.Millisecond},
		{time.Millisecond + 1, 2 * time.Millisecond},
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{time.Hour, time.Hour},
	} {
		if got := retryDelay(tc.in); got != tc.want {
			t.Errorf("retryDelay(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if _, ok := RetryDelay(nil); ok {
		t.Error("RetryDelay(nil) has a delay")
	}
	if _, ok := RetryDelay(errors.New("x")); ok {
		t.Error("RetryDelay of a plain error has a delay")
	}
	if _, ok := RetryDelay(status.Error(codes.ResourceExhausted, "x")); ok {
		t.Error("RetryDelay of a status without details has a delay")
	}
}

// A cost above the quota is denied with no RetryInfo: no wait admits it.
func TestCostAboveQuota(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Every(time.Second), 3)
	m := mustNew(t, Config[string]{Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Name: "p", Limiter: lim}}, Costs: map[string]int{"/a/Big": 4, "/a/Free": 0}, Metadata: MetadataOnAllow})
	ctx, _ := callCtx("192.0.2.1:1")
	err := unary(m, ctx, "/a/Big")
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "cost exceeds the quota") {
		t.Fatalf("err = %v", err)
	}
	if d, ok := RetryDelay(err); ok {
		t.Errorf("RetryInfo %v on a call no wait admits", d)
	}
	// Cost 0 is a peek: always served, takes nothing.
	for range 10 {
		ctx, hs := callCtx("192.0.2.1:1")
		if err := unary(m, ctx, "/a/Free"); err != nil {
			t.Fatal(err)
		}
		if got := hs.header.Get(mdRateLimit); !slices.Equal(got, []string{`"p";r=3`}) {
			t.Fatalf("peek: ratelimit = %q", got)
		}
	}
}

// Stacked policies, all or nothing: a call the second policy denies is not
// charged to the first (it gave its admission back), both are listed in
// the metadata, and the hook sees one Denied for the violated policy only.
func TestStackedAllOrNothing(t *testing.T) {
	c := newFakeClock()
	wide := newKeyed[string](t, c, gcra.Every(time.Millisecond), 10)
	narrow := newKeyed[string](t, c, gcra.Every(time.Hour), 2)
	h := newCountingHook()
	m := mustNew(t, Config[string]{
		Key:      FullMethod,
		Policies: []atomiclimit.Policy[string]{{Name: "wide", Limiter: wide}, {Name: "narrow", Limiter: narrow}},
		Hook:     h.hook(),
	})
	for i := range 5 {
		ctx, hs := callCtx("192.0.2.1:1")
		err := unary(m, ctx, echo.Say)
		if (err == nil) != (i < 2) {
			t.Fatalf("call %d: err = %v", i, err)
		}
		if i >= 2 {
			if got := hs.header.Get(mdRateLimit)[0]; got != `"wide";r=8, "narrow";r=0;t=3600` {
				t.Errorf("call %d: ratelimit %q", i, got)
			}
			if got := hs.header.Get(mdPolicy)[0]; got != `"wide";q=1000;w=1, "narrow";q=2;w=7200` {
				t.Errorf("call %d: ratelimit-policy %q", i, got)
			}
		}
	}
	if d := wide.PeekN(echo.Say, c.Now(), 0); d.Remaining != 8 {
		t.Errorf("wide has %d left, want 8: a denied call was charged to it", d.Remaining)
	}
	if h.allowed["wide"] != 2 || h.allowed["narrow"] != 2 || h.denied["narrow"] != 3 || h.denied["wide"] != 0 {
		t.Errorf("hook: allowed %v denied %v", h.allowed, h.denied)
	}
}

// A limiter that fails: its outage policy's decision, and an error.
type failingLimiter struct {
	atomiclimit.KeyedLimiter[string]
	open bool
	err  error
}

var errStoreDown = errors.New("store down")

func (f *failingLimiter) Take(ctx context.Context, key string, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	if err := ctx.Err(); err != nil {
		return gcra.Decision{}, atomiclimit.Receipt{}, err
	}
	return gcra.Decision{Allowed: f.open, RetryAfter: map[bool]time.Duration{false: 2 * time.Second}[f.open]}, atomiclimit.Receipt{}, f.err
}

func (f *failingLimiter) Peek(ctx context.Context, key string, n int) (gcra.Decision, error) {
	d, _, err := f.Take(ctx, key, n)
	return d, err
}

// Outages: a limiter that fails closed answers Unavailable (not
// ResourceExhausted: the client exceeded nothing), with its wait as
// RetryInfo, the policies before it given back, and the limiter's error
// wrapped for the server's own interceptors and reported to Hook.Error;
// one that fails open serves the call, lists the policy in
// ratelimit-policy but gives it no ratelimit item. A caller gone is not an
// outage: nothing is reported.
func TestOutage(t *testing.T) {
	for _, open := range []bool{false, true} {
		c := newFakeClock()
		first := newKeyed[string](t, c, gcra.Every(time.Second), 5)
		fl := &failingLimiter{KeyedLimiter: newKeyed[string](t, c, gcra.Every(time.Second), 5), open: open, err: errStoreDown}
		h := newCountingHook()
		m := mustNew(t, Config[string]{
			Key:      FullMethod,
			Policies: []atomiclimit.Policy[string]{{Name: "local", Limiter: first}, {Name: "remote", Limiter: fl}},
			Metadata: MetadataOnAllow,
			Hook:     h.hook(),
		})
		ctx, hs := callCtx("192.0.2.1:1")
		err := unary(m, ctx, echo.Say)
		if open {
			if err != nil {
				t.Fatalf("fail open: %v", err)
			}
			if got := hs.header.Get(mdRateLimit)[0]; got != `"local";r=4` {
				t.Errorf("fail open: ratelimit %q, want only the local item", got)
			}
			if got := hs.header.Get(mdPolicy)[0]; got != `"local";q=5;w=5, "remote";q=5;w=5` {
				t.Errorf("fail open: ratelimit-policy %q", got)
			}
		} else {
			if status.Code(err) != codes.Unavailable || !errors.Is(err, errStoreDown) || errors.Is(err, ErrLimited) {
				t.Fatalf("fail closed: %v (errors.Is store down %v)", err, errors.Is(err, errStoreDown))
			}
			if strings.Contains(status.Convert(err).Message(), errStoreDown.Error()) {
				t.Errorf("the limiter's error text reached the client: %q", status.Convert(err).Message())
			}
			if d, ok := RetryDelay(err); !ok || d != 2*time.Second {
				t.Errorf("fail closed: RetryInfo %v %v, want 2s", d, ok)
			}
			if d := first.PeekN(echo.Say, c.Now(), 0); d.Remaining != 5 {
				t.Errorf("fail closed: the local policy kept its charge (%d left)", d.Remaining)
			}
		}
		if h.error["remote"] != 1 || !errors.Is(h.errs[0], errStoreDown) {
			t.Errorf("open=%v: Hook.Error %v %v", open, h.error, h.errs)
		}
	}

	// The caller gone: Canceled, no hook error, nothing charged.
	first := newKeyed[string](t, nil, gcra.Every(time.Second), 5)
	fl := &failingLimiter{KeyedLimiter: first, err: errStoreDown}
	h := newCountingHook()
	m := mustNew(t, Config[string]{Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Name: "local", Limiter: first}, {Name: "remote", Limiter: fl}}, Hook: h.hook()})
	ctx, _ := callCtx("192.0.2.1:1")
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := unary(m, ctx, echo.Say); status.Code(err) != codes.Canceled {
		t.Fatalf("caller gone: %v, want Canceled", err)
	}
	if len(h.error) != 0 {
		t.Errorf("caller gone reported as an error: %v", h.error)
	}
	if d := peekDecision(first, echo.Say, 0); d.Remaining != 5 {
		t.Errorf("caller gone: charged (%d left)", d.Remaining)
	}
	// A caller past its deadline whose context has not said so yet (the
	// limiter saw the deadline pass first) is gone too: DeadlineExceeded,
	// not served.
	ctx, _ = callCtx("192.0.2.1:1")
	if err := unary(m, pastDeadline{ctx}, echo.Say); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("caller past its deadline: %v, want DeadlineExceeded", err)
	}
	if len(h.error) != 0 {
		t.Errorf("caller past its deadline reported as an error: %v", h.error)
	}
}

// pastDeadline is a context whose deadline has passed while its Err is
// still nil: the moment before its timer fires, which a remote limiter may
// already have seen as the caller giving up.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }

// fallingBack is a remote limiter whose store is down and whose outage
// policy is a local fallback (redislimit's FallbackTo): Take and Peek are
// the local limiter's, with an error that wraps atomiclimit.ErrFallback
// beside the outage.
type fallingBack struct{ *atomiclimit.Keyed[string] }

func (f fallingBack) Take(ctx context.Context, key string, n int) (gcra.Decision, atomiclimit.Receipt, error) {
	d, r, _ := f.Keyed.Take(ctx, key, n)
	return d, r, fmt.Errorf("%w (%w)", errStoreDown, atomiclimit.ErrFallback)
}

func (f fallingBack) Peek(ctx context.Context, key string, n int) (gcra.Decision, error) {
	d, _ := f.Keyed.Peek(ctx, key, n)
	return d, fmt.Errorf("%w (%w)", errStoreDown, atomiclimit.ErrFallback)
}

// Issue 28: a fallback's decision is the policy's. Its denial is
// ResourceExhausted with its own wait and state, never Unavailable; asked
// after another policy's denial, it is named in the QuotaFailure when it
// would deny too, and its wait counts. Hook.Error hears the outage beside
// each decision.
func TestOutageFallback(t *testing.T) {
	c := newFakeClock()
	fb := fallingBack{newKeyed[string](t, c, gcra.Every(time.Minute), 1)}
	strict := newKeyed[string](t, c, gcra.Every(time.Second), 1)
	h := newCountingHook()
	m := mustNew(t, Config[string]{
		Key:      FullMethod,
		Policies: []atomiclimit.Policy[string]{{Name: "strict", Limiter: strict}, {Name: "remote", Limiter: fb}},
		Hook:     h.hook(),
	})
	ctx, _ := callCtx("192.0.2.1:1")
	if err := unary(m, ctx, echo.Say); err != nil {
		t.Fatalf("first call: %v", err)
	}
	// Both deny: strict first (asked first), then the fallback's Peek.
	ctx, hs := callCtx("192.0.2.1:1")
	err := unary(m, ctx, echo.Say)
	if status.Code(err) != codes.ResourceExhausted || !errors.Is(err, ErrLimited) {
		t.Fatalf("second call: %v, want ResourceExhausted", err)
	}
	if d, ok := RetryDelay(err); !ok || d != time.Minute {
		t.Errorf("RetryInfo %v %v, want the fallback's 1m, the longer wait", d, ok)
	}
	var violated []string
	for _, d := range status.Convert(err).Details() {
		if qf, ok := d.(*errdetails.QuotaFailure); ok {
			for _, v := range qf.Violations {
				violated = append(violated, v.Subject)
			}
		}
	}
	if !slices.Equal(violated, []string{"strict", "remote"}) {
		t.Errorf("violations %v, want strict and the fallback", violated)
	}
	if got := hs.header.Get(mdRateLimit); !slices.Equal(got, []string{`"strict";r=0;t=1, "remote";r=0;t=60`}) {
		t.Errorf("ratelimit %q, want the fallback's state too", got)
	}
	// The fallback alone denies: ResourceExhausted, not Unavailable.
	c.Add(time.Second)
	ctx, _ = callCtx("192.0.2.1:1")
	if err := unary(m, ctx, echo.Say); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third call: %v, want ResourceExhausted", err)
	}
	if h.allowed["remote"] != 1 || h.denied["remote"] != 2 || h.error["remote"] != 3 {
		t.Errorf("hook: allowed %v denied %v error %v; want the fallback's 1 Allowed and 2 Denied, an Error beside each", h.allowed, h.denied, h.error)
	}
}

// Methods add a policy to Policies for one method; a method of its own
// only (no Policies) leaves the others unlimited. With only Messages, a
// unary call is not even keyed (a missing key is no error).
func TestMethodPolicies(t *testing.T) {
	mo := mustNew(t, Config[string]{Key: APIKey("x-api-key", nil), Messages: []atomiclimit.Policy[string]{{Limiter: newKeyed[string](t, nil, gcra.Every(time.Hour), 1)}}})
	if ctx, _ := callCtx("192.0.2.1:1"); unary(mo, ctx, echo.Say) != nil {
		t.Error("a unary call was keyed for a Messages-only interceptor")
	}
	c := newFakeClock()
	login := newKeyed[netip.Prefix](t, c, gcra.Every(time.Minute), 1)
	m := mustNew(t, Config[netip.Prefix]{Key: PeerIP, Methods: map[string]atomiclimit.Policy[netip.Prefix]{"/auth.Auth/Login": {Name: "login", Limiter: login}}})
	for i := range 3 {
		ctx, hs := callCtx("192.0.2.1:1")
		if err := unary(m, ctx, echo.Say); err != nil || len(hs.header) != 0 {
			t.Fatalf("unlisted method: %v %v", err, hs.header)
		}
		ctx, _ = callCtx("192.0.2.1:1")
		if err := unary(m, ctx, "/auth.Auth/Login"); (err == nil) != (i == 0) {
			t.Fatalf("login %d: %v", i, err)
		}
	}
}

// Exclude passes a call untouched; a call without its key fails with
// InvalidArgument by default, or is served with ServeOnError, and the hook
// hears of it.
func TestExcludeAndOnError(t *testing.T) {
	lim := newKeyed[string](t, newFakeClock(), gcra.Every(time.Hour), 1)
	h := newCountingHook()
	cfg := Config[string]{
		Key:      APIKey("x-api-key", nil),
		Policies: []atomiclimit.Policy[string]{{Name: "p", Limiter: lim}},
		Exclude:  func(_ context.Context, m string) bool { return strings.HasPrefix(m, "/grpc.health.v1.Health/") },
		Hook:     h.hook(),
	}
	m := mustNew(t, cfg)
	for range 3 {
		ctx, hs := callCtx("192.0.2.1:1")
		if err := unary(m, ctx, "/grpc.health.v1.Health/Check"); err != nil || len(hs.header) != 0 {
			t.Fatalf("excluded: %v %v", err, hs.header)
		}
	}
	ctx, _ := callCtx("192.0.2.1:1")
	if err := unary(m, ctx, echo.Say); status.Code(err) != codes.InvalidArgument {
		t.Errorf("no key: %v, want InvalidArgument", err)
	}
	if h.error["p"] != 1 || !errors.Is(h.errs[0], ErrNoKey) {
		t.Errorf("hook errors %v %v", h.error, h.errs)
	}
	cfg.OnError = ServeOnError
	m = mustNew(t, cfg)
	ctx, _ = callCtx("192.0.2.1:1")
	if err := unary(m, ctx, echo.Say); err != nil {
		t.Errorf("ServeOnError: %v", err)
	}
	cfg.OnError = nil
	cfg.Key = func(context.Context, string) (string, error) { return "", errors.New("boom") }
	m = mustNew(t, cfg)
	ctx, _ = callCtx("192.0.2.1:1")
	if err := unary(m, ctx, echo.Say); status.Code(err) != codes.Internal || strings.Contains(err.Error(), "boom") {
		t.Errorf("key error: %v, want Internal without its text", err)
	}
}

func TestConfigErrors(t *testing.T) {
	lim := newKeyed[string](t, nil, gcra.Every(time.Second), 1)
	log, err := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingLog(3, time.Second), atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	log2, _ := atomiclimit.NewKeyedRule[string](atomiclimit.SlidingLog(3, time.Second), atomiclimit.WithSweepInterval(0))
	p := atomiclimit.Policy[string]{Name: "p", Limiter: lim}
	for name, c := range map[string]Config[string]{
		"no key":           {Policies: []atomiclimit.Policy[string]{p}},
		"no policy":        {Key: FullMethod},
		"no limiter":       {Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Name: "x"}}},
		"unnamed of two":   {Key: FullMethod, Policies: []atomiclimit.Policy[string]{p, {Limiter: lim}}},
		"same names":       {Key: FullMethod, Policies: []atomiclimit.Policy[string]{p, p}},
		"method same name": {Key: FullMethod, Policies: []atomiclimit.Policy[string]{p}, Methods: map[string]atomiclimit.Policy[string]{"/a/B": p}},
		"non-ASCII name":   {Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Name: "é", Limiter: lim}}},
		"negative cost":    {Key: FullMethod, Policies: []atomiclimit.Policy[string]{p}, Costs: map[string]int{"/a/B": -1}},
		"metadata bits":    {Key: FullMethod, Policies: []atomiclimit.Policy[string]{p}, Metadata: 1 << 6},
		"two logs":         {Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Name: "l1", Limiter: log}, {Name: "l2", Limiter: log2}}},
		"nine policies": {Key: FullMethod, Policies: func() []atomiclimit.Policy[string] {
			var ps []atomiclimit.Policy[string]
			for i := range 9 {
				ps = append(ps, atomiclimit.Policy[string]{Name: string(rune('a' + i)), Limiter: lim})
			}
			return ps
		}()},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) || !strings.HasPrefix(err.Error(), "grpclimit: ") {
			t.Errorf("%s: New error = %v, want ErrConfig", name, err)
		}
	}
	for name, c := range map[string]PacerConfig[string]{
		"nothing":          {},
		"negative retries": {Retries: -1},
		"no key":           {Policies: []atomiclimit.Policy[string]{p}},
		"negative cost":    {Key: FullMethod, Policies: []atomiclimit.Policy[string]{p}, Costs: map[string]int{"/a/B": -1}},
	} {
		if _, err := NewPacer(c); !errors.Is(err, ErrConfig) {
			t.Errorf("pacer %s: error = %v, want ErrConfig", name, err)
		}
	}
}

// Streams on a real server: opening one is checked against Policies (with
// the method's cost), each message received against Messages. A denied
// message ends the stream with ResourceExhausted and its RetryInfo; the
// message policies' fields go into the trailer.
func TestStreams(t *testing.T) {
	c := newFakeClock()
	opens := newKeyed[string](t, c, gcra.Every(time.Hour), 2)
	msgs := newKeyed[string](t, c, gcra.Every(time.Minute), 3)
	h := newCountingHook()
	m := mustNew(t, Config[string]{
		Key:      APIKey("x-api-key", nil),
		Policies: []atomiclimit.Policy[string]{{Name: "opens", Limiter: opens}},
		Messages: []atomiclimit.Policy[string]{{Name: "messages", Limiter: msgs}},
		Metadata: MetadataOnAllow,
		Hook:     h.hook(),
	})
	cc := serve(t, []grpc.ServerOption{grpc.ChainStreamInterceptor(m.Stream())})
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k1")

	// The first stream: three messages echoed, the fourth denied.
	s, err := cc.NewStream(ctx, echo.ChatDesc, echo.Chat)
	if err != nil {
		t.Fatal(err)
	}
	var recvErr error
	for i := range 5 {
		if err := s.SendMsg(wrapperspb.String("m")); err != nil {
			break // the server ended the stream
		}
		out := new(wrapperspb.StringValue)
		if recvErr = s.RecvMsg(out); recvErr != nil {
			if i != 3 {
				t.Errorf("message %d: %v, want the 4th denied", i, recvErr)
			}
			break
		}
		if i == 0 { // the header went out with the first reply
			hdr, err := s.Header()
			if got := hdr.Get(mdRateLimit); err != nil || !slices.Equal(got, []string{`"opens";r=1`}) {
				t.Errorf("stream header ratelimit = %q (%v)", got, err)
			}
		}
	}
	if status.Code(recvErr) != codes.ResourceExhausted {
		t.Fatalf("stream ended with %v, want ResourceExhausted", recvErr)
	}
	if d, ok := RetryDelay(recvErr); !ok || d != time.Minute {
		t.Errorf("message denial RetryInfo %v %v, want 1m", d, ok)
	}
	if got := s.Trailer().Get(mdRateLimit); !slices.Equal(got, []string{`"messages";r=0;t=60`}) {
		t.Errorf("trailer ratelimit = %q", got)
	}

	// The second stream opens (burst 2); its messages meet the spent budget.
	s, err = cc.NewStream(ctx, echo.ChatDesc, echo.Chat)
	if err != nil {
		t.Fatal(err)
	}
	s.SendMsg(wrapperspb.String("m"))
	if err := s.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second stream, first message: %v", err)
	}
	// The third stream is refused when it opens.
	s, err = cc.NewStream(ctx, echo.ChatDesc, echo.Chat)
	if err != nil {
		t.Fatal(err)
	}
	s.CloseSend()
	err = s.RecvMsg(new(wrapperspb.StringValue))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), `policy "opens"`) {
		t.Errorf("third stream: %v, want denied by opens", err)
	}
	// A stream that ends cleanly passes its EOF through unchecked.
	c.Add(2 * time.Hour)
	s, _ = cc.NewStream(ctx, echo.ChatDesc, echo.Chat)
	s.SendMsg(wrapperspb.String("m"))
	s.CloseSend()
	if err := s.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	if err := s.RecvMsg(new(wrapperspb.StringValue)); err != io.EOF {
		t.Errorf("clean end: %v, want io.EOF", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.allowed["opens"] != 3 || h.denied["opens"] != 1 || h.allowed["messages"] != 4 || h.denied["messages"] != 2 {
		t.Errorf("hook: allowed %v denied %v", h.allowed, h.denied)
	}
}

// ReportEvictions forwards the limiters' eviction counts once each.
func TestReportEvictions(t *testing.T) {
	c := newFakeClock()
	lim := newKeyed[netip.Prefix](t, c, gcra.Every(time.Second), 1)
	h := newCountingHook()
	m := mustNew(t, Config[netip.Prefix]{Key: PeerIP, Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "p", Limiter: lim}}, Hook: h.hook()})
	for _, a := range []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1"} {
		ctx, _ := callCtx(a)
		unary(m, ctx, echo.Say)
	}
	c.Add(time.Minute)
	lim.Sweep()
	m.ReportEvictions()
	m.ReportEvictions()
	if h.evicted["p"] != 3 {
		t.Errorf("evicted %v, want p: 3", h.evicted)
	}
}
