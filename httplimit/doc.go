// Package httplimit is net/http middleware over any keyed limiter of
// atomiclimit (the atomiclimit.KeyedLimiter contract: every in-process rule,
// and redislimit's limits kept in Redis): it keys each request (client IP,
// header, API key, route, method, a composite, or any function), checks it
// against one or several policies at once, writes the IETF RateLimit
// headers, and denies with 429 and an RFC 9457 problem when a policy is
// exceeded (503 when a limiter's store is down and its outage policy denies).
// For the other side of the wire, a client of an API with a hard limit,
// it has a Transport (see "Client").
//
//	perMinute, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(60), 60)
//	perDay, _ := atomiclimit.NewKeyedRule[netip.Prefix](atomiclimit.Rolling(10_000, 24*time.Hour, time.Hour, 0))
//	key, _ := httplimit.ClientIP(httplimit.IPOptions{})
//	mw, _ := httplimit.New(httplimit.Config[netip.Prefix]{
//		Key: key,
//		Policies: []atomiclimit.Policy[netip.Prefix]{
//			{Name: "minute", Limiter: perMinute},
//			{Name: "day", Limiter: perDay},
//		},
//	})
//	http.ListenAndServe(addr, mw.Handler(mux))
//
// # Stacked policies
//
// A request is checked against every policy in Config.Policies and, if its
// route has one, Config.Routes' policy for it too (100 per second per IP,
// plus 3 per minute on POST /login), as one atomiclimit.Stack. It is
// admitted only if every policy admits it. The policies take the request in
// turn (KeyedLimiter.Take); when one denies, those before it give their
// admission back (Refund, last first), and those after it are asked
// without taking (Peek), to name every violated policy and the longest
// wait: no policy is charged for a request another denied. A refund never creates quota (under a race it may
// give back nothing, which leaves the policy stricter, never looser). A
// policy whose limiter cannot give an admission back (a sliding log, bands)
// is asked last; one such policy per request at most, which New checks.
//
// The headers list every policy, in the configured order; Retry-After is
// the longest wait any violated policy needs; DefaultDeny's body names
// every violated policy. Each further policy costs one Take, its header
// items and its hook call (BenchmarkStacked measures it).
//
// Middlewares nested in one another (one for the server, one for a route
// group) are independent limits: each lists its own policies after the
// outer one's in the same fields, but the outer one has already charged a
// request the inner one denies. Put policies that must be all or nothing
// in one middleware.
//
// # Outages
//
// A limiter that cannot reach its state (redislimit with Redis down or slow)
// returns an error with its outage policy's decision. The middleware
// reports the error to Hook.Error (not as a denial), and then:
//
//   - fail closed (the limiter's decision denies): 503 Service
//     Unavailable, not 429 — the limit itself could not be checked — with
//     the limiter's hint as Retry-After, and the policies before it given
//     back;
//   - fail open (it admits): the request is served.
//
// Either way the failed policy is listed in RateLimit-Policy but has no
// RateLimit item, since there is no state to describe, and neither
// Hook.Allowed nor Hook.Denied is called for it.
//
// A local fallback (redislimit's FallbackTo: the error wraps
// atomiclimit.ErrFallback) is not a failure to decide: another limiter
// decided, on a state of its own, and its decision is the policy's. The
// request is served if it admits; if it denies, the response is the
// policy's 429, with the fallback's exact wait as Retry-After and its
// state as the RateLimit item, as for any denial. Hook.Error hears the
// outage, and Hook.Allowed or Hook.Denied the decision beside it. (A full
// fallback that has no room for the key is a 503, as any full limiter.)
//
// A request whose client goes away while a limiter decides (its context
// ends) is not an outage: nothing is reported or served, the policies
// before are given back, and the status is 499, the code proxies log for a
// client that closed its request.
//
// # Client IP
//
// ClientIP keys on RemoteAddr unless the TCP peer is a trusted proxy; only
// then does it read X-Forwarded-For (or RFC 7239 Forwarded), from the right,
// skipping trusted hops, or the one address of X-Real-IP. A client that
// sends a forwarding header directly, or prepends fake entries through a
// trusted proxy, does not change its key. IPv6 clients are grouped by /64
// (configurable), IPv4 clients by /32. An IPResolver is the same rule for
// a door of another protocol, given a peer address and the forwarding
// field's values: grpclimit's ClientIP reads them from a call's peer and
// metadata, with the same IPOptions.
//
// The key is a netip.Prefix, not a string: it is comparable, so the keyed
// limiter hashes it directly and the key function allocates nothing.
// Formatting it as a string (netip.Prefix.String) costs an allocation per
// request; see BenchmarkKeyType for the measured difference. To key on more
// than two parts, nest Compose: Compose(RemoteIP, Compose(Route, Method)) is
// a Pair[netip.Prefix, Pair[string, string]], as comparable.
//
// # Key bound
//
// A limiter holds every active key in memory, so the key functions that
// read bytes the client chooses (Header, APIKey, Method) bound their keys:
// a key longer than DefaultMaxKeyLen (256 bytes) is ErrInvalidKey, a 400
// with RejectOnError, and never reaches a limiter. MaxKeyLen sets another
// bound for Header and APIKey. grpclimit's key functions hold to the same
// default, and take an option of the same name.
//
// # Headers
//
// The headers follow draft-ietf-httpapi-ratelimit-headers-11 (May 2026), as
// Structured Fields (RFC 9651) Lists with one Item per policy:
//
//	RateLimit-Policy: "minute";q=60;w=60, "day";q=10000;w=86400
//	RateLimit: "minute";r=0;t=2, "day";r=9941
//	Retry-After: 2            (denials only)
//
// The item is the policy's name as an sf-string; pk (an sf-binary) is added
// when Config.PartitionKey is set, qu when Config.QuotaUnit is. A door of
// another protocol formats the same items with a PolicyFields per policy
// (grpclimit sends them as metadata), and Advertise gives a quota's q and
// w.
//
// The quota policy, q units per w seconds, comes from the limiter's Quota
// (a quota of Limit per Window): w is the window rounded up to whole
// seconds (at least 1), and q the quota scaled to that w, never below the
// limit's own:
//
//	w = max(1, ⌈Window⌉)   and   q = max(Limit, ⌊Limit · w / Window⌋).
//
// So q/w is the limit's rate (rounded down), never a slower one. For a
// window, Limit and Window are its count and length. For GCRA with burst B
// and interval T they are B and B·T: a limit whose B·T is whole seconds is
// advertised as q = B, w = B·T (60 per minute with burst 60: q=60;w=60), and
// a client that sends at most q requests in every window of length w is
// then never denied (it has t_{i+B} − t_i ≥ B·T for all i, which implies
// the GCRA conformance condition t_j − t_i ≥ (j−i+1−B)·T). A limit whose
// B·T is under a second is advertised at its rate: 1000 per second with
// burst 1 is q=1000;w=1, not q=1;w=1. A client that spaces its requests
// w/q apart is never denied; one that sends q at once is admitted B of
// them, as r says.
//
// RateLimit's r is Decision.Remaining: the units a request at the same
// instant could still take (for a policy given back or only checked, the
// key's state without the request). Its t, "the number of seconds until
// additional quota is made available", is sent when r = 0, as
// ⌈Decision.TokenAfter⌉, the time until one unit is. With r ≥ 1 quota is
// available now, and t (optional in the draft) is left out.
//
// Retry-After, on denials, is ⌈Decision.RetryAfter⌉ whole seconds of the
// violated policy that needs the longest: after exactly RetryAfter the same
// request is admitted by that policy (if nothing else consumes its quota),
// so rounding up means a client that waits what it was told is admitted. It
// is never less than a violated policy's t, as the draft requires: for a
// denial RetryAfter ≥ TokenAfter. A request that can never be admitted
// (cost above a policy's quota, or DenyAll) gets no Retry-After.
//
// The common header values (and DefaultDeny's bodies) are built once and
// shared by every response that carries them, so that a request allocates
// none: a handler may set, add or delete these headers, which replaces
// the value's slice, but must not write into the slice it finds there.
//
// The legacy headers (HeaderLegacy) are X-RateLimit-Limit = q,
// X-RateLimit-Remaining = r and X-RateLimit-Reset = ⌈Decision.ResetAfter⌉,
// the delay in seconds until the bucket is full (not a Unix time), of the
// policy with the fewest remaining.
//
// # Tiers
//
// The headers describe the quota of the rule each key is held to
// (KeyedLimiter.Quota, as atomiclimit.Stack reports it in each Outcome;
// for an *atomiclimit.Keyed, read by the decision's own lookup of the
// key): a key on another tier (SetTierFunc, SetKeyRule) is advertised with
// its own q and w. For bands, q and w are the tightest band's; to
// advertise each limit, make each a policy of its own. For limits that
// differ per route, use Config.Routes with one limiter per route.
//
// # Observability
//
// Config.Hook receives allowed, denied, overloaded and error events per
// policy, as atomiclimit.Stack.Report reports a request (a request
// admitted by three policies is three Allowed events; one that a policy
// denies is a Denied event for each violated policy and none for the
// policies that gave their admission back; a full limiter's refusal is an
// Overloaded event; a limiter's outage, and a key or cost that failed, an
// Error event), and Middleware.ReportEvictions forwards the limiters'
// eviction counts to it.
// The Hook interface mentions no HTTP type. The examples/prometheus module
// exports it with the Prometheus client library, which this module does not
// depend on.
//
// # Client
//
// NewTransport's Transport is an http.RoundTripper for a client that must
// keep to its provider's limit, one process or a fleet: a request waits
// for the client's own policies (atomiclimit.Stack.Wait: all or nothing,
// in order for a lone GCRA policy, never past its deadline or
// TransportConfig.MaxWait) and is then sent; the provider's answers are
// heard: a 429 or 503 with Retry-After, or a RateLimit field with a spent
// item (r=0, its reset t, as this package writes it), holds the key until
// the reset, and a replayable request is sent again after it. The hook
// hears the waits (Waited), the holds (Held) and the retries (Retried).
// With a redislimit.Limiter as the policy, a fleet's processes wait for
// one limit in Redis, one call per request, in the order they reserved,
// and a hold one of them hears is taken into that limit's state, so that
// the others hold too.
package httplimit
