package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/atomiclimit/atomiclimit"
)

// ErrConfig is returned by New and NewPacer for an invalid configuration,
// and by ClientIP for invalid IPOptions.
var ErrConfig = errors.New("grpclimit: invalid config")

// ErrLimited is wrapped by the error a denied call or message fails with
// (its status is codes.ResourceExhausted), so that interceptors outside
// this one can tell a rate-limit denial with errors.Is. A call that a
// failing limiter denied (fail closed: codes.Unavailable) wraps the
// limiter's own error instead (redislimit.ErrUnavailable).
var ErrLimited = errors.New("grpclimit: rate limit exceeded")

// A MetadataSet selects the response metadata the interceptors send: which
// fields, and whether on admitted calls too.
type MetadataSet uint8

const (
	// MetadataRateLimit is "ratelimit": `"name";r=R;t=T` per policy.
	MetadataRateLimit MetadataSet = 1 << iota
	// MetadataPolicy is "ratelimit-policy": `"name";q=Q;w=W` per policy.
	MetadataPolicy
	// MetadataOnAllow sends the fields on every admitted call and stream
	// opened too, not only on denials. gRPC's metadata API takes a map, and
	// the transport merges it into a fresh one: on the allow path this adds
	// several allocations per call, and more time than the limiter takes
	// (BenchmarkUnary, metadata=onallow).
	MetadataOnAllow
	// MetadataNone sends no metadata; it overrides every other bit.
	MetadataNone

	// DefaultMetadata is what a zero Config.Metadata means: both fields, on
	// denials.
	DefaultMetadata = MetadataRateLimit | MetadataPolicy
)

// The response metadata keys: the IETF field names, lower-cased as gRPC
// metadata keys are.
const (
	mdRateLimit = "ratelimit"
	mdPolicy    = "ratelimit-policy"
)

// Config configures an Interceptor. Key and the policies' limiters are
// required; the zero value of every other field is a working default.
type Config[K comparable] struct {
	// Key returns a call's key (ClientIP, PeerIP, APIKey, FullMethod,
	// CertSubject, Compose, or any function).
	Key KeyFunc[K]
	// Policies are the limits every call (a unary call, or a stream
	// opened) is checked against, all at once: a call is admitted only if
	// every policy admits it, and when one denies, what the others took is
	// given back. At most 8, counting a method's. A policy's Name is its
	// item in the RateLimit metadata, a QuotaFailure violation's subject
	// and the hooks' policy: printable ASCII, unique among the policies one
	// call can meet; empty is "default" for a lone entry. Any
	// atomiclimit.KeyedLimiter serves: *atomiclimit.Keyed for every rule,
	// or a redislimit.Limiter for a limit a fleet shares.
	Policies []atomiclimit.Policy[K]
	// Methods adds a policy for the calls of one full method name, on top
	// of Policies: {"/shop.Orders/Create": {Name: "create", Limiter: l}}.
	Methods map[string]atomiclimit.Policy[K]
	// Costs is the cost of a call (of opening a stream) of a full method
	// name, in the limiters' tokens: 1 for a method not listed. A cost of 0
	// checks without taking; a cost above a policy's quota is always denied.
	Costs map[string]int
	// Messages are the limits every message a client sends on a stream is
	// checked against, under the key the stream was opened with, one token
	// per message. A denied message fails RecvMsg with the denial; the
	// handler that returns that error ends the stream with it.
	Messages []atomiclimit.Policy[K]
	// Exclude, if it returns true, passes the call through untouched: no
	// decision, no metadata, no hook (health checks, reflection).
	Exclude func(ctx context.Context, fullMethod string) bool
	// Metadata selects the response metadata sent (zero: DefaultMetadata).
	Metadata MetadataSet
	// OnError handles a call whose key could not be determined (nil:
	// RejectOnError).
	OnError ErrorHandler
	// Hook receives the interceptors' events (nil: none, at no cost).
	Hook *atomiclimit.Hook
}

// An ErrorHandler handles a call the interceptor could not key. It returns
// the error the call fails with, or nil to serve it without a limit.
type ErrorHandler func(ctx context.Context, fullMethod string, err error) error

// RejectOnError is the default ErrorHandler: the call fails with
// InvalidArgument when it lacks its key or has an invalid one (ErrNoKey,
// ErrInvalidKey), and Internal otherwise (ErrPeer, a user key function's
// error). The error's text is not sent to the client.
func RejectOnError(_ context.Context, _ string, err error) error {
	if errors.Is(err, ErrNoKey) || errors.Is(err, ErrInvalidKey) {
		return status.Error(codes.InvalidArgument, "grpclimit: the call lacks a valid rate-limit key")
	}
	return status.Error(codes.Internal, "grpclimit: the call could not be rate limited")
}

// ServeOnError is an ErrorHandler that fails open: it serves the call
// without a limit. With a key a client controls (an API key), a client that
// omits it is then never limited.
func ServeOnError(context.Context, string, error) error { return nil }

// An Interceptor limits the calls of a gRPC server: install Unary and Stream
// with grpc.ChainUnaryInterceptor and grpc.ChainStreamInterceptor. It is
// safe for concurrent use.
type Interceptor[K comparable] struct {
	key     KeyFunc[K]
	def     *stack[K]              // Policies; nil if there are none
	methods map[string]methodOf[K] // a method's stack (Policies and its own) and cost
	msgs    *stack[K]              // Messages; nil if there are none
	exclude func(context.Context, string) bool
	md      MetadataSet
	onError ErrorHandler
	hook    *atomiclimit.Hook // nil: none
	pols    policies[K]       // every policy once (for ReportEvictions)
}

// methodOf is what a listed method is checked against: s (nil: none) at
// cost.
type methodOf[K comparable] struct {
	s    *stack[K]
	cost int
}

// New validates c and returns the interceptor it describes.
func New[K comparable](c Config[K]) (*Interceptor[K], error) {
	if c.Key == nil {
		return nil, fmt.Errorf("%w: no Key function", ErrConfig)
	}
	if c.Metadata&^(DefaultMetadata|MetadataOnAllow|MetadataNone) != 0 {
		return nil, fmt.Errorf("%w: unknown metadata bits %#x", ErrConfig, uint8(c.Metadata))
	}
	if len(c.Policies) == 0 && len(c.Methods) == 0 && len(c.Messages) == 0 {
		return nil, fmt.Errorf("%w: no policy (Policies, Methods and Messages are empty)", ErrConfig)
	}
	m := &Interceptor[K]{key: c.Key, exclude: c.Exclude, md: c.Metadata, onError: c.OnError, hook: c.Hook}
	if m.md&^MetadataOnAllow == 0 {
		m.md |= DefaultMetadata
	}
	if m.onError == nil {
		m.onError = RejectOnError
	}
	def, err := m.pols.addList("Policies", c.Policies)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	msgs, err := m.pols.addList("Messages", c.Messages)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if m.def, err = newStack("Policies", def); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if m.msgs, err = newStack("Messages", msgs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if len(c.Methods) > 0 || len(c.Costs) > 0 {
		m.methods = make(map[string]methodOf[K], len(c.Methods)+len(c.Costs))
	}
	for _, name := range slices.Sorted(maps.Keys(c.Costs)) {
		cost := c.Costs[name]
		if cost < 0 {
			return nil, fmt.Errorf("%w: Costs[%q] = %d, negative", ErrConfig, name, cost)
		}
		m.methods[name] = methodOf[K]{s: m.def, cost: cost}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Methods)) {
		what := "Methods[" + strconv.Quote(name) + "]"
		pol, err := m.pols.add(what, c.Methods[name])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		s, err := newStack(what, append(slices.Clip(def), pol))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		mt, ok := m.methods[name]
		if !ok {
			mt.cost = 1
		}
		mt.s = s
		m.methods[name] = mt
	}
	return m, nil
}

// Unary returns the unary server interceptor: it checks each call against
// its policies before the handler runs.
func (m *Interceptor[K]) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if _, _, err := m.call(ctx, info.FullMethod, nil); err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the stream server interceptor: it checks each stream
// opened against its policies before the handler runs and, with Messages,
// each message received on it.
func (m *Interceptor[K]) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		key, keyed, err := m.call(ss.Context(), info.FullMethod, ss)
		if err != nil {
			return err
		}
		if m.msgs != nil && keyed {
			ss = &limitedStream[K]{ServerStream: ss, m: m, key: key}
		}
		return handler(srv, ss)
	}
}

// call decides a call of method (or the opening of a stream, ss) and sends
// its metadata. A nil error serves the call; keyed reports whether key is
// its key (false when it was excluded or could not be keyed).
func (m *Interceptor[K]) call(ctx context.Context, method string, ss grpc.ServerStream) (key K, keyed bool, err error) {
	if m.exclude != nil && m.exclude(ctx, method) {
		return key, false, nil
	}
	s, n := m.def, 1
	if mt, ok := m.methods[method]; ok {
		s, n = mt.s, mt.cost
	}
	if s == nil && (ss == nil || m.msgs == nil) {
		return key, false, nil // no policy for this call, nor for its messages
	}
	key, err = m.key(ctx, method)
	if err != nil {
		return key, false, m.fail(ctx, method, s, err)
	}
	if s == nil {
		return key, true, nil // no policy for opening it, but for its messages
	}
	return key, true, m.decide(ctx, ss, false, s, key, n)
}

// decide is check with the outcomes on the goroutine's stack, as few as
// the policies need: Take wants them zero, and zeroing MaxPolicies of them
// costs a call measurable time.
func (m *Interceptor[K]) decide(ctx context.Context, ss grpc.ServerStream, trailer bool, s *stack[K], key K, n int) error {
	switch l := s.Len(); {
	case l == 1:
		var out [1]atomiclimit.Outcome
		return m.check(ctx, ss, trailer, s, key, n, out[:])
	case l == 2:
		var out [2]atomiclimit.Outcome
		return m.check(ctx, ss, trailer, s, key, n, out[:])
	case l <= 4:
		var out [4]atomiclimit.Outcome
		return m.check(ctx, ss, trailer, s, key, n, out[:l])
	default:
		var out [atomiclimit.MaxPolicies]atomiclimit.Outcome
		return m.check(ctx, ss, trailer, s, key, n, out[:l])
	}
}

// fail reports err, for which a call of method could not be keyed, under
// the first policy it would have met, and returns what the ErrorHandler
// makes of it.
func (m *Interceptor[K]) fail(ctx context.Context, method string, s *stack[K], err error) error {
	if m.hook != nil && m.hook.Error != nil {
		if s == nil {
			s = m.msgs
		}
		m.hook.Error(s.Policy(0).Name, err)
	}
	return m.onError(ctx, method, err)
}

// check decides a request for n at key under every policy of s, reports it
// to the hook (Stack.Report: its errors and its events), and sends its
// metadata: in the header (trailer false), or in the trailer for a message
// on a stream whose header may be gone. A nil error admits it.
func (m *Interceptor[K]) check(ctx context.Context, ss grpc.ServerStream, trailer bool, s *stack[K], key K, n int, out []atomiclimit.Outcome) error {
	res, at := s.Take(ctx, key, n, out)
	s.Report(m.hook, res, out, n)
	switch res {
	case atomiclimit.Pass:
		if m.md&MetadataOnAllow != 0 && !trailer { // an admitted message sends nothing
			m.sendMetadata(ctx, ss, false, s, out, n)
		}
		return nil
	case atomiclimit.Gone:
		return gone(ctx)
	case atomiclimit.Overloaded, atomiclimit.Unavailable:
		// Overloaded: a full limiter had no room for the key, the server's
		// capacity, not the client's quota. Unavailable: the limiter's outage
		// policy denied.
		m.sendMetadata(ctx, ss, trailer, s, out, n)
		return unavailable(s.Policy(at).Name, &out[at])
	default: // atomiclimit.Deny
		return m.deny(ctx, ss, trailer, s, out, n)
	}
}

// deny is check's denial, out of line so that the admission's path stays
// short: it sends the denial's metadata and returns its error.
func (m *Interceptor[K]) deny(ctx context.Context, ss grpc.ServerStream, trailer bool, s *stack[K], out []atomiclimit.Outcome, n int) error {
	den := s.Denied(out)
	if s.Len() == 1 {
		// The denial of one policy is kept, and built only on a miss.
		d := s.deny1(out, n, den)
		if md := d.metadata(m.md); md != nil {
			send(ctx, ss, trailer, md)
		}
		return d.err
	}
	m.sendMetadata(ctx, ss, trailer, s, out, n)
	return denied(s.Stack, out, den)
}

// sendMetadata sends the selected RateLimit fields of s's outcomes: with
// grpc.SetHeader for a unary call (ss nil), in ss's header when it opens,
// in ss's trailer for a message. Interceptors nested in one another each
// add their own values under the same keys.
func (m *Interceptor[K]) sendMetadata(ctx context.Context, ss grpc.ServerStream, trailer bool, s *stack[K], out []atomiclimit.Outcome, n int) {
	if m.md&MetadataNone != 0 {
		return
	}
	rlv, polv := s.values(out, n)
	rl := rlv != "" && m.md&MetadataRateLimit != 0
	pol := polv != "" && m.md&MetadataPolicy != 0
	if !rl && !pol {
		return
	}
	// One map and one backing array for both values.
	md := make(metadata.MD, 2)
	vals := make([]string, 0, 2)
	if rl {
		vals = append(vals, rlv)
		md[mdRateLimit] = vals[len(vals)-1:]
	}
	if pol {
		vals = append(vals, polv)
		md[mdPolicy] = vals[len(vals)-1:]
	}
	send(ctx, ss, trailer, md)
}

// send sends md: with grpc.SetHeader for a unary call (ss nil), in ss's
// header when it opens, in ss's trailer for a message.
func send(ctx context.Context, ss grpc.ServerStream, trailer bool, md metadata.MD) {
	// The only error is a header already sent (the handler's, on a stream
	// it opened earlier): nothing to do about it but leave it out.
	switch {
	case ss == nil:
		_ = grpc.SetHeader(ctx, md)
	case trailer:
		ss.SetTrailer(md)
	default:
		_ = ss.SetHeader(md)
	}
}

// A limitedStream checks every message received against the Messages
// policies, under the key its stream was opened with.
type limitedStream[K comparable] struct {
	grpc.ServerStream
	m   *Interceptor[K]
	key K
}

// RecvMsg receives a message and checks it: a denied message fails with
// the denial (the message is read and dropped), an admitted one is returned
// as received. The end of the stream (io.EOF) and transport errors pass as
// they are, unchecked.
func (s *limitedStream[K]) RecvMsg(msg any) error {
	if err := s.ServerStream.RecvMsg(msg); err != nil {
		return err
	}
	return s.m.decide(s.Context(), s.ServerStream, true, s.m.msgs, s.key, 1)
}

// ReportEvictions passes to the hook, as Evicted events, the keys each
// policy's limiter has removed since the last call (limiters with a
// Stats() atomiclimit.Stats method). Call it periodically or before a
// metrics scrape. Without a hook it does nothing.
func (m *Interceptor[K]) ReportEvictions() { m.pols.reportEvictions(m.hook) }
