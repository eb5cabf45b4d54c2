package grpclimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/grpclimit/internal/echo"
)

// A client that limits itself: 30 calls from 8 goroutines through a Pacer
// of 1 per 5 ms, burst 2, all reach the server (none is refused, none waits
// forever), and they cannot have gone out faster than the limit: the run
// lasts at least (30 − 2) · 5 ms, and the pacer's admissions keep the bound
// in every window. Opening streams is paced by the same policies.
func TestPacerPaces(t *testing.T) {
	const calls, workers, burst = 30, 8, 2
	T := 5 * time.Millisecond
	k, err := atomiclimit.NewKeyed[string](gcra.Every(T), burst, atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	lim := newRecording(k)
	h := newCountingHook()
	p, err := NewPacer(PacerConfig[string]{Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Name: "self", Limiter: lim}}, Hook: h.hook()})
	if err != nil {
		t.Fatal(err)
	}
	cc := serve(t, nil, grpc.WithChainUnaryInterceptor(p.Unary()), grpc.WithChainStreamInterceptor(p.Stream()))
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, calls)
	next := make(chan int, calls)
	for i := range calls {
		next <- i
	}
	close(next)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				if _, err := echo.CallSay(context.Background(), cc, "hi"); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		t.Fatalf("a paced call failed: %v", err)
	}
	if min := time.Duration(calls-burst) * T; elapsed < min {
		t.Errorf("%d calls in %v < (calls − B)·T = %v: not paced", calls, elapsed, min)
	}
	checkBound(t, lim, burst, T)
	if n := len(lim.admitted[echo.Say]); n != calls || h.allowed["self"] != calls || h.waited["self"] == 0 || h.denied["self"] != 0 {
		t.Errorf("%d admissions, hook allowed %d waited %d denied %d; want %d admissions, some waits, no denial", n, h.allowed["self"], h.waited["self"], h.denied["self"], calls)
	}
	// Streams: the third stream opened waits for the bucket.
	for range 3 {
		s, err := cc.NewStream(context.Background(), echo.ChatDesc, echo.Chat)
		if err != nil {
			t.Fatal(err)
		}
		s.SendMsg(wrapperspb.String("x"))
		s.CloseSend()
		if err := s.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(lim.admitted[echo.Chat]); n != 3 {
		t.Errorf("%d stream admissions, want 3", n)
	}
}

// Wait fails at once when the wait would pass the deadline, or no wait
// admits the call (no RetryInfo then), and with Canceled when its context
// ends while it waits.
func TestPacerWaitFailures(t *testing.T) {
	lim := newKeyed[string](t, nil, gcra.Every(time.Hour), 1)
	p, err := NewPacer(PacerConfig[string]{Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Name: "self", Limiter: lim}}, Costs: map[string]int{"/a/Big": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(context.Background(), echo.Say); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = p.Wait(ctx, echo.Say)
	if status.Code(err) != codes.ResourceExhausted || !errors.Is(err, ErrLimited) {
		t.Errorf("wait past the deadline: %v, want ResourceExhausted at once", err)
	}
	if d, ok := RetryDelay(err); !ok || d < 59*time.Minute {
		t.Errorf("RetryInfo %v %v, want the hour's remainder", d, ok)
	}
	if err := p.Wait(context.Background(), "/a/Big"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("cost above the burst: %v", err)
	} else if _, ok := RetryDelay(err); ok {
		t.Errorf("cost above the burst has a RetryInfo")
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Wait(ctx, echo.Say) }()
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("canceled wait: %v, want Canceled", err)
	}
}

// A pacer's own limiter that is full (WithMaxKeys, RejectNew) has no room
// for a new key: the call fails at once with Unavailable, a RetryInfo of
// the time until the limiter may have room, and an Overloaded event, as
// the server's interceptor answers it. It is not a wait: the pacer asks no
// policy again, and does not spin until the context ends.
func TestPacerFullLimiter(t *testing.T) {
	c := newFakeClock()
	lim, err := atomiclimit.NewKeyedRule[string](atomiclimit.FixedWindow(1, 5*time.Second),
		atomiclimit.WithClock(c), atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	if err != nil {
		t.Fatal(err)
	}
	h := newCountingHook()
	p, err := NewPacer(PacerConfig[string]{Key: FullMethod, Hook: h.hook(), Policies: []atomiclimit.Policy[string]{{Name: "self", Limiter: lim}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(context.Background(), "/a/First"); err != nil {
		t.Fatal(err)
	}
	c.Add(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = p.Wait(ctx, "/a/Second")
	if status.Code(err) != codes.Unavailable || !errors.Is(err, atomiclimit.ErrTooManyKeys) {
		t.Fatalf("a full limiter: %v, want Unavailable wrapping ErrTooManyKeys", err)
	}
	if d, ok := RetryDelay(err); !ok || d != 4*time.Second {
		t.Errorf("RetryInfo %v %v, want 4s: the held key is idle then", d, ok)
	}
	if h.overloaded["self"] != 1 || h.denied["self"] != 0 || h.error["self"] != 0 {
		t.Errorf("hook: overloaded %d, denied %d, errors %d; want 1, 0, 0", h.overloaded["self"], h.denied["self"], h.error["self"])
	}
}

// Retries: a server that admits one call per 30 ms; a client with Retries
// makes five calls in a row, each admitted, and each denial it met was
// followed by an admission: it waited what RetryInfo said, and that was
// enough. A client without them sees the denial.
func TestPacerRetries(t *testing.T) {
	lim := newKeyed[string](t, nil, gcra.Every(30*time.Millisecond), 1)
	m := mustNew(t, Config[string]{Key: FullMethod, Policies: []atomiclimit.Policy[string]{{Name: "srv", Limiter: lim}}})
	p, err := NewPacer(PacerConfig[string]{Retries: 3})
	if err != nil {
		t.Fatal(err)
	}
	var a attempts
	cc := serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary())}, grpc.WithChainUnaryInterceptor(p.Unary(), a.interceptor))
	for i := range 5 {
		if _, err := echo.CallSay(context.Background(), cc, "hi"); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if a.denied == 0 || a.sent != 5+a.denied || a.deniedInARow != 1 {
		t.Errorf("sent %d, denied %d (%d in a row); want 5 + the denials, some, never 2 in a row", a.sent, a.denied, a.deniedInARow)
	}
	var b attempts
	plain := serve(t, []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.Unary())}, grpc.WithChainUnaryInterceptor(b.interceptor))
	if _, err := echo.CallSay(context.Background(), plain, "hi"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("without a pacer: %v, want ResourceExhausted", err)
	}
}
