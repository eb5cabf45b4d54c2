package redislimit_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/httplimit"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// The tests in this file put a Limiter behind httplimit's middleware on a
// real HTTP server, kill the redis-server under it and start it again, and
// check that each response is what httplimit's doc ("Outages") promises.

// eventHook records the middleware's events per policy.
type eventHook struct {
	mu                   sync.Mutex
	allowed, denied, err map[string]int
	errs                 []error
}

func newEventHook() *eventHook {
	return &eventHook{allowed: map[string]int{}, denied: map[string]int{}, err: map[string]int{}}
}

func (h *eventHook) Allowed(p string, _ int) { h.mu.Lock(); h.allowed[p]++; h.mu.Unlock() }
func (h *eventHook) Denied(p string, _ int, _ time.Duration) {
	h.mu.Lock()
	h.denied[p]++
	h.mu.Unlock()
}
func (h *eventHook) Error(p string, err error) {
	h.mu.Lock()
	h.err[p]++
	h.errs = append(h.errs, err)
	h.mu.Unlock()
}

// counts returns the Allowed, Denied and Error events of policy p so far.
// hook returns h as the middleware's Hook.
func (h *eventHook) hook() *atomiclimit.Hook {
	return &atomiclimit.Hook{Allowed: h.Allowed, Denied: h.Denied, Error: h.Error}
}

func (h *eventHook) counts(p string) [3]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return [3]int{h.allowed[p], h.denied[p], h.err[p]}
}

// reply is what the client read.
type reply struct {
	status int
	h      http.Header
	body   string
}

// header returns the header's value, and "<absent>" when it is not there at
// all (an empty value is not the same as none).
func (r reply) header(name string) string {
	if v, ok := r.h[http.CanonicalHeaderKey(name)]; ok {
		return strings.Join(v, ", ")
	}
	return "<absent>"
}

// doer sends GET / to a server as a client, identified by X-Client.
type doer struct {
	t      *testing.T
	url    string
	hc     *http.Client
	served atomic.Int64 // requests the handler behind the middleware ran
}

func newHTTPServer(t *testing.T, mw *httplimit.Middleware[string]) *doer {
	d := &doer{t: t}
	srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.served.Add(1)
		io.WriteString(w, "ok\n")
	})))
	t.Cleanup(srv.Close)
	d.url, d.hc = srv.URL, srv.Client()
	return d
}

func (d *doer) get(client string) reply {
	d.t.Helper()
	req, err := http.NewRequest("GET", d.url+"/", nil)
	require.NoError(d.t, err)
	req.Header.Set("X-Client", client)
	resp, err := d.hc.Do(req)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return reply{resp.StatusCode, resp.Header, string(body)}
}

// outageClient is a client of s that fails fast: no retries, and deadlines
// on the connection (WithTimeout needs ContextTimeoutEnabled).
func outageClient(t *testing.T, s *server) *redis.Client {
	return s.client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
}

// waitRedis polls until l reaches Redis again after a restart (the server
// answers PING already; this waits for l's own client to get a connection).
// The probe key is one the test does not use otherwise.
func waitRedis(t *testing.T, l *redislimit.Limiter[string]) {
	t.Helper()
	waitFor(t, "the limiter to reach redis again", func() bool {
		_, err := l.Peek(context.Background(), "probe", 1)
		return err == nil
	})
}

// stopped is a clock that does not move: the local limiters' decisions, and
// so their Retry-After, are exact.
type stopped struct{ t time.Time }

func (c stopped) Now() time.Time { return c.t }

// TestHTTPOutage: one policy, a Limiter with one per hour and burst 2 in
// Redis, behind the middleware, for each outage policy. Before the outage
// Redis decides (200, 200, 429 with the headers httplimit documents); while
// redis-server is killed the outage policy does, with the responses of
// httplimit's doc ("Outages"); after it is started again (empty: no
// persistence) Redis decides again, from a full bucket.
func TestHTTPOutage(t *testing.T) {
	const policyHeader = `"redis";q=2;w=7200` // B = 2, B·T = 2 h
	for _, policy := range []string{"fail-closed", "fail-open", "fallback"} {
		t.Run("policy="+policy, func(t *testing.T) {
			s := startServer(t)
			c := outageClient(t, s)
			var outage redislimit.Outage
			var local *atomiclimit.Keyed[string]
			switch policy {
			case "fail-closed":
				outage = redislimit.FailClosed
			case "fail-open":
				outage = redislimit.FailOpen
			default:
				var err error
				local, err = atomiclimit.NewKeyed[string](gcra.Every(time.Hour), 2,
					atomiclimit.WithClock(stopped{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}), atomiclimit.WithSweepInterval(0))
				require.NoError(t, err)
				defer local.Close()
				outage = redislimit.FallbackTo(local)
			}
			l, err := redislimit.New(c, gcra.Every(time.Hour), 2,
				redislimit.WithTimeout(200*time.Millisecond), redislimit.WithOutage(outage))
			require.NoError(t, err)
			hook := newEventHook()
			mw, err := httplimit.New(httplimit.Config[string]{
				Key:      httplimit.Header("X-Client"),
				Policies: []atomiclimit.Policy[string]{{Name: "redis", Limiter: l}},
				Hook:     hook.hook(),
			})
			require.NoError(t, err)
			srv := newHTTPServer(t, mw)

			// Redis decides: two admissions, then a denial for an hour (less
			// the microseconds between the requests, rounded up). The
			// fallback, of the same rule, decides the same (errors: the
			// Error events it comes with, one per request).
			decides := func(when string, errors int) {
				t.Helper()
				before := hook.counts("redis")
				for i, want := range []string{`"redis";r=1`, `"redis";r=0;t=3600`} {
					r := srv.get("alice")
					assert.Equal(t, 200, r.status, "%s: request %d", when, i)
					assert.Equal(t, want, r.header("RateLimit"), "%s: request %d", when, i)
					assert.Equal(t, policyHeader, r.header("RateLimit-Policy"), "%s: request %d", when, i)
					assert.Equal(t, "<absent>", r.header("Retry-After"), "%s: request %d", when, i)
				}
				r := srv.get("alice")
				assert.Equal(t, 429, r.status, when)
				assert.Equal(t, `"redis";r=0;t=3600`, r.header("RateLimit"), when)
				assert.Equal(t, policyHeader, r.header("RateLimit-Policy"), when)
				assert.Equal(t, "3600", r.header("Retry-After"), when)
				assert.Equal(t, "application/problem+json", r.header("Content-Type"), when)
				assert.Contains(t, r.body, `"status":429`, when)
				assert.Contains(t, r.body, `"violated-policies":["redis"]`, when)
				assert.Equal(t, [3]int{2, 1, errors}, sub(hook.counts("redis"), before), "%s: Allowed, Denied, Error events", when)
			}
			redisDecides := func(when string) { t.Helper(); decides(when, 0) }
			redisDecides("before the outage")
			require.EqualValues(t, 2, srv.served.Load())

			s.kill()
			before, served := hook.counts("redis"), srv.served.Load()
			switch policy {
			case "fail-closed":
				// 503 (DefaultDeny with Denial.Err), for a key Redis had
				// denied and for a new one alike; Retry-After is the
				// policy's hint, one interval capped at 1s; the policy is
				// listed but has no RateLimit item.
				for _, client := range []string{"alice", "bob", "bob"} {
					r := srv.get(client)
					assert.Equal(t, 503, r.status, client)
					assert.Equal(t, "application/problem+json", r.header("Content-Type"), client)
					assert.Contains(t, r.body, `"status":503`, client)
					assert.Contains(t, r.body, `"title":"Service Unavailable"`, client)
					assert.NotContains(t, r.body, "violated-policies", client)
					assert.Equal(t, "1", r.header("Retry-After"), client)
					assert.Equal(t, policyHeader, r.header("RateLimit-Policy"), client)
					assert.Equal(t, "<absent>", r.header("RateLimit"), client)
				}
				assert.Equal(t, served, srv.served.Load(), "fail closed serves nothing")
				assert.Equal(t, [3]int{0, 0, 3}, sub(hook.counts("redis"), before), "Error events only: no Denied for an outage")
			case "fail-open":
				// Served, even for the key Redis had denied: no limit at all.
				for _, client := range []string{"alice", "alice", "alice", "bob"} {
					r := srv.get(client)
					assert.Equal(t, 200, r.status, client)
					assert.Equal(t, "<absent>", r.header("RateLimit"), client)
					assert.Equal(t, policyHeader, r.header("RateLimit-Policy"), client)
					assert.Equal(t, "<absent>", r.header("Retry-After"), client)
				}
				assert.Equal(t, served+4, srv.served.Load())
				assert.Equal(t, [3]int{0, 0, 4}, sub(hook.counts("redis"), before), "Error events only")
			default:
				// Issue 28: the local limiter decides, with its own limit
				// (burst 2 an hour, as Redis's) and its decision is the
				// policy's: served while it admits, then the policy's 429
				// with the local limiter's exact wait and state, as Redis
				// decided before the outage; an Error event beside each
				// decision.
				decides("during the outage, the fallback", 3)
				assert.Equal(t, served+2, srv.served.Load())
				assert.Equal(t, 0, peekLocal(local, "alice", 0).Remaining, "the local limiter was charged")
				assert.Equal(t, 2, peekLocal(local, "bob", 0).Remaining)
			}
			hook.mu.Lock()
			for _, err := range hook.errs {
				assert.ErrorIs(t, err, redislimit.ErrUnavailable)
				if policy == "fallback" {
					assert.ErrorIs(t, err, atomiclimit.ErrFallback)
				} else {
					assert.NotErrorIs(t, err, atomiclimit.ErrFallback)
				}
			}
			hook.mu.Unlock()

			// Started again, empty (persistence is off): alice's bucket is
			// full again, and Redis decides as before the outage.
			s.restart(t)
			waitRedis(t, l)
			redisDecides("after the restart")
		})
	}
}

// TestHTTPOutageStacked: an in-process policy before a Redis one that fails
// closed. While Redis is down every request is a 503, and the in-process
// policy's admission is given back each time: its state is unchanged.
func TestHTTPOutageStacked(t *testing.T) {
	s := startServer(t)
	c := outageClient(t, s)
	local, err := atomiclimit.NewKeyed[string](gcra.Every(time.Minute), 5,
		atomiclimit.WithClock(stopped{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	defer local.Close()
	remote, err := redislimit.New(c, gcra.Every(time.Hour), 2, redislimit.WithTimeout(200*time.Millisecond))
	require.NoError(t, err)
	hook := newEventHook()
	mw, err := httplimit.New(httplimit.Config[string]{
		Key: httplimit.Header("X-Client"),
		Policies: []atomiclimit.Policy[string]{
			{Name: "local", Limiter: local},
			{Name: "redis", Limiter: remote},
		},
		Hook: hook.hook(),
	})
	require.NoError(t, err)
	srv := newHTTPServer(t, mw)
	const policies = `"local";q=5;w=300, "redis";q=2;w=7200`

	r := srv.get("alice")
	require.Equal(t, 200, r.status)
	assert.Equal(t, `"local";r=4, "redis";r=1`, r.header("RateLimit"))
	assert.Equal(t, policies, r.header("RateLimit-Policy"))

	s.kill()
	before := peekLocal(local, "alice", 0)
	require.Equal(t, 4, before.Remaining)
	for i := range 3 {
		r := srv.get("alice")
		assert.Equal(t, 503, r.status, "request %d", i)
		assert.Contains(t, r.body, `"status":503`)
		assert.Equal(t, "1", r.header("Retry-After"))
		assert.Equal(t, policies, r.header("RateLimit-Policy"))
		// The local policy's item describes its state without the request
		// (given back); the Redis policy has none.
		assert.Equal(t, `"local";r=4`, r.header("RateLimit"), "request %d", i)
		assert.Equal(t, before, peekLocal(local, "alice", 0), "request %d: the local admission was not given back", i)
	}
	assert.EqualValues(t, 1, srv.served.Load())
	assert.Equal(t, [3]int{1, 0, 0}, hook.counts("local"), "given-back admissions are no Allowed events")
	assert.Equal(t, [3]int{1, 0, 3}, hook.counts("redis"))

	s.restart(t)
	waitRedis(t, remote)
	r = srv.get("alice")
	assert.Equal(t, 200, r.status)
	assert.Equal(t, `"local";r=3, "redis";r=1`, r.header("RateLimit"), "local: one more taken; redis: a new, full bucket")
}

func sub(a, b [3]int) [3]int { return [3]int{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }

// TestHTTPOutageFallbackGivenBack: Redis down, its FallbackTo limiter
// admits, and an in-process policy asked after it denies: the fallback's
// admission is given back (its receipt is the local limiter's), so the
// fallback is charged only for the requests served.
func TestHTTPOutageFallbackGivenBack(t *testing.T) {
	s := startServer(t)
	c := outageClient(t, s)
	clock := stopped{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	fallback, err := atomiclimit.NewKeyed[string](gcra.Every(time.Hour), 10, atomiclimit.WithClock(clock), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	defer fallback.Close()
	strict, err := atomiclimit.NewKeyed[string](gcra.Every(time.Hour), 1, atomiclimit.WithClock(clock), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	defer strict.Close()
	remote, err := redislimit.New(c, gcra.Every(time.Minute), 10,
		redislimit.WithTimeout(200*time.Millisecond), redislimit.WithOutage(redislimit.FallbackTo(fallback)))
	require.NoError(t, err)
	mw, err := httplimit.New(httplimit.Config[string]{
		Key: httplimit.Header("X-Client"),
		Policies: []atomiclimit.Policy[string]{
			{Name: "redis", Limiter: remote},
			{Name: "strict", Limiter: strict},
		},
	})
	require.NoError(t, err)
	srv := newHTTPServer(t, mw)

	s.kill()
	assert.Equal(t, 200, srv.get("alice").status, "the fallback and strict admit")
	for i := range 3 {
		r := srv.get("alice")
		assert.Equal(t, 429, r.status, "request %d: strict denies", i)
		assert.Contains(t, r.body, `"violated-policies":["strict"]`)
	}
	assert.Equal(t, 9, peekLocal(fallback, "alice", 0).Remaining, "the fallback charged for the one request served, not the three strict denied")
}

// The phases of a load test, as a request is counted in them: a request
// that completed before the kill began was decided by Redis; one sent
// after a client met the outage (the middleware's first Error event) was
// decided by the outage policy; the requests in between, in flight across
// the kill, by either.
const (
	beforeKill = iota
	acrossKill
	afterOutage
)

// httpLoad counts the responses of clients sending requests continuously,
// by phase and status.
type httpLoad struct {
	phase  atomic.Int32
	mu     sync.Mutex
	status [3]map[int]int // by phase
	sent   [3][]int       // by phase, by client
	// fallback429 counts the 429s after the outage whose Retry-After and
	// RateLimit are the fallback's (its exact wait, its empty state).
	fallback429 int
}

// TestHTTPOutageUnderLoad: issue 28, "a fallback's decision is the
// fallback's", end to end. Six clients, each on its own key, send requests
// continuously through the middleware over a Limiter on a real HTTP
// server; the redis-server under it is killed (SIGKILL) while they do, for
// each outage policy. Redis admits everything (a burst of 2^20), and
// FallbackTo's limiter 3 an hour per key on a stopped clock, so that a 429
// after the kill is the fallback's. The phases are forced: a load phase,
// the kill, then the first outage a client meets (the hook's first Error),
// then a counted phase of requests sent after it, until every client has
// sent 20. Counted by status:
//
//   - before the kill, 200 only (Redis);
//   - after the outage, FailOpen 200 only, FailClosed 503 only, FallbackTo
//     200 and 429 only, every 429 with the fallback's Retry-After and
//     RateLimit item;
//   - over the whole run, FailOpen and FallbackTo never 503, and the hook
//     heard exactly one Allowed per 200 and one Denied per 429 that a
//     policy decided (FailOpen's admissions are Error events alone).
func TestHTTPOutageUnderLoad(t *testing.T) {
	const clients, perClient = 6, 20
	for _, policy := range []string{"fail-open", "fail-closed", "fallback"} {
		t.Run("policy="+policy, func(t *testing.T) {
			s := startServer(t)
			var outage redislimit.Outage
			var local *atomiclimit.Keyed[string]
			switch policy {
			case "fail-closed":
				outage = redislimit.FailClosed
			case "fail-open":
				outage = redislimit.FailOpen
			default:
				var err error
				local, err = atomiclimit.NewKeyed[string](gcra.Every(time.Hour), 3,
					atomiclimit.WithClock(stopped{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}), atomiclimit.WithSweepInterval(0))
				require.NoError(t, err)
				defer local.Close()
				outage = redislimit.FallbackTo(local)
			}
			l, err := redislimit.New(s.client(t), gcra.Every(time.Microsecond), 1<<20, redislimit.WithOutage(outage))
			require.NoError(t, err)
			events := newEventHook()
			hook := events.hook()
			seen := make(chan struct{}) // closed at the first Error: a client met the outage
			var once sync.Once
			hook.Error = func(p string, err error) {
				events.Error(p, err)
				once.Do(func() { close(seen) })
			}
			mw, err := httplimit.New(httplimit.Config[string]{
				Key:      httplimit.Header("X-Client"),
				Policies: []atomiclimit.Policy[string]{{Name: "redis", Limiter: l}},
				Hook:     hook,
			})
			require.NoError(t, err)
			srv := httptest.NewServer(mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "ok\n")
			})))
			defer srv.Close()

			ld := &httpLoad{}
			for p := range ld.status {
				ld.status[p], ld.sent[p] = map[int]int{}, make([]int, clients)
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					hc := srv.Client()
					for !stop.Load() {
						sentIn := ld.phase.Load()
						req, _ := http.NewRequest("GET", srv.URL+"/", nil)
						req.Header.Set("X-Client", "c"+strconv.Itoa(c))
						resp, err := hc.Do(req)
						if err != nil {
							t.Errorf("client %d: %v", c, err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						p := int32(acrossKill)
						switch {
						case ld.phase.Load() == beforeKill:
							p = beforeKill // completed before the kill began
						case sentIn == afterOutage:
							p = afterOutage
						}
						ld.mu.Lock()
						ld.status[p][resp.StatusCode]++
						ld.sent[p][c]++
						if p == afterOutage && resp.StatusCode == 429 &&
							resp.Header.Get("Retry-After") == "3600" && resp.Header.Get("RateLimit") == `"redis";r=0;t=3600` {
							ld.fallback429++
						}
						ld.mu.Unlock()
					}
				}()
			}
			each := func(p, n int) func() bool {
				return func() bool {
					ld.mu.Lock()
					defer ld.mu.Unlock()
					return slices.Min(ld.sent[p]) >= n
				}
			}
			waitFor(t, "every client's requests before the kill", each(beforeKill, perClient))
			ld.phase.Store(acrossKill)
			s.kill()
			select {
			case <-seen:
			case <-time.After(20 * time.Second):
				t.Fatal("no client met the outage")
			}
			ld.phase.Store(afterOutage)
			waitFor(t, "every client's requests after the outage", each(afterOutage, perClient))
			stop.Store(true)
			wg.Wait()

			ld.mu.Lock()
			defer ld.mu.Unlock()
			t.Logf("statuses before the kill %v, across it %v, after the outage %v", ld.status[beforeKill], ld.status[acrossKill], ld.status[afterOutage])
			before, after := ld.status[beforeKill], ld.status[afterOutage]
			all := map[int]int{}
			for _, m := range ld.status {
				for code, n := range m {
					all[code] += n
				}
			}
			assert.Equal(t, []int{200}, slices.Sorted(maps.Keys(before)), "before the kill: Redis admits everything")
			ev := events.counts("redis")
			switch policy {
			case "fail-open":
				assert.Equal(t, []int{200}, slices.Sorted(maps.Keys(after)), "FailOpen after the outage: 200s only")
				assert.Equal(t, []int{200}, slices.Sorted(maps.Keys(all)), "FailOpen: never a 503")
				assert.Equal(t, all[200], ev[0]+ev[2], "one Allowed per Redis admission, one Error per FailOpen's")
				assert.Zero(t, ev[1])
			case "fail-closed":
				assert.Equal(t, []int{503}, slices.Sorted(maps.Keys(after)), "FailClosed after the outage: 503s only")
				assert.Equal(t, [3]int{all[200], 0, all[503]}, ev, "Allowed per 200, Error per 503")
			default:
				// The fallback's 3 admissions per client may all fall across
				// the kill, before the phase turns: after it, 429s and maybe
				// 200s, never anything else; that the fallback admitted is
				// its Remaining of 0 for every client, below.
				assert.Subset(t, []int{200, 429}, slices.Sorted(maps.Keys(after)), "the fallback after the outage: its 200s and 429s only")
				assert.NotZero(t, after[429], "the fallback after the outage: spent, it denies")
				assert.LessOrEqual(t, after[200], 3*clients, "the fallback admits 3 per key")
				assert.Equal(t, after[429], ld.fallback429, "every 429 has the fallback's Retry-After and RateLimit")
				assert.Zero(t, all[503], "the fallback: never a 503")
				assert.Equal(t, all[200], ev[0], "one Allowed per 200")
				assert.Equal(t, all[429], ev[1], "one Denied per 429")
				assert.GreaterOrEqual(t, ev[2], after[200]+after[429], "an Error beside each of the fallback's decisions")
				for c := range clients {
					assert.Zero(t, peekLocal(local, "c"+strconv.Itoa(c), 0).Remaining, "client %d: the fallback was charged", c)
				}
			}
			events.mu.Lock()
			defer events.mu.Unlock()
			var other []error // an Error that is not the policy's outage
			for _, err := range events.errs {
				if !errors.Is(err, redislimit.ErrUnavailable) || errors.Is(err, atomiclimit.ErrFallback) != (policy == "fallback") {
					other = append(other, err)
				}
			}
			assert.Empty(t, other, "every Error wraps ErrUnavailable, and ErrFallback for the fallback's decisions")
		})
	}
}

// TestHTTPClientIPFleet (issue 29): the IP-keyed middleware moves from a
// process to a fleet by its limiters' constructors alone. Two middlewares
// keyed by httplimit.RemoteIP (a netip.Prefix: IPv4 by /32, IPv6 by /64),
// one over in-process limiters (atomiclimit.NewKeyedRule and NewKeyed),
// one over redislimit's (NewKeyedRule and NewKeyed: the same rules, the
// same key type), answer one sequence of requests from IPv4 and IPv6
// clients alike: the same status and RateLimit-Policy, the same remaining
// counts, and the same waits to the second (the two clocks are read at
// different instants, so a wait may round to the next second in one of
// them). The window policy admits what the burst then denies, so every
// denial is also a refund, in process and in Redis.
func TestHTTPClientIPFleet(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	prefix := uniq(t)
	window := atomiclimit.AnchoredWindow(5, time.Hour)
	limit, burst := gcra.Every(20*time.Minute), 3

	inWindow, err := atomiclimit.NewKeyedRule[netip.Prefix](window)
	require.NoError(t, err)
	defer inWindow.Close()
	inBurst, err := atomiclimit.NewKeyed[netip.Prefix](limit, burst)
	require.NoError(t, err)
	defer inBurst.Close()
	rdWindow, err := redislimit.NewKeyedRule[netip.Prefix](c, window, redislimit.WithKeyPrefix(prefix+"window:"))
	require.NoError(t, err)
	rdBurst, err := redislimit.NewKeyed[netip.Prefix](c, limit, burst, redislimit.WithKeyPrefix(prefix+"burst:"))
	require.NoError(t, err)

	handler := func(w, b atomiclimit.KeyedLimiter[netip.Prefix]) http.Handler {
		mw, err := httplimit.New(httplimit.Config[netip.Prefix]{
			Key:      httplimit.RemoteIP,
			Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "window", Limiter: w}, {Name: "burst", Limiter: b}},
		})
		require.NoError(t, err)
		return mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	}
	inProcess, fleet := handler(inWindow, inBurst), handler(rdWindow, rdBurst)

	clients := []struct{ addr, group string }{
		{"192.0.2.1:40000", "192.0.2.1/32"},
		{"[2001:db8:1::1]:40000", "2001:db8:1::/64"},
		{"[2001:db8:1::2]:40001", "2001:db8:1::/64"}, // the same /64: one state
		{"198.51.100.7:443", "198.51.100.7/32"},
		{"[2001:db8:2::1]:40000", "2001:db8:2::/64"},
		{"[::ffff:192.0.2.1]:40002", "192.0.2.1/32"}, // IPv4-mapped: the IPv4 client
		{"[2001:db8:1:0:ffff::9]:1", "2001:db8:1::/64"},
	}
	admitted := map[string]int{}
	for round := range 4 {
		for _, cl := range clients {
			do := func(h http.Handler) *httptest.ResponseRecorder {
				req := httptest.NewRequest("GET", "/", nil)
				req.RemoteAddr = cl.addr
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			want, got := do(inProcess), do(fleet)
			where := fmt.Sprintf("round %d, %s", round, cl.addr)
			require.Equal(t, want.Code, got.Code, where)
			assert.Equal(t, want.Header().Get("RateLimit-Policy"), got.Header().Get("RateLimit-Policy"), where)
			assertSameRateLimit(t, want.Header().Get("RateLimit"), got.Header().Get("RateLimit"), where)
			if ra := want.Header().Get("Retry-After"); ra != "" {
				assertWithinOne(t, ra, got.Header().Get("Retry-After"), where+": Retry-After")
			} else {
				assert.Empty(t, got.Header().Get("Retry-After"), where)
			}
			if got.Code == http.StatusOK {
				admitted[cl.group]++
			}
		}
	}
	assert.Equal(t, map[string]int{"192.0.2.1/32": 3, "2001:db8:1::/64": 3, "198.51.100.7/32": 3, "2001:db8:2::/64": 3}, admitted,
		"burst 3 per client: per IPv4 address, per IPv6 /64")
	for _, group := range []string{"192.0.2.1/32", "2001:db8:1::/64", "198.51.100.7/32", "2001:db8:2::/64"} {
		assert.Equal(t, int64(1), c.Exists(ctx, prefix+"burst:"+group).Val(), "the Redis key of %s", group)
		assert.Equal(t, int64(1), c.Exists(ctx, prefix+"window:"+group).Val(), "the Redis key of %s", group)
	}
}

// rateLimitItem matches an item of the RateLimit field (t is absent when
// it is 0).
var rateLimitItem = regexp.MustCompile(`^"([^"]+)";r=(\d+)(?:;t=(\d+))?$`)

// assertSameRateLimit compares two RateLimit fields: the same policies in
// the same order with the same r, and t within one second.
func assertSameRateLimit(t *testing.T, want, got, where string) {
	t.Helper()
	wi, gi := strings.Split(want, ", "), strings.Split(got, ", ")
	require.Len(t, gi, len(wi), "%s: RateLimit %q, want %q", where, got, want)
	for i := range wi {
		w, g := rateLimitItem.FindStringSubmatch(wi[i]), rateLimitItem.FindStringSubmatch(gi[i])
		require.NotNil(t, w, "%s: %q", where, wi[i])
		require.NotNil(t, g, "%s: %q", where, gi[i])
		assert.Equal(t, w[1:3], g[1:3], "%s: RateLimit %q, want %q", where, got, want)
		assertWithinOne(t, cmp.Or(w[3], "0"), cmp.Or(g[3], "0"), where+": RateLimit t of "+w[1])
	}
}

func assertWithinOne(t *testing.T, want, got, where string) {
	t.Helper()
	w, err := strconv.Atoi(want)
	require.NoError(t, err, where)
	g, err := strconv.Atoi(got)
	require.NoError(t, err, "%s: %q", where, got)
	assert.LessOrEqual(t, max(w-g, g-w), 1, "%s: %d, want %d", where, g, w)
}
