package grpclimit

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
)

// PacerConfig configures a Pacer. A Pacer needs Policies, Retries, or both.
type PacerConfig[K comparable] struct {
	// Key returns a call's key from its outgoing context and full method
	// (FullMethod, or a function of your own). Required with Policies.
	Key KeyFunc[K]
	// Policies are the client's own limits: a call waits until every one
	// admits it, all at once (what one took is given back while another
	// makes it wait).
	Policies []atomiclimit.Policy[K]
	// Costs is the cost of a call (of opening a stream) of a full method
	// name: 1 for a method not listed; 0 waits for nothing.
	Costs map[string]int
	// Retries is how many times a unary call that the server answered
	// with a RetryInfo detail (codes.ResourceExhausted or Unavailable) is
	// sent again, after the delay it names (0: never). A delay that would
	// pass the call's deadline is not waited: the call fails at once.
	Retries int
	// Hook receives the pacer's events (atomiclimit.Stack.Report of
	// atomiclimit.Stack.Wait): Allowed when a call goes out, after Waited
	// for the policy that made it wait, with the wait; Denied for each
	// policy violated when a call fails because no wait within its
	// deadline admits it; Overloaded for a full limiter, Error for a
	// limiter that could not decide (nil: none).
	Hook *atomiclimit.Hook
}

// A Pacer limits the calls a client makes, for clients that limit
// themselves: a call waits until its policies admit it (rather than being
// sent to be denied), and one the server denies with a RetryInfo is sent
// again after the delay the server named. Install Unary and Stream with
// grpc.WithChainUnaryInterceptor and grpc.WithChainStreamInterceptor. It is
// safe for concurrent use.
//
// A call waits as atomiclimit.Stack.Wait waits, never past its deadline:
// for a lone policy that can queue (a GCRA *atomiclimit.Keyed, a
// redislimit.Limiter), waiting callers are served in the order they
// reserved their place; for several policies, or one of a window rule in
// process, each waits the wait its policies named (a window's with a
// jitter) and asks again, so which of several waiting callers goes first
// is not defined. Either way nothing is held while a call waits, and every
// policy keeps its bound on the times the calls go out.
type Pacer[K comparable] struct {
	key     KeyFunc[K]
	s       *atomiclimit.Stack[K] // nil without Policies
	costs   map[string]int
	retries int
	hook    *atomiclimit.Hook // nil: none
}

// NewPacer validates c and returns the pacer it describes.
func NewPacer[K comparable](c PacerConfig[K]) (*Pacer[K], error) {
	if len(c.Policies) == 0 && c.Retries == 0 {
		return nil, fmt.Errorf("%w: a pacer needs Policies or Retries", ErrConfig)
	}
	if c.Retries < 0 {
		return nil, fmt.Errorf("%w: Retries %d, negative", ErrConfig, c.Retries)
	}
	if len(c.Policies) > 0 && c.Key == nil {
		return nil, fmt.Errorf("%w: no Key function", ErrConfig)
	}
	p := &Pacer[K]{key: c.Key, costs: c.Costs, retries: c.Retries, hook: c.Hook}
	for name, cost := range c.Costs {
		if cost < 0 {
			return nil, fmt.Errorf("%w: Costs[%q] = %d, negative", ErrConfig, name, cost)
		}
	}
	var ps policies[K] // a pacer reports no evictions
	pols, err := ps.addList("Policies", c.Policies)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s, err := newStack("Policies", pols)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if s != nil {
		p.s = s.Stack
	}
	return p, nil
}

// Unary returns the unary client interceptor: each call waits for its
// policies, and is retried after a denial's RetryInfo up to Retries times.
func (p *Pacer[K]) Unary() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for attempt := 0; ; attempt++ {
			if err := p.Wait(ctx, method); err != nil {
				return err
			}
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || attempt >= p.retries {
				return err
			}
			c := status.Code(err)
			if c != codes.ResourceExhausted && c != codes.Unavailable {
				return err
			}
			d, ok := RetryDelay(err)
			if !ok || !sleep(ctx, d) {
				return err
			}
		}
	}
}

// Stream returns the stream client interceptor: opening a stream waits for
// its policies. Streams are not retried.
func (p *Pacer[K]) Stream() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if err := p.Wait(ctx, method); err != nil {
			return nil, err
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}

// Wait blocks until the policies admit a call of method under its key, and
// takes its cost. It fails with the status error of ctx's end
// (codes.Canceled, DeadlineExceeded) if ctx ends first, at once with
// codes.ResourceExhausted if the wait would pass ctx's deadline or the call
// can never be admitted, with the key function's error, and with
// codes.Unavailable if a limiter could not decide and failed closed, or a
// full limiter had no room for the key (atomiclimit.ErrTooManyKeys; the
// RetryInfo says when it may have room).
func (p *Pacer[K]) Wait(ctx context.Context, method string) error {
	if p.s == nil {
		return nil
	}
	n := 1
	if c, ok := p.costs[method]; ok {
		n = c
	}
	key, err := p.key(ctx, method)
	if err != nil {
		return err
	}
	var out [atomiclimit.MaxPolicies]atomiclimit.Outcome
	o := out[:p.s.Len()]
	res, at, _ := p.s.Wait(ctx, key, n, 0, o)
	p.s.Report(p.hook, res, o, n)
	switch res {
	case atomiclimit.Pass:
		return nil
	case atomiclimit.Gone:
		return gone(ctx)
	case atomiclimit.Unavailable, atomiclimit.Overloaded:
		// Not a wait: the limiter could not decide, or had no room for the
		// key (the wait it names is only when it may have room).
		return unavailable(p.s.Policy(at).Name, &o[at])
	}
	// No wait admits it, or none within the deadline: as x/time/rate's
	// Wait, fail now, not at the deadline.
	return denied(p.s, o, p.s.Denied(o))
}

// sleep waits d or until ctx ends, and reports whether d passed (false if
// ctx ended first, or would end before d passes).
func sleep(ctx context.Context, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
