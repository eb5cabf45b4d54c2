package redislimit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/httplimit"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// The stacked-policy tests put a Redis policy in front of, and behind, an
// in-process policy that denies most requests, behind httplimit's
// middleware, and hammer one client key from several goroutines: a policy
// must end charged for the requests served, not for the ones the other
// denied ("Stacked policies" in httplimit's doc). A daily bucket in front
// of a 5/s window is the case that locked users out: with give-backs
// refused once anything else had touched the key, the bucket was charged
// for nearly every request the window denied (2,169 for 5 served in a run
// of this test).

// Every run sends up to stackedRequests requests for one key from each of
// stackedGoroutines goroutines, each stopping early once stackedFor has
// passed (a bound on the run, not a synchronisation: the counts are read
// after every goroutine has returned).
const (
	stackedGoroutines = 8
	stackedRequests   = 300
	stackedFor        = 500 * time.Millisecond
)

// hammer sends requests for the client key through h from
// stackedGoroutines goroutines, and returns how many were answered 200 and
// 429; any other status fails the test.
func hammer(t *testing.T, h http.Handler, key string) (served, denied int64) {
	t.Helper()
	var ok, limited, other atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(stackedFor)
	for range stackedGoroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < stackedRequests && (i == 0 || time.Now().Before(stop)); i++ {
				req := httptest.NewRequest("GET", "/", nil)
				req.Header.Set("X-Client", key)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				switch rec.Code {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, other.Load(), "statuses other than 200 and 429")
	return ok.Load(), limited.Load()
}

// stackedServer is the middleware of policies around a handler that counts
// the requests it serves.
func stackedServer(t *testing.T, hook *eventHook, policies ...atomiclimit.Policy[string]) (http.Handler, *atomic.Int64) {
	t.Helper()
	mw, err := httplimit.New(httplimit.Config[string]{Key: httplimit.Header("X-Client"), Policies: policies, Hook: hook.hook()})
	require.NoError(t, err)
	var handled atomic.Int64
	return mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		handled.Add(1)
		io.WriteString(w, "ok\n")
	})), &handled
}

// stack returns the policies remote and local in the order asked for.
func stack(remote, local atomiclimit.KeyedLimiter[string], remoteFirst bool) []atomiclimit.Policy[string] {
	r := atomiclimit.Policy[string]{Name: "redis", Limiter: remote}
	l := atomiclimit.Policy[string]{Name: "local", Limiter: local}
	if remoteFirst {
		return []atomiclimit.Policy[string]{r, l}
	}
	return []atomiclimit.Policy[string]{l, r}
}

func order(remoteFirst bool) string {
	if remoteFirst {
		return "redis-first"
	}
	return "redis-behind"
}

// TestStackedBucketCharged: a daily bucket in Redis, 10,000 a day and a
// burst of 10,000 (T = 8.64s), stacked with an in-process fixed window of
// 5 per second. The bucket is charged what it holds at the end: its debt
// (Peek's ResetAfter) plus the refill since the first request, in
// intervals, as a replay of the served admissions on gcra would leave
// (TAT = t_first + served·T while served·T dwarfs the run). It is never
// below the requests served, and exceeds them by less than one token: a
// give-back made after another that moved its slot keeps what is certainly
// the admission's own, stricter than the ideal by at most the time between
// its Take and its Refund. A goroutine's requests follow one another, so
// those times add up to at most the run's length per goroutine: the excess
// is at most goroutines·run/T, under half a token here.
func TestStackedBucketCharged(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	for _, remoteFirst := range []bool{true, false} {
		t.Run(order(remoteFirst), func(t *testing.T) {
			remote, err := redislimit.New(c, gcra.Per(10_000, 24*time.Hour), 10_000, redislimit.WithKeyPrefix(uniq(t)))
			require.NoError(t, err)
			local, err := atomiclimit.NewKeyedRule[string](atomiclimit.FixedWindow(5, time.Second))
			require.NoError(t, err)
			defer local.Close()
			hook := newEventHook()
			h, handled := stackedServer(t, hook, stack(remote, local, remoteFirst)...)

			start, err := c.Time(ctx).Result()
			require.NoError(t, err)
			served, denied := hammer(t, h, "alice")
			r := remote.PeekResult(ctx, "alice", 0)
			require.NoError(t, r.Err)
			end, err := c.Time(ctx).Result()
			require.NoError(t, err)

			T := remote.Params().Interval()
			// An upper bound of the tokens the key holds taken: the refill
			// counted from before the first request to after the Peek.
			charged := float64(r.ResetAfter+end.Sub(start)) / float64(T)
			stored, _ := c.Get(ctx, remote.Key("alice")).Result()
			t.Logf("%s: %d requests from %d goroutines in %v: served %d, denied %d; the daily bucket charged %.4f (Remaining %d of 10000, stored %q)",
				order(remoteFirst), served+denied, stackedGoroutines, end.Sub(start).Round(time.Millisecond), served, denied, charged, r.Remaining, stored)
			assert.Equal(t, served, handled.Load())
			assert.Positive(t, served)
			assert.Positive(t, denied, "the window must deny, or nothing is given back")
			assert.GreaterOrEqual(t, charged, float64(served), "charged less than served: quota created")
			assert.LessOrEqual(t, charged, float64(served)+float64(stackedGoroutines)*float64(end.Sub(start))/float64(T), "beyond the give-backs' bound")
			assert.LessOrEqual(t, charged, float64(served+1), "charged for requests another policy denied")
			assert.GreaterOrEqual(t, r.Remaining, 10_000-int(served)-1)
			assert.Equal(t, [3]int{int(served), int(denied), 0}, sub(hook.counts("local"), [3]int{0, 0, 0}), "the window's events")
			assert.Zero(t, hook.counts("redis")[2], "no errors")
		})
	}
}

// TestStackedWindowsCharged: a fixed window on UTC boundaries and an
// anchored window in Redis (each with room for every request, an hour
// long, so that the run stays inside one window), stacked with an
// in-process bucket of 5 per second. Windows give back by count, exactly:
// the count a window holds at the end is the number of requests served.
func TestStackedWindowsCharged(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	const n = 100_000
	now, err := c.Time(ctx).Result()
	require.NoError(t, err)
	// Windows that start now on the UTC grid shifted by the offset: an
	// hour before the run leaves the window it started in.
	offset := time.Duration(now.UnixMicro()%time.Hour.Microseconds()) * time.Microsecond
	for _, rule := range []atomiclimit.Rule{
		atomiclimit.FixedWindowUTC(n, time.Hour, offset),
		atomiclimit.AnchoredWindow(n, time.Hour),
	} {
		for _, remoteFirst := range []bool{true, false} {
			name := strings.Fields(rule.String())[0] + "/" + order(remoteFirst)
			t.Run(name, func(t *testing.T) {
				remote, err := redislimit.NewRule(c, rule, redislimit.WithKeyPrefix(uniq(t)))
				require.NoError(t, err)
				local, err := atomiclimit.NewKeyed[string](atomiclimit.PerSecond(5), 5)
				require.NoError(t, err)
				defer local.Close()
				hook := newEventHook()
				h, handled := stackedServer(t, hook, stack(remote, local, remoteFirst)...)

				start := time.Now()
				served, denied := hammer(t, h, "alice")
				elapsed := time.Since(start)
				r := remote.PeekResult(ctx, "alice", 0)
				require.NoError(t, r.Err)
				charged := int64(n - r.Remaining)
				t.Logf("%s: %d requests from %d goroutines in %v: served %d, denied %d; the window charged %d",
					name, served+denied, stackedGoroutines, elapsed.Round(time.Millisecond), served, denied, charged)
				assert.Equal(t, served, handled.Load())
				assert.Positive(t, served)
				assert.Positive(t, denied, "the bucket must deny, or nothing is given back")
				assert.Equal(t, served, charged, "a window is charged exactly the requests served")
				assert.Zero(t, hook.counts("redis")[2], "no errors")
			})
		}
	}
}
