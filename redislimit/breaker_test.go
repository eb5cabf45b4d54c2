package redislimit_test

import (
	"context"
	"errors"
	"github.com/atomiclimit/atomiclimit"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// admitReply is the decide script's reply for an admission with no debt.
const admitReply = int64(1)

// newBreakerLimiter returns a FailOpen limiter over srv with a breaker of
// 3 failures and a 1s window, on a fake local clock.
func newBreakerLimiter(t *testing.T, srv redis.Scripter, opts ...redislimit.Option) (*redislimit.Limiter[string], *fakeClock) {
	opts = append([]redislimit.Option{redislimit.WithOutage(redislimit.FailOpen), redislimit.WithBreaker(3, time.Second)}, opts...)
	l, err := redislimit.New(srv, gcra.Every(time.Hour), 2, opts...)
	require.NoError(t, err)
	clock := new(fakeClock)
	clock.advance(time.Hour) // any start
	l.SetLocalClock(clock.now)
	return l, clock
}

// TestBreaker: closed, open after 3 outages in a row, skipping Redis for
// the window (every call: Allow, Take, Peek, Refund, Reset), one probe,
// open again after a failed probe, closed after an answer.
func TestBreaker(t *testing.T) {
	ctx := context.Background()
	srv := &fakeServer{err: errRefused}
	l, clock := newBreakerLimiter(t, srv)

	for i := range 3 {
		r := l.AllowResult(ctx, "k")
		require.ErrorIs(t, r.Err, redislimit.ErrUnavailable)
		require.NotErrorIs(t, r.Err, redislimit.ErrCircuitOpen, "failure %d: closed", i)
	}
	assert.EqualValues(t, 3, srv.n.Load())
	skipped := func(what string) {
		t.Helper()
		calls := srv.n.Load()
		r := l.AllowResult(ctx, "k")
		assert.ErrorIs(t, r.Err, redislimit.ErrCircuitOpen, what)
		assert.ErrorIs(t, r.Err, redislimit.ErrUnavailable, what)
		assert.Equal(t, redislimit.SourceFailOpen, r.Source, "%s: the Outage policy decides", what)
		assert.True(t, r.Allowed, what)
		_, _, err := l.Take(ctx, "k", 1)
		assert.ErrorIs(t, err, redislimit.ErrCircuitOpen, what)
		_, err = l.Peek(ctx, "k", 1)
		assert.ErrorIs(t, err, redislimit.ErrCircuitOpen, what)
		_, err = l.Refund(ctx, "k", 1, atomiclimit.RemoteReceipt([3]uint64{1234}))
		assert.ErrorIs(t, err, redislimit.ErrCircuitOpen, what)
		assert.ErrorIs(t, l.Reset(ctx, "k"), redislimit.ErrCircuitOpen, what)
		assert.Equal(t, calls, srv.n.Load(), "%s: no call reaches Redis", what)
	}
	skipped("open")
	clock.advance(time.Second - 1)
	skipped("open, the window's last ns")

	// The window has passed: one probe, which fails: open for another window.
	clock.advance(1)
	r := l.AllowResult(ctx, "k")
	assert.NotErrorIs(t, r.Err, redislimit.ErrCircuitOpen, "the probe went to Redis")
	assert.EqualValues(t, 4, srv.n.Load())
	skipped("reopened by the failed probe")
	clock.advance(time.Second - 1)
	skipped("reopened, the window's last ns")

	// Redis is back: the probe's answer closes the breaker.
	srv.err, srv.reply = nil, admitReply
	clock.advance(1)
	r = l.AllowResult(ctx, "k")
	assert.Equal(t, redislimit.SourceRedis, r.Source)
	assert.NoError(t, r.Err)
	for range 5 {
		assert.Equal(t, redislimit.SourceRedis, l.AllowResult(ctx, "k").Source, "closed")
	}
	assert.EqualValues(t, 10, srv.n.Load())

	// An answer between outages starts the count again.
	srv.err = errRefused
	l.AllowResult(ctx, "k")
	l.AllowResult(ctx, "k")
	srv.err = nil
	l.AllowResult(ctx, "k")
	srv.err = errRefused
	l.AllowResult(ctx, "k")
	l.AllowResult(ctx, "k")
	assert.NotErrorIs(t, l.AllowResult(ctx, "k").Err, redislimit.ErrCircuitOpen, "2 + 3 outages, not 5 in a row")
	assert.ErrorIs(t, l.AllowResult(ctx, "k").Err, redislimit.ErrCircuitOpen)
}

// TestBreakerIgnoresRejections: rejections and corrupt states are answers:
// they never open the breaker, and a rejected probe closes it.
func TestBreakerIgnoresRejections(t *testing.T) {
	ctx := context.Background()
	srv := &fakeServer{err: replyErr("READONLY You can't write against a read only replica.")}
	l, clock := newBreakerLimiter(t, srv)
	for range 10 {
		r := l.AllowResult(ctx, "k")
		require.ErrorIs(t, r.Err, redislimit.ErrRejected)
	}
	// The script's reply after a repair: the empty bucket (debt B·T = 2h
	// in µs), denied, nothing stored, what the key held.
	srv.err, srv.reply = nil, []any{int64(2 * 7200e6), int64(0), "\"garbage\""}
	for range 10 {
		require.ErrorIs(t, l.AllowResult(ctx, "k").Err, redislimit.ErrCorrupt)
	}
	assert.EqualValues(t, 20, srv.n.Load(), "every call went to Redis")

	srv.err = errRefused
	for range 3 {
		l.AllowResult(ctx, "k")
	}
	require.ErrorIs(t, l.AllowResult(ctx, "k").Err, redislimit.ErrCircuitOpen)
	clock.advance(time.Second)
	srv.err = replyErr("NOPERM this user has no permissions to run the 'evalsha' command")
	require.ErrorIs(t, l.AllowResult(ctx, "k").Err, redislimit.ErrRejected, "the probe")
	require.ErrorIs(t, l.AllowResult(ctx, "k").Err, redislimit.ErrRejected, "closed by the rejected probe")
}

// TestBreakerOneProbe: while the probe is in flight, every other call
// still skips Redis.
func TestBreakerOneProbe(t *testing.T) {
	ctx := context.Background()
	srv := &fakeServer{err: errRefused}
	l, clock := newBreakerLimiter(t, srv)
	for range 3 {
		l.AllowResult(ctx, "k")
	}
	release := make(chan struct{})
	var first atomic.Bool
	srv.next = func(context.Context) (any, error) {
		// The fake server holds the first call (the probe) until told;
		// any other that reached it would be answered at once.
		if first.CompareAndSwap(false, true) {
			<-release
		}
		return admitReply, nil
	}
	clock.advance(time.Second)
	probe := make(chan redislimit.Result)
	go func() { probe <- l.AllowResult(ctx, "k") }()
	waitFor(t, "the probe to reach the server", func() bool { return srv.n.Load() == 4 })

	var wg sync.WaitGroup
	var mu sync.Mutex
	skips := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if errors.Is(l.AllowResult(ctx, "k").Err, redislimit.ErrCircuitOpen) {
					mu.Lock()
					skips++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 400, skips, "every other call skipped")
	assert.EqualValues(t, 4, srv.n.Load(), "one probe")
	close(release)
	r := <-probe
	assert.Equal(t, redislimit.SourceRedis, r.Source)
	assert.Equal(t, redislimit.SourceRedis, l.AllowResult(ctx, "k").Source, "closed by the probe")
}

// TestBreakerProbeCallerGone: a probe whose caller gave up gives no
// verdict: the next call probes at once.
func TestBreakerProbeCallerGone(t *testing.T) {
	ctx := context.Background()
	srv := &fakeServer{err: errRefused}
	l, clock := newBreakerLimiter(t, srv)
	for range 3 {
		l.AllowResult(ctx, "k")
	}
	clock.advance(time.Second)
	callerCtx, cancel := context.WithCancel(ctx)
	srv.next = func(context.Context) (any, error) {
		cancel() // the caller gives up while the probe is in flight
		return nil, context.Canceled
	}
	r := l.AllowResult(callerCtx, "k")
	require.Equal(t, redislimit.SourceCaller, r.Source)
	srv.next = nil
	r = l.AllowResult(ctx, "k")
	assert.NotErrorIs(t, r.Err, redislimit.ErrCircuitOpen, "the next call probes")
	assert.ErrorIs(t, r.Err, redislimit.ErrUnavailable)
	assert.EqualValues(t, 5, srv.n.Load())
	assert.ErrorIs(t, l.AllowResult(ctx, "k").Err, redislimit.ErrCircuitOpen, "and its failure reopens")
}

// TestBreakerConfig: invalid settings are rejected by New.
func TestBreakerConfig(t *testing.T) {
	for _, c := range []struct {
		failures int
		window   time.Duration
	}{{0, time.Second}, {-1, time.Second}, {1, 0}, {1, -time.Second}} {
		_, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 1, redislimit.WithBreaker(c.failures, c.window))
		assert.ErrorIs(t, err, redislimit.ErrInvalidBreaker, "%+v", c)
	}
}

// TestBreakerBlackHole: against a host that reads and never answers, the
// calls before the breaker opens each wait out WithTimeout; then no call
// reaches the host until the window has passed.
func TestBreakerBlackHole(t *testing.T) {
	hole := newStallServer(t)
	cs := &countingScripter{Client: hole.client(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true })}
	l, clock := newBreakerLimiter(t, cs, redislimit.WithTimeout(20*time.Millisecond))
	ctx := context.Background()
	for range 3 {
		r := l.AllowResult(ctx, "k")
		require.ErrorIs(t, r.Err, context.DeadlineExceeded)
		require.ErrorIs(t, r.Err, redislimit.ErrUnavailable)
	}
	for range 100 {
		require.ErrorIs(t, l.AllowResult(ctx, "k").Err, redislimit.ErrCircuitOpen)
	}
	assert.Equal(t, 3, cs.count())
	clock.advance(time.Second)
	require.ErrorIs(t, l.AllowResult(ctx, "k").Err, context.DeadlineExceeded, "the probe")
	assert.Equal(t, 4, cs.count())
}
