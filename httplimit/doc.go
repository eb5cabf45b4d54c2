// Package httplimit is net/http middleware over the keyed GCRA limiters of
// atomiclimit: it keys each request (client IP, header, API key, route,
// method, a composite, or any function), takes its cost in tokens from the
// key's bucket, writes the IETF RateLimit headers, and denies with 429 and an
// RFC 9457 problem when the bucket is short.
//
//	lim, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(60), 60)
//	key, _ := httplimit.ClientIP(httplimit.IPOptions{})
//	mw, _ := httplimit.New(httplimit.Config[netip.Prefix]{
//		Key:    key,
//		Policies: []httplimit.Policy[netip.Prefix]{{Name: "per-ip", Limiter: lim}},
//	})
//	http.ListenAndServe(addr, mw.Handler(mux))
//
// # Client IP
//
// ClientIP keys on RemoteAddr unless the TCP peer is a trusted proxy; only
// then does it read X-Forwarded-For (or RFC 7239 Forwarded), from the right,
// skipping trusted hops. A client that sends a forwarding header directly, or
// prepends fake entries through a trusted proxy, does not change its key.
// IPv6 clients are grouped by /64 (configurable), IPv4 clients by /32.
//
// The key is a netip.Prefix, not a string: it is comparable, so the keyed
// limiter hashes it directly and the key function allocates nothing.
// Formatting it as a string (IPString) costs an allocation per request; see
// BenchmarkKeyType for the measured difference.
//
// # Headers
//
// The headers follow draft-ietf-httpapi-ratelimit-headers-11 (May 2026), as
// Structured Fields (RFC 9651) Lists of one Item each:
//
//	RateLimit-Policy: "default";q=60;w=60
//	RateLimit: "default";r=41;t=0
//	Retry-After: 2            (denials only)
//
// The item is the policy's name as an sf-string; pk (an sf-binary) is added
// when Config.PartitionKey is set, qu when Config.QuotaUnit is.
//
// How GCRA maps onto the draft's quota policy. GCRA with burst B and
// emission interval T admits at most B + d/T requests in any interval of
// length d, and a full bucket admits B at once. A quota of q units per window
// w can only approximate that two-parameter bound; we advertise
//
//	q = B   and   w = ⌈B·T⌉ seconds (at least 1).
//
// Reasons: (1) r never exceeds q, so the RateLimit field is consistent with
// its policy (with q set from the configured rate instead, say q=100 for
// 100/min with burst 10, r would never exceed 10 and a client could not tell
// why); (2) q/w is exactly the sustained rate 1/T when B·T is a whole number
// of seconds, and below it otherwise (w is rounded up, never down); (3) a
// client that sends at most q requests in every window of length w is never
// denied: such a client has t_{i+B} − t_i ≥ B·T for all i, which implies
// the GCRA conformance condition t_j − t_i ≥ (j−i+1−B)·T. The mapping is
// conservative: GCRA may admit up to 2B in one window of length B·T (a full
// burst, then a refilled one). For limits whose B·T is well under a second
// (100/s with burst 10: q=10;w=1) the advertised rate is below the real one;
// choose a burst that makes B·T whole seconds (PerSecond(100) with burst
// 100: q=100;w=1).
//
// RateLimit's r is Decision.Remaining: the tokens a request at the same
// instant could still take. Its t, the draft's "effective window", is "the
// number of seconds within which the client can use no more than the
// available quota"; we send ⌈Decision.TokenAfter⌉: when r = 0 the time until
// the next token, and 0 when r ≥ 1 (the tokens are there now). Under GCRA the statement "no more than r within t" then holds: for
// r ≥ 1 trivially, for r = 0 up to the rounding, which only ever makes the
// client wait less than a second longer than needed. A larger t for r ≥ 1,
// such as the time until the bucket is full, would understate what the
// client may use, and on a denial it would contradict Retry-After, which
// the draft says should not end before t.
//
// Retry-After, on denials, is ⌈Decision.RetryAfter⌉ whole seconds: after
// exactly RetryAfter the same request is admitted (if nothing else consumes
// tokens), so rounding up means a client that waits what it was told is
// admitted. It is never less than t, as the draft requires: for a denial
// RetryAfter ≥ TokenAfter (equal for n = 1, larger by (n−1)·T when r = 0,
// and TokenAfter = 0 when r ≥ 1). A request that can never
// be admitted (cost above B, or DenyAll) gets no Retry-After.
//
// The legacy headers (HeaderLegacy) are X-RateLimit-Limit = q,
// X-RateLimit-Remaining = r and X-RateLimit-Reset = ⌈Decision.ResetAfter⌉,
// the delay in seconds until the bucket is full (not a Unix time).
//
// # Tiers
//
// The headers describe the quota of the rule each key is held to
// (Limiter.Quota): a key on another tier (SetTierFunc, SetKeyRule) is
// advertised with its own q and w. For bands, q and w are the tightest
// band's. For limits that differ per route, use Config.Routes with one
// limiter per route.
//
// # Observability
//
// Config.Hook receives allowed, denied and error events, and
// Middleware.ReportEvictions forwards the limiters' eviction counts to it.
// The Hook interface mentions no HTTP type. The examples/prometheus module
// exports it with the Prometheus client library, which this module does not
// depend on.
package httplimit
