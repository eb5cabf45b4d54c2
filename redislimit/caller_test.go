package redislimit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// A caller whose context ends before Redis answers gave up: that is not an
// outage. No Outage policy applies (FailOpen admits nothing, FallbackTo's
// limiter is not charged), the error wraps ctx.Err() and not
// ErrUnavailable, and the decision is the zero one. Each case has a control
// run, identical but for the caller's context, that the policy decides.

// policy is one Outage policy under test; local is FallbackTo's limiter
// (burst 2, one an hour), nil for the others.
type policy struct {
	name   string
	outage redislimit.Outage
	source redislimit.Source
	local  *atomiclimit.Keyed[string]
}

var policyNames = []string{"fail-closed", "fail-open", "fallback"}

// newPolicy returns the policy called name, with a fresh local limiter.
func newPolicy(t *testing.T, name string) policy {
	switch name {
	case "fail-closed":
		return policy{name, redislimit.FailClosed, redislimit.SourceFailClosed, nil}
	case "fail-open":
		return policy{name, redislimit.FailOpen, redislimit.SourceFailOpen, nil}
	}
	local, err := atomiclimit.NewKeyed[string](gcra.Every(time.Hour), 2)
	require.NoError(t, err)
	t.Cleanup(local.Close)
	return policy{name, redislimit.FallbackTo(local), redislimit.SourceFallback, local}
}

// outcome is what one call returned, in either API's form.
type outcome struct {
	d       gcra.Decision
	source  redislimit.Source // the Hook's; noSource for the public verbs, which return none
	err     error
	receipt atomiclimit.Receipt
	refund  bool // Refund's: d.Allowed is what it returned
	take    bool // Take's: receipt is what it returned
}

// noSource stands for the Source that the public verbs do not return (the
// Hook hears it).
const noSource = redislimit.Source(255)

// callerOps are the calls that a caller's context can cut short, by name.
var callerOps = []struct {
	name string
	call func(ctx context.Context, l *redislimit.Limiter[string]) outcome
}{
	{"Allow", func(ctx context.Context, l *redislimit.Limiter[string]) outcome {
		r := l.AllowResult(ctx, "k")
		return outcome{d: r.Decision, source: r.Source, err: r.Err}
	}},
	{"Take-source", func(ctx context.Context, l *redislimit.Limiter[string]) outcome {
		r := l.TakeResult(ctx, "k", 1)
		return outcome{d: r.Decision, source: r.Source, err: r.Err}
	}},
	{"Peek-source", func(ctx context.Context, l *redislimit.Limiter[string]) outcome {
		r := l.PeekResult(ctx, "k", 1)
		return outcome{d: r.Decision, source: r.Source, err: r.Err}
	}},
	{"Take", func(ctx context.Context, l *redislimit.Limiter[string]) outcome {
		d, receipt, err := l.Take(ctx, "k", 1)
		return outcome{d: d, source: noSource, err: err, receipt: receipt, take: true}
	}},
	{"Peek", func(ctx context.Context, l *redislimit.Limiter[string]) outcome {
		d, err := l.Peek(ctx, "k", 1)
		return outcome{d: d, source: noSource, err: err}
	}},
	{"Refund", func(ctx context.Context, l *redislimit.Limiter[string]) outcome {
		ok, err := l.Refund(ctx, "k", 1, atomiclimit.RemoteReceipt([3]uint64{1234567}))
		return outcome{d: gcra.Decision{Allowed: ok}, source: noSource, err: err, refund: true}
	}},
}

// checkCallerGone asserts o is a caller's give-up with cerr, and that the
// fallback limiter (if any) was not charged.
func checkCallerGone(t *testing.T, p policy, o outcome, cerr error) {
	t.Helper()
	if o.source != noSource {
		assert.Equal(t, redislimit.SourceCaller, o.source)
	}
	assert.Equal(t, gcra.Decision{}, o.d, "denied, describing no state")
	assert.Zero(t, o.receipt)
	assert.ErrorIs(t, o.err, cerr)
	assert.NotErrorIs(t, o.err, redislimit.ErrUnavailable)
	assert.NotErrorIs(t, o.err, atomiclimit.ErrFallback, "no limiter decided")
	if p.local != nil {
		assert.Equal(t, 2, peekLocal(p.local, "k", 0).Remaining, "the fallback limiter was charged")
	}
}

// checkOutage asserts o is p's decision for an outage, on a fallback
// limiter that still has tokens for "k"; a refund gives nothing back under
// any policy.
func checkOutage(t *testing.T, p policy, o outcome) {
	t.Helper()
	if o.source != noSource {
		assert.Equal(t, p.source, o.source)
	}
	assert.ErrorIs(t, o.err, redislimit.ErrUnavailable)
	// The fallback's decisions (not a Refund's error: nothing was decided)
	// wrap ErrFallback: a door takes them as the policy's.
	assert.Equal(t, p.name == "fallback" && !o.refund, errors.Is(o.err, atomiclimit.ErrFallback), "%v", o.err)
	// A receipt only for the local fallback's admissions (Take's): Refund
	// gives those back to the local limiter.
	assert.Equal(t, p.name == "fallback" && o.d.Allowed && o.take, o.receipt != (atomiclimit.Receipt{}))
	assert.Equal(t, p.name != "fail-closed" && !o.refund, o.d.Allowed)
}

func TestCallerGoneBeforeCall(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	for _, name := range policyNames {
		for _, op := range callerOps {
			t.Run(name+"/"+op.name, func(t *testing.T) {
				p := newPolicy(t, name)
				s := &noServer{}
				l, err := redislimit.New(s, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage))
				require.NoError(t, err)
				checkCallerGone(t, p, op.call(cancelled, l), context.Canceled)
				checkCallerGone(t, p, op.call(expired, l), context.DeadlineExceeded)
				assert.Zero(t, s.calls, "a caller already gone gets no round trip")
				// Control: a live context reaches the (failing) server, and
				// the policy decides.
				checkOutage(t, p, op.call(context.Background(), l))
				assert.Equal(t, 1, s.calls)
			})
		}
	}
}

func TestCallerGoneMidCall(t *testing.T) {
	for _, name := range policyNames {
		for _, op := range callerOps {
			t.Run(name+"/"+op.name, func(t *testing.T) {
				p := newPolicy(t, name)
				// The call is on the wire when the caller cancels; the server
				// then hangs up, so the client reports an error after the
				// cancellation, and the limiter must read it as the caller's.
				o := stalledCall(t, p, op.call, true)
				checkCallerGone(t, p, o, context.Canceled)
				// Control: the same hang-up without the cancellation is an
				// outage.
				o = stalledCall(t, p, op.call, false)
				checkOutage(t, p, o)
			})
		}
	}
}

// TestCallerDeadlineIsNotOurs: against a server that never answers, the
// caller's deadline ends the call as the caller's (not an outage), and the
// limiter's WithTimeout as an outage. The deadlines are the events under
// test, not a synchronisation.
func TestCallerDeadlineIsNotOurs(t *testing.T) {
	timeouts := func(o *redis.Options) { o.ContextTimeoutEnabled = true }
	for _, name := range policyNames {
		t.Run(name, func(t *testing.T) {
			p := newPolicy(t, name)
			srv := newStallServer(t)
			c := srv.client(t, timeouts)
			l, err := redislimit.New(c, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			r := l.TakeResult(ctx, "k", 1)
			checkCallerGone(t, p, outcome{d: r.Decision, source: r.Source, err: r.Err}, context.DeadlineExceeded)

			l, err = redislimit.New(c, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage), redislimit.WithTimeout(20*time.Millisecond))
			require.NoError(t, err)
			r = l.TakeResult(context.Background(), "k", 1)
			checkOutage(t, p, outcome{d: r.Decision, source: r.Source, err: r.Err})
			assert.ErrorIs(t, r.Err, context.DeadlineExceeded)
		})
	}
}

// stalledCall runs call on a limiter with policy p whose server reads the
// request and never answers. Once the server has the request, it cancels
// the caller's context if cancelFirst, and then hangs up.
func stalledCall(t *testing.T, p policy, call func(context.Context, *redislimit.Limiter[string]) outcome, cancelFirst bool) outcome {
	t.Helper()
	srv := newStallServer(t)
	l, err := redislimit.New(srv.client(t), gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan outcome, 1)
	go func() { done <- call(ctx, l) }()
	select {
	case <-srv.got: // first the request is on the wire,
	case o := <-done:
		t.Fatalf("the call returned before the server read it: %+v", o)
	}
	if cancelFirst {
		cancel() // then the caller gives up,
	}
	srv.close() // and only then does the client see an error.
	return <-done
}

// A stallServer accepts connections and reads them but never answers, until
// close, which closes them all and stops listening. got receives one value
// per connection, at its first byte.
type stallServer struct {
	ln     net.Listener
	got    chan struct{}
	mu     sync.Mutex
	conns  []net.Conn // guarded by mu; closed once closed is set
	closed bool
}

func newStallServer(t *testing.T) *stallServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &stallServer{ln: ln, got: make(chan struct{}, 64)}
	go s.serve()
	t.Cleanup(s.close)
	return s
}

func (s *stallServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			c.Close()
		} else {
			s.conns = append(s.conns, c)
		}
		s.mu.Unlock()
		go func() {
			var b [1]byte
			if _, err := c.Read(b[:]); err == nil {
				s.got <- struct{}{}
			}
			io.Copy(io.Discard, c)
		}()
	}
}

func (s *stallServer) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.ln.Close()
	for _, c := range s.conns {
		c.Close()
	}
}

// client returns a client of s that does not retry, closed when the test
// ends.
func (s *stallServer) client(t *testing.T, tune ...func(*redis.Options)) *redis.Client {
	o := &redis.Options{Addr: s.ln.Addr().String(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1}
	for _, f := range tune {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}
