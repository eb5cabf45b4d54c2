// Package grpclimit is gRPC interceptors over any keyed limiter of
// atomiclimit (the atomiclimit.KeyedLimiter contract: every in-process rule,
// and redislimit's limits kept in Redis), on the same contract as httplimit:
// it keys each call (peer address behind trusted proxies, an API key in the
// metadata, the full method name, the mTLS identity, a composite, or any
// function), checks it against one or several policies at once, and denies
// with codes.ResourceExhausted, a google.rpc.RetryInfo and a
// google.rpc.QuotaFailure when a policy is exceeded (codes.Unavailable
// when a limiter's store is down and it fails closed).
//
//	perMinute, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(60), 60)
//	key, _ := grpclimit.ClientIP(httplimit.IPOptions{})
//	lim, _ := grpclimit.New(grpclimit.Config[netip.Prefix]{
//		Key:      key,
//		Policies: []atomiclimit.Policy[netip.Prefix]{{Name: "minute", Limiter: perMinute}},
//		Costs:    map[string]int{"/shop.Orders/Export": 10},
//	})
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(lim.Unary()),
//		grpc.ChainStreamInterceptor(lim.Stream()),
//	)
//
// This module is separate from atomiclimit's, so that google.golang.org/grpc
// never enters the root module's dependencies. It speaks HTTP's vocabulary
// where gRPC carries HTTP's fields: the client address behind trusted
// proxies (httplimit.IPOptions, httplimit.IPResolver), the RateLimit field
// values (httplimit.PolicyFields) and the key bound
// (httplimit.DefaultMaxKeyLen) are httplimit's.
//
// # Policies
//
// A call (a unary call, or a stream opened) is checked against every policy
// in Config.Policies and, if its method has one, Config.Methods' policy
// for it too, all or nothing, as one atomiclimit.Stack, exactly as
// httplimit's stacked policies: the policies take the call in turn; when one denies, those before it give
// their admission back, and those after it are asked without taking, to
// name every violated policy and the longest wait. A policy whose limiter
// cannot give an admission back (a sliding log, bands) is asked last; one
// such policy per call at most, which New checks. Config.Costs sets the
// tokens a method's call takes (1 by default; 0 checks without taking).
//
// # Streams
//
// Opening a stream is a call: it is checked with the method's cost before
// the handler runs. Config.Messages are checked for every message the
// client sends on a stream, one token each, under the key the stream was
// opened with: RecvMsg fails with the denial, which the handler returns to
// end the stream (the message was read and is dropped). The end of a
// stream (io.EOF) is never checked.
//
// # Denials
//
// A denied call fails with codes.ResourceExhausted and the message
// `grpclimit: rate limit exceeded: policy "minute"; retry after 1.5s`,
// carrying two details:
//
//   - google.rpc.RetryInfo: retry_delay is the longest wait any violated
//     policy needs, rounded up to the millisecond (after exactly that
//     wait the same call is admitted by that policy, if nothing else
//     consumes its quota; rounded up, it holds for clients that read the
//     delay in milliseconds). A call that no wait admits (its cost
//     exceeds a policy's quota, or DenyAll) has no RetryInfo.
//   - google.rpc.QuotaFailure: one violation per violated policy, in the
//     configured order: subject and quota_id the policy's name, description
//     the rule as configured ("60/min, burst 60"), quota_value the
//     advertised quota (q below). The key is never sent.
//
// RetryDelay reads the delay back on the client; a Pacer with Retries
// honours it. On the server, the error wraps ErrLimited, so the
// interceptors outside this one can tell a rate-limit denial with
// errors.Is.
//
// # Metadata
//
// Denials carry httplimit's RateLimit fields as response header metadata
// (a message's denial: trailer metadata), under the keys "ratelimit" and
// "ratelimit-policy", formatted by httplimit.PolicyFields exactly as the
// HTTP headers are (see httplimit's doc, "Headers", for r, t, q, w and
// their rounding):
//
//	ratelimit-policy: "minute";q=60;w=60, "day";q=10000;w=86400
//	ratelimit: "minute";r=0;t=2, "day";r=9941
//
// With MetadataOnAllow, admitted calls and streams opened carry them too.
// That costs what gRPC's metadata API costs: a map per call, merged by the
// transport into another one (several allocations; BenchmarkUnary measures
// them and the time), which is why it is not the default.
//
// # Outages
//
// A limiter that cannot reach its state (redislimit with Redis down or
// slow) returns an error with its outage policy's decision. The
// interceptor reports the error to Hook.Error (not as a denial), and then:
//
//   - fail closed (the limiter denied): codes.Unavailable, not
//     ResourceExhausted (the client exceeded nothing), with the limiter's
//     wait as RetryInfo, the policies before it given back, and the
//     limiter's error wrapped for errors.Is on the server (its text is not
//     sent);
//   - fail open: the call is served; the failed policy is listed in
//     ratelimit-policy but has no ratelimit item, since there is no state
//     to describe.
//
// A local fallback (redislimit's FallbackTo: the error wraps
// atomiclimit.ErrFallback) is not a failure to decide: another limiter
// decided, on a state of its own, and its decision is the policy's. The
// call is served if it admits; if it denies, the call fails with the
// policy's codes.ResourceExhausted, with the fallback's exact wait as
// RetryInfo and its state in the ratelimit item, as any denial. Hook.Error
// hears the outage, and Hook.Allowed or Hook.Denied the decision beside
// it. (A full fallback that has no room for the key is Unavailable, as any
// full limiter.)
//
// A call whose client goes away while a limiter decides (its context
// ends) is not an outage: nothing is reported, the policies before are
// given back, and the call ends with its context's status (Canceled,
// DeadlineExceeded).
//
// # Keys
//
// ClientIP keys on the peer address unless the peer is a trusted proxy;
// only then does it read "x-forwarded-for" (or RFC 7239 "forwarded") from
// the incoming metadata, from the right, skipping trusted hops, or the one
// address of "x-real-ip": the same options, rules and code as
// httplimit.ClientIP (httplimit.IPOptions, httplimit.IPResolver), the
// metadata key being the header's name lower-cased. A client that sends
// the metadata directly, or prepends fake entries through a trusted proxy,
// does not change its key. Interceptors run in the order they are chained: put
// this one after an authentication interceptor whose result a key
// function reads from the context.
//
// A limiter holds every active key in memory, so the key functions that
// read bytes the client chooses (APIKey, and FullMethod under an
// UnknownServiceHandler) bound their keys: a key longer than
// httplimit.DefaultMaxKeyLen (256 bytes) is ErrInvalidKey, InvalidArgument
// with RejectOnError, and never reaches a limiter. MaxKeyLen sets another
// bound for APIKey. httplimit's key functions hold to the same default,
// and take an option of the same name.
//
// # Clients
//
// A Pacer is the client side, for clients that limit themselves: its
// interceptors wait until the client's own policies admit a call (rather
// than send it to be denied), as atomiclimit.Stack.Wait waits (in order
// for a lone GCRA policy, in process or in Redis), and retry a call the
// server denied with a RetryInfo after the delay it names, up to
// PacerConfig.Retries times. httplimit's Transport is the same for HTTP.
//
// # Observability
//
// Config.Hook (the atomiclimit.Hook of httplimit) receives allowed, denied,
// overloaded and error events per policy, as atomiclimit.Stack.Report
// reports a call (a full limiter's refusal is an Overloaded event, not an
// error; a limiter's outage, and a key that failed, an Error event), and
// Interceptor.ReportEvictions forwards the limiters' eviction counts to
// it. A Pacer reports its calls the same way: Allowed when a call goes
// out, after Waited for the policy that made it wait; Denied when no wait
// within the call's deadline admits it.
//
// # Cost
//
// On an admitted unary call with the default metadata, the interceptor
// adds no allocation (an API key adds one, grpc's copy of the metadata
// value), and the time of the key function and of the limiters' Take:
// BenchmarkUnary compares it with a bare interceptor chain.
//
// A denial by a lone policy (Policies of one, or a method's own with no
// Policies) is built once per quota, wait (to the millisecond) and
// RateLimit item, and kept: the calls denied with the same ones share one
// immutable error value and its metadata values, and allocate only the
// metadata map they hand to gRPC (which gRPC copies into its own). A stack
// keeps at most 128 denials for waits under about a second, and the last
// denial; a denial by several policies is built per call.
package grpclimit
