package grpclimit

import (
	"context"
	"errors"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// The tests in this file put a redislimit.Limiter behind the interceptor,
// on a real gRPC server over a real redis-server that they start and kill
// themselves. This is the only place grpclimit's module needs redislimit
// (a test-only requirement): redislimit's own tests drive httplimit's door,
// which is in the root module, but cannot reach grpclimit's echo service,
// and a test-only requirement of grpclimit in redislimit would put grpc's
// module graph under every redislimit user, where this puts go-redis's
// smaller one under grpclimit's. Without redis-server the tests skip, unless
// REDISLIMIT_REQUIRE_SERVER is set (as for redislimit's), when they fail.

// redisServer is a redis-server on a free loopback port, persistence off,
// killed when the test ends.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
}

func startRedis(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server not found in PATH; install it (apt-get install -y redis-server) to run the Redis tests"
		if os.Getenv("REDISLIMIT_REQUIRE_SERVER") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	s := &redisServer{addr: "127.0.0.1:" + port}
	s.cmd = exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--protected-mode", "no", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.kill)
	// Wait until it answers PING (readiness, not synchronisation of the
	// code under test).
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not start", s.addr)
		}
	}
	return s
}

// kill stops the server at once (SIGKILL: a crash, not a shutdown).
func (s *redisServer) kill() {
	if s.cmd != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// client returns a client of s that fails fast (no retries), closed when
// the test ends.
func (s *redisServer) client(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	return c
}

type quietRedisLogger struct{}

func (quietRedisLogger) Printf(context.Context, string, ...any) {}

// The phases of a load test, as a call is counted in them: a call that
// completed before the kill began was decided by Redis; one sent after a
// client met the outage (the interceptor's first Error event) by the
// outage policy; the calls in between, in flight across the kill, by
// either.
const (
	beforeKill = iota
	acrossKill
	afterOutage
)

// TestRedisOutageUnderLoad: issue 28, "a fallback's decision is the
// fallback's", end to end through gRPC. Six clients, each on its own API
// key, call continuously through the interceptor over a redislimit.Limiter
// on a real gRPC server; the redis-server under it is killed (SIGKILL)
// while they do, for each outage policy. Redis admits everything (a burst
// of 2^20), and FallbackTo's limiter 3 an hour per key on a stopped clock,
// so that a ResourceExhausted after the kill is the fallback's. The phases
// are forced: a load phase, the kill, then the first outage a client meets
// (the hook's first Error), then a counted phase of calls sent after it,
// until every client has sent 20. Counted by code:
//
//   - before the kill, OK only (Redis);
//   - after the outage, FailOpen OK only, FailClosed Unavailable only,
//     FallbackTo OK and ResourceExhausted only, every ResourceExhausted
//     with the fallback's wait as RetryInfo and its state as the ratelimit
//     metadata;
//   - over the whole run, FailOpen and FallbackTo never Unavailable, and
//     the hook heard one Allowed per OK and one Denied per
//     ResourceExhausted that a policy decided (FailOpen's admissions are
//     Error events alone).
func TestRedisOutageUnderLoad(t *testing.T) {
	redis.SetLogger(quietRedisLogger{}) // go-redis logs every failed dial; these are on purpose
	const clients, perClient = 6, 20
	for _, policy := range []string{"fail-open", "fail-closed", "fallback"} {
		t.Run("policy="+policy, func(t *testing.T) {
			s := startRedis(t)
			var outage redislimit.Outage
			var local *atomiclimit.Keyed[string]
			switch policy {
			case "fail-closed":
				outage = redislimit.FailClosed
			case "fail-open":
				outage = redislimit.FailOpen
			default:
				local = newKeyed[string](t, newFakeClock(), gcra.Every(time.Hour), 3) // a clock that stands still
				defer local.Close()
				outage = redislimit.FallbackTo(local)
			}
			l, err := redislimit.New(s.client(t), gcra.Every(time.Microsecond), 1<<20, redislimit.WithOutage(outage))
			if err != nil {
				t.Fatal(err)
			}
			events := newCountingHook()
			hook := events.hook()
			seen := make(chan struct{}) // closed at the first Error: a client met the outage
			var once sync.Once
			hook.Error = func(p string, err error) {
				events.Error(p, err)
				once.Do(func() { close(seen) })
			}
			m := mustNew(t, Config[string]{
				Key:      APIKey("x-api-key", nil),
				Policies: []atomiclimit.Policy[string]{{Name: "redis", Limiter: l}},
				Hook:     hook,
			})
			cc := serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary())})

			var (
				phase  atomic.Int32
				mu     sync.Mutex
				byCode [3]map[codes.Code]int // by phase
				sent   [3][]int              // by phase, by client
				// fallbackDenials counts the ResourceExhausted after the
				// outage whose RetryInfo and ratelimit are the fallback's
				// (its exact wait, its empty state).
				fallbackDenials int
			)
			for p := range byCode {
				byCode[p], sent[p] = map[codes.Code]int{}, make([]int, clients)
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			for c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "c"+strconv.Itoa(c))
					for !stop.Load() {
						sentIn := phase.Load()
						var header metadata.MD
						_, err := echo.CallSay(ctx, cc, "hi", grpc.Header(&header))
						code := status.Code(err)
						p := int32(acrossKill)
						switch {
						case phase.Load() == beforeKill:
							p = beforeKill // completed before the kill began
						case sentIn == afterOutage:
							p = afterOutage
						}
						mu.Lock()
						byCode[p][code]++
						sent[p][c]++
						if wait, _ := RetryDelay(err); p == afterOutage && code == codes.ResourceExhausted &&
							wait == time.Hour && slices.Equal(header.Get("ratelimit"), []string{`"redis";r=0;t=3600`}) {
							fallbackDenials++
						}
						mu.Unlock()
					}
				}()
			}
			each := func(p, n int) bool {
				mu.Lock()
				defer mu.Unlock()
				return slices.Min(sent[p]) >= n
			}
			waitUntil(t, "every client's calls before the kill", func() bool { return each(beforeKill, perClient) })
			phase.Store(acrossKill)
			s.kill()
			select {
			case <-seen:
			case <-time.After(20 * time.Second):
				t.Fatal("no client met the outage")
			}
			phase.Store(afterOutage)
			waitUntil(t, "every client's calls after the outage", func() bool { return each(afterOutage, perClient) })
			stop.Store(true)
			wg.Wait()

			mu.Lock()
			defer mu.Unlock()
			t.Logf("codes before the kill %v, across it %v, after the outage %v", byCode[beforeKill], byCode[acrossKill], byCode[afterOutage])
			before, after := byCode[beforeKill], byCode[afterOutage]
			all := map[codes.Code]int{}
			for _, m := range byCode {
				for code, n := range m {
					all[code] += n
				}
			}
			keys := func(m map[codes.Code]int) []codes.Code { return slices.Sorted(maps.Keys(m)) }
			if got := keys(before); !slices.Equal(got, []codes.Code{codes.OK}) {
				t.Errorf("before the kill: %v, want OK only: Redis admits everything", got)
			}
			events.mu.Lock()
			defer events.mu.Unlock()
			allowed, denied, errs := events.allowed["redis"], events.denied["redis"], events.error["redis"]
			switch policy {
			case "fail-open":
				if got := keys(all); !slices.Equal(got, []codes.Code{codes.OK}) {
					t.Errorf("FailOpen: %v, want OK only, never Unavailable", got)
				}
				if allowed+errs != all[codes.OK] || denied != 0 {
					t.Errorf("hook: %d Allowed + %d Error for %d OK, %d Denied: want one Allowed per Redis admission, one Error per FailOpen's", allowed, errs, all[codes.OK], denied)
				}
			case "fail-closed":
				if got := keys(after); !slices.Equal(got, []codes.Code{codes.Unavailable}) {
					t.Errorf("FailClosed after the outage: %v, want Unavailable only", got)
				}
				if allowed != all[codes.OK] || denied != 0 || errs != all[codes.Unavailable] {
					t.Errorf("hook: %d Allowed, %d Denied, %d Error for %v: want Allowed per OK, Error per Unavailable", allowed, denied, errs, all)
				}
			default:
				// The fallback's 3 admissions per client may all fall across
				// the kill, before the phase turns: after it, denials and
				// maybe admissions, never anything else.
				if got := keys(after); !slices.Contains(got, codes.ResourceExhausted) || slices.ContainsFunc(got, func(c codes.Code) bool { return c != codes.OK && c != codes.ResourceExhausted }) {
					t.Errorf("the fallback after the outage: %v, want ResourceExhausted, and OK, only", got)
				}
				if all[codes.Unavailable] != 0 {
					t.Errorf("the fallback: %d Unavailable, want none", all[codes.Unavailable])
				}
				if after[codes.OK] > 3*clients {
					t.Errorf("the fallback admitted %d after the outage, more than 3 per key", after[codes.OK])
				}
				if after[codes.ResourceExhausted] != fallbackDenials {
					t.Errorf("%d ResourceExhausted after the outage, %d with the fallback's RetryInfo and ratelimit: want all", after[codes.ResourceExhausted], fallbackDenials)
				}
				if allowed != all[codes.OK] || denied != all[codes.ResourceExhausted] || errs < after[codes.OK]+after[codes.ResourceExhausted] {
					t.Errorf("hook: %d Allowed, %d Denied, %d Error for %v (after the outage %v): want Allowed per OK, Denied per ResourceExhausted, an Error beside each of the fallback's decisions",
						allowed, denied, errs, all, after)
				}
				for c := range clients {
					if r := peekDecision(local, "c"+strconv.Itoa(c), 0).Remaining; r != 0 {
						t.Errorf("client %d: the fallback has %d left, want 0: it was charged", c, r)
					}
				}
			}
			var other []error // an Error that is not the policy's outage
			for _, err := range events.errs {
				if !errors.Is(err, redislimit.ErrUnavailable) || errors.Is(err, atomiclimit.ErrFallback) != (policy == "fallback") {
					other = append(other, err)
				}
			}
			if len(other) > 0 {
				t.Errorf("%d of %d Errors are not the policy's outage (ErrUnavailable, and ErrFallback for the fallback's decisions), e.g. %v", len(other), len(events.errs), other[0])
			}
		})
	}
}

// waitUntil polls until cond holds: it waits for the clients' progress, it
// orders nothing the assertions depend on.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
