package httplimit

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// TransportConfig configures a Transport. The zero value of every field is
// a working default: the zero TransportConfig[string] is a transport that
// sends every request at once through http.DefaultTransport, and holds a
// host whose provider asks it to.
type TransportConfig[K comparable] struct {
	// Base sends the requests (nil: http.DefaultTransport).
	Base http.RoundTripper
	// Key returns a request's key (nil: its host, URL.Host, for a K of
	// string; any other K needs a Key). The provider's holds are per key
	// too.
	Key KeyFunc[K]
	// Policies are the client's own limits: a request waits until every
	// one admits it, all at once (atomiclimit.Stack.Wait), before it is
	// sent. Any atomiclimit.KeyedLimiter serves: an *atomiclimit.Keyed
	// for a limit of this process, a redislimit.Limiter for one a fleet
	// shares. A lone policy of a GCRA rule, in process or in Redis, is
	// waited for in order. At most 8; a policy's Name is how the hook
	// hears it (empty is "default" for a lone entry).
	Policies []atomiclimit.Policy[K]
	// Cost returns the number of tokens a request takes (nil: 1). A cost
	// of 0 waits for no policy, only for a hold of its key; a negative
	// cost fails with ErrCost.
	Cost func(r *http.Request) int
	// MaxWait bounds each wait of a request before it is sent, for the
	// provider's hold and the policies together (0: none but the
	// request's context deadline). A request whose wait would be longer
	// fails at once, unsent.
	MaxWait time.Duration
	// Retries is how many times a request the provider refused with a
	// time to wait (a 429 or 503 with Retry-After, or with a RateLimit
	// field that says the quota is spent) is sent again after that wait,
	// if it can be replayed (0: never).
	Retries int
	// Replayable reports whether a request may be sent again (nil: one
	// that has GetBody, and one of an idempotent method, RFC 9110's GET,
	// HEAD, OPTIONS, TRACE, PUT and DELETE, or with an Idempotency-Key
	// header, that has no body). A request with a body and no GetBody is
	// never sent again: its body cannot be had twice.
	Replayable func(r *http.Request) bool
	// Name is the name the hook hears the transport's own events under:
	// the provider's holds (Held), the waits for them (Waited) and the
	// retries (Retried) (empty: "provider").
	Name string
	// Hook receives the transport's events (nil: none, at no cost): the
	// policies' as atomiclimit.Stack.Report reports a request that waited
	// (Waited with the wait, then Allowed; Denied when no wait within the
	// longest admits it; Overloaded, Error), and the transport's own under
	// Name: Held, Waited for a hold, Retried; Error for a key or a cost
	// that failed, and for a hold a policy's limiter could not take.
	Hook *atomiclimit.Hook
}

// A Transport is an http.RoundTripper that holds a client to its own limits
// and to its provider's: install it as an http.Client's Transport.
//
// Before a request is sent, it waits until every policy admits it, all or
// nothing, as atomiclimit.Stack.Wait waits (in order for a lone GCRA
// policy; otherwise taking and retrying, a window's waits jittered), and
// never past the request's context deadline or MaxWait: a request whose
// wait cannot end by then fails at once with an error wrapping
// atomiclimit.ErrDeadline, unsent. Nothing is held while a request waits,
// so every policy keeps its bound on the times the requests are sent.
//
// It listens to the provider: a 429 or 503 with Retry-After (seconds or an
// HTTP date), or a response whose RateLimit field says a quota is spent
// (an item with r=0 and its reset t), holds the request's key until that
// reset, for every request of this transport: they wait for it first, as
// for a policy. A policy whose limiter takes holds, a redislimit.Limiter,
// is given the hold too (one call per hold), so every process that shares
// its state in Redis holds the key as well, at no cost to their requests:
// the hold is in the state their next decision reads. A refused request
// that can be replayed (Replayable) is sent again once its hold is over,
// up to Retries times, if the hold fits its longest wait; the response the
// caller gets is the provider's last, untouched, and the bodies of the
// refusals it did not get are read (up to 64 KiB) and closed, so that
// their connections can be reused.
//
// A policy at exactly the provider's limit can still be refused: the
// client counts the times it sends, the provider the times the requests
// arrive, and the network moves them apart. Leave a margin: a window a
// little longer than the provider's, or a rate a little below.
//
// It starts no goroutine, and an admitted request allocates nothing
// beyond what Base allocates (with in-process policies; a remote
// limiter's calls allocate what its client allocates). A Transport is safe
// for concurrent use. Build one with NewTransport.
type Transport[K comparable] struct {
	base       http.RoundTripper
	key        KeyFunc[K]
	s          *atomiclimit.Stack[K] // nil: no policies
	holders    []holder[K]           // the policies' limiters that take holds
	hint       time.Duration         // a hold's end is spread over [0, min(hold/4, hint)); 0: not spread
	cost       func(*http.Request) int
	maxWait    time.Duration
	retries    int
	replayable func(*http.Request) bool
	name       string
	hook       *atomiclimit.Hook // nil: none
	holds      holds[K]
}

// A holder is a policy's limiter that takes a provider's hold into the
// state it shares with other processes, so that their next decisions hold
// the key too: redislimit.Limiter. Hold makes key's state admit nothing
// for d from now.
type holder[K comparable] interface {
	Hold(ctx context.Context, key K, d time.Duration) error
}

// NewTransport returns a Transport, an http.RoundTripper for the client
// of an API with a hard limit: each request waits until c.Policies, the
// client's own limits, admit it (in order for a lone GCRA policy; in
// process, or in Redis for a fleet), never past its context's deadline or
// c.MaxWait; and a 429 or 503 with Retry-After, or a RateLimit field that
// says the quota is spent, holds the request's key (its host, unless
// c.Key says otherwise) until the provider's reset, for every request of
// the transport, and for a fleet whose policy is in Redis. A refused
// request that can be replayed is sent again after the hold, up to
// c.Retries times. It fails with ErrConfig for an invalid c.
//
//	// The provider allows 100 calls a minute; the client counts when it
//	// sends, the provider when the calls arrive: a second's margin.
//	api, _ := atomiclimit.NewKeyedRule[string](atomiclimit.AnchoredWindow(100, 61*time.Second))
//	tr, _ := httplimit.NewTransport(httplimit.TransportConfig[string]{
//		Policies: []atomiclimit.Policy[string]{{Name: "api", Limiter: api}},
//		MaxWait:  30 * time.Second,
//		Retries:  2,
//	})
//	client := &http.Client{Transport: tr}
func NewTransport[K comparable](c TransportConfig[K]) (*Transport[K], error) {
	t := &Transport[K]{
		base: c.Base, key: c.Key, cost: c.Cost, maxWait: c.MaxWait, retries: c.Retries,
		replayable: c.Replayable, name: c.Name, hook: c.Hook,
	}
	t.holds.epoch = time.Now()
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	if t.key == nil {
		host, ok := any(KeyFunc[string](host)).(KeyFunc[K])
		if !ok {
			return nil, fmt.Errorf("%w: no Key function (the host is a string key)", ErrConfig)
		}
		t.key = host
	}
	if t.replayable == nil {
		t.replayable = replayable
	}
	if t.name == "" {
		t.name = "provider"
	}
	switch {
	case c.MaxWait < 0:
		return nil, fmt.Errorf("%w: MaxWait %v, negative", ErrConfig, c.MaxWait)
	case c.Retries < 0:
		return nil, fmt.Errorf("%w: Retries %d, negative", ErrConfig, c.Retries)
	}
	if len(c.Policies) > 0 {
		pols := c.Policies
		if len(pols) == 1 && pols[0].Name == "" {
			pols = []atomiclimit.Policy[K]{{Name: "default", Limiter: pols[0].Limiter}}
		}
		s, err := atomiclimit.NewStack(pols...)
		if err != nil {
			return nil, fmt.Errorf("%w: Policies: %w", ErrConfig, err)
		}
		t.s = s
		var zero K
		t.hint = time.Duration(math.MaxInt64)
		for _, p := range pols {
			if h, ok := p.Limiter.(holder[K]); ok {
				t.holders = append(t.holders, h)
			}
			if q := p.Limiter.Quota(zero); q.Limit > 0 && q.Limit != math.MaxInt && q.Window > 0 {
				t.hint = min(t.hint, q.Window/time.Duration(q.Limit))
			}
		}
		if t.hint == time.Duration(math.MaxInt64) {
			t.hint = 0
		}
	}
	return t, nil
}

// host is the default key of a Transport[string]: the host a request goes
// to (URL.Host), or its Host when the URL has none.
func host(r *http.Request) (string, error) {
	if r.URL != nil && r.URL.Host != "" {
		return r.URL.Host, nil
	}
	if r.Host == "" {
		return "", ErrNoKey
	}
	return r.Host, nil
}

// replayable is the default Replayable.
func replayable(r *http.Request) bool {
	if r.GetBody != nil {
		return true
	}
	if r.Body != nil && r.Body != http.NoBody {
		return false
	}
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, key := r.Header["Idempotency-Key"]
	_, xkey := r.Header["X-Idempotency-Key"]
	return key || xkey
}

// RoundTrip sends req through Base once its hold and its policies let it
// go, and sends it again after a refusal it can wait out, up to Retries
// times (see Transport). It returns the provider's last response, or,
// without a response, Base's error, or the error of a request that was not
// sent: its key's or its cost's, ctx's end, or a wait that could not end
// within the longest wait (wrapping atomiclimit.ErrDeadline), a limiter
// that could not decide and failed closed, or a full limiter's
// (atomiclimit.ErrTooManyKeys).
func (t *Transport[K]) RoundTrip(req *http.Request) (*http.Response, error) {
	key, err := t.key(req)
	if err != nil {
		return nil, t.fail(req, err)
	}
	n := 1
	if t.cost != nil {
		if n = t.cost(req); n < 0 {
			return nil, t.fail(req, fmt.Errorf("%w: %d", ErrCost, n))
		}
	}
	ctx := req.Context()
	r := req
	// prev is the provider's refusal of the attempt before, kept until the
	// retry may go: if its wait fails, the caller gets the refusal as it
	// came, not an error.
	var prev *http.Response
	for attempt := 0; ; attempt++ {
		if err := t.wait(ctx, key, n); err != nil {
			closeBody(r) // a RoundTripper closes the body, sent or not
			if prev != nil {
				return prev, nil
			}
			return nil, err
		}
		if prev != nil {
			discard(prev)
			if t.hook != nil && t.hook.Retried != nil {
				t.hook.Retried(t.name, attempt)
			}
		}
		resp, err := t.base.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		hold, refused := t.listen(ctx, key, resp)
		if !refused || attempt >= t.retries {
			return resp, nil
		}
		next := t.again(ctx, req, hold)
		if next == nil {
			return resp, nil
		}
		prev, r = resp, next
	}
}

// fail is a request that could not be limited (its key or its cost
// failed): reported, its body closed, unsent.
func (t *Transport[K]) fail(req *http.Request, err error) error {
	closeBody(req)
	if t.hook != nil && t.hook.Error != nil {
		t.hook.Error(t.name, err)
	}
	return err
}

// wait waits for key's hold, if it is held, then for the policies, and
// then for any hold heard meanwhile, within the longest wait: a request is
// never sent while its key is held. A hold heard while the policies were
// waited for spends their admission on a later send (stricter, never
// looser). It reads no clock when no key is held.
func (t *Transport[K]) wait(ctx context.Context, key K, n int) error {
	var waited time.Duration
	var err error
	if t.holds.any() {
		if waited, err = t.waitHolds(ctx, key, n, t.maxWait); err != nil {
			return err
		}
	}
	if t.s == nil {
		return nil
	}
	maxWait := rest(t.maxWait, waited)
	if waited, err = t.waitStack(ctx, key, n, maxWait); err != nil {
		return err
	}
	if t.holds.any() {
		_, err = t.waitHolds(ctx, key, n, rest(maxWait, waited))
	}
	return err
}

// rest is what is left of a longest wait maxWait (0: none) after waited.
func rest(maxWait, waited time.Duration) time.Duration {
	if maxWait == 0 {
		return 0
	}
	return max(maxWait-waited, time.Nanosecond)
}

// waitHolds waits until key is not held, each hold within what is left of
// maxWait (0: no longest wait), and returns how long it waited.
func (t *Transport[K]) waitHolds(ctx context.Context, key K, n int, maxWait time.Duration) (time.Duration, error) {
	var waited time.Duration
	for {
		until, now, held := t.holds.until(key)
		if !held {
			return waited, nil
		}
		d, err := t.waitHold(ctx, n, time.Duration(until-now), rest(maxWait, waited))
		if err != nil {
			return waited, err
		}
		waited += d
	}
}

// waitStack waits for the policies, at most maxWait (0: no longest wait),
// and returns how long they made the request wait.
func (t *Transport[K]) waitStack(ctx context.Context, key K, n int, maxWait time.Duration) (time.Duration, error) {
	// The outcomes on the goroutine's stack, as few as the policies need:
	// Wait wants them zero, and zeroing all eight costs a request
	// measurable time.
	switch l := t.s.Len(); {
	case l == 1:
		var out [1]atomiclimit.Outcome
		return t.waitPolicies(ctx, key, n, maxWait, out[:])
	case l == 2:
		var out [2]atomiclimit.Outcome
		return t.waitPolicies(ctx, key, n, maxWait, out[:])
	case l <= 4:
		var out [4]atomiclimit.Outcome
		return t.waitPolicies(ctx, key, n, maxWait, out[:l])
	default:
		var out [atomiclimit.MaxPolicies]atomiclimit.Outcome
		return t.waitPolicies(ctx, key, n, maxWait, out[:l])
	}
}

// waitPolicies waits until the policies admit the request, and returns
// how long they made it wait.
func (t *Transport[K]) waitPolicies(ctx context.Context, key K, n int, maxWait time.Duration, out []atomiclimit.Outcome) (time.Duration, error) {
	res, _, err := t.s.Wait(ctx, key, n, maxWait, out)
	t.s.Report(t.hook, res, out, n)
	if res != atomiclimit.Pass {
		return 0, fmt.Errorf("httplimit: not sent: %w", err)
	}
	var waited time.Duration // each wait is one policy's
	for i := range out {
		waited += out[i].Waited
	}
	return waited, nil
}

// waitHold waits out a hold with left to go, its end spread over one
// token's time of the tightest policy (hint), at most a quarter of the
// hold: the requests it held do not all go at its last instant. maxWait is
// what is left of the longest wait (0: none). It returns how long it
// waited.
func (t *Transport[K]) waitHold(ctx context.Context, n int, left, maxWait time.Duration) (time.Duration, error) {
	room := time.Duration(math.MaxInt64)
	if maxWait > 0 {
		room = maxWait
		if left > room {
			return 0, fmt.Errorf("httplimit: not sent: the provider holds the key for %v more, beyond the longest wait %v: %w", left, t.maxWait, atomiclimit.ErrDeadline)
		}
	}
	if d, ok := ctx.Deadline(); ok {
		if room = min(room, time.Until(d)); left > room {
			return 0, fmt.Errorf("httplimit: not sent: the provider holds the key for %v more, after the context's deadline: %w", left, atomiclimit.ErrDeadline)
		}
	}
	d := left
	if j := min(left/4, t.hint, room-left); j > 0 {
		d += time.Duration(rand.Int64N(int64(j)))
	}
	if !sleep(ctx, d) {
		return 0, fmt.Errorf("httplimit: not sent: %w", ctx.Err())
	}
	if t.hook != nil && t.hook.Waited != nil {
		t.hook.Waited(t.name, n, d)
	}
	return d, nil
}

// listen reads what resp says of key's quota: a refusal with a time to
// wait (429 or 503 with Retry-After), or a RateLimit field whose quota is
// spent, holds key for that time. It returns the time, and whether resp
// was a refusal it can wait out.
func (t *Transport[K]) listen(ctx context.Context, key K, resp *http.Response) (hold time.Duration, refused bool) {
	h := resp.Header
	refusal := resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable
	hold = -1
	if refusal {
		if v := h[hdrRetryAfter]; len(v) > 0 {
			if d, ok := parseRetryAfter(v[0], h["Date"], time.Now()); ok {
				hold = d
			}
		}
	}
	if v := h[hdrRateLimit]; len(v) > 0 {
		if d, ok := quotaSpent(v); ok {
			hold = max(hold, d)
		}
	}
	if hold < 0 {
		return 0, false // no time to wait: a refusal the caller gets as it is
	}
	if hold > 0 {
		t.hold(ctx, key, hold)
	}
	return hold, refusal
}

// hold holds key for d: here, and in the policies' limiters that take
// holds, when it ends more than a second after the key's current hold
// (the fields count whole seconds, rounded up: the refusals of one reset
// name ends within a second of each other).
func (t *Transport[K]) hold(ctx context.Context, key K, d time.Duration) {
	if !t.holds.hold(key, t.holds.now()+int64(d)) {
		return
	}
	if t.hook != nil && t.hook.Held != nil {
		t.hook.Held(t.name, d)
	}
	if len(t.holders) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx) // the fleet's hold outlives this request
	for _, h := range t.holders {
		if err := h.Hold(ctx, key, d); err != nil && t.hook != nil && t.hook.Error != nil {
			t.hook.Error(t.name, err)
		}
	}
}

// again returns the request to send again after a refusal whose hold is
// hold, or nil: req cannot be replayed, or the hold is longer than the
// request may wait.
func (t *Transport[K]) again(ctx context.Context, req *http.Request, hold time.Duration) *http.Request {
	if !t.replayable(req) || t.maxWait > 0 && hold > t.maxWait {
		return nil
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < hold {
		return nil
	}
	if req.GetBody == nil {
		if req.Body != nil && req.Body != http.NoBody {
			return nil // its body was read, and cannot be had again
		}
		return req
	}
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	r := new(http.Request)
	*r = *req
	r.Body = body
	return r
}

// maxDrain is the most of a discarded response's body read before it is
// closed: enough to reuse its connection, not a download.
const maxDrain = 64 << 10

// discard reads what is left of resp's body, up to maxDrain, and closes it.
func discard(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, maxDrain)
	resp.Body.Close()
}

// closeBody closes a request's body, if it has one.
func closeBody(r *http.Request) {
	if r.Body != nil {
		r.Body.Close()
	}
}

// holds are the keys a transport's provider asked it to hold, and until
// when. Its zero value holds nothing; epoch must be set before use.
type holds[K comparable] struct {
	epoch time.Time // the times are ns since epoch, on the monotonic clock
	// latest is the end of the latest hold, 0 when none is held: a
	// request reads it, and nothing else, while nothing is held.
	latest atomic.Int64
	mu     sync.RWMutex
	m      map[K]int64 // the keys held, and until when; guarded by mu
}

// any reports whether a key may be held: one load, no clock.
func (h *holds[K]) any() bool { return h.latest.Load() != 0 }

// now is the time on holds' clock (> 0 once epoch has passed).
func (h *holds[K]) now() int64 { return int64(time.Since(h.epoch)) + 1 + testSkew.Load() }

// until returns the end of key's hold, the time it read, and false if key
// is not held.
func (h *holds[K]) until(key K) (until, now int64, held bool) {
	if h.latest.Load() == 0 {
		return 0, 0, false
	}
	now = h.now()
	h.mu.RLock()
	until, held = h.m[key]
	h.mu.RUnlock()
	if held && until > now {
		return until, now, true
	}
	if h.latest.Load() <= now {
		h.expire(now)
	}
	return 0, now, false
}

// expire forgets every hold if all have ended by now.
func (h *holds[K]) expire(now int64) {
	h.mu.Lock()
	if l := h.latest.Load(); l != 0 && l <= now {
		clear(h.m)
		h.latest.Store(0)
	}
	h.mu.Unlock()
}

// hold holds key until until, and reports whether that ends more than a
// second after its current hold (or it had none).
func (h *holds[K]) hold(key K, until int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if u, ok := h.m[key]; ok && u > h.now() && until <= u+int64(time.Second) {
		return false
	}
	if h.m == nil {
		h.m = make(map[K]int64)
	}
	h.m[key] = until
	if until > h.latest.Load() {
		h.latest.Store(until) // first the entry, then latest: a reader that sees latest finds it
	}
	return true
}

// timers are stopped timers that sleep reuses: a wait allocates none.
var timers sync.Pool

// sleep waits d, or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if testTimer != nil {
		c, stop := testTimer(d)
		defer stop()
		select {
		case <-c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	tm, _ := timers.Get().(*time.Timer)
	if tm == nil {
		tm = time.NewTimer(d)
	} else {
		tm.Reset(d)
	}
	select {
	case <-tm.C:
		timers.Put(tm)
		return true
	case <-ctx.Done():
		if !tm.Stop() {
			select { // fired meanwhile: before Go 1.23's timers, the tick waits in the channel
			case <-tm.C:
			default:
			}
		}
		timers.Put(tm)
		return false
	}
}

// testTimer, if set (tests only), replaces sleep's timers, and testSkew
// moves the holds' clock ahead, as the test's timers fire.
var (
	testTimer func(time.Duration) (<-chan time.Time, func() bool)
	testSkew  atomic.Int64
)
