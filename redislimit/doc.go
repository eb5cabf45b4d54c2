// Package redislimit decides every rule of package atomiclimit in Redis
// (GCRA, fixed windows, the sliding counter and log, the rolling window,
// anchored windows, and bands of them), so that a fleet of processes shares
// one limit per key. Each decision is one EVALSHA of a short Lua script
// (EVAL once after a NOSCRIPT reply), which reads Redis TIME, reads the key,
// and writes it only to admit (or to repair a corrupt state, ErrCorrupt).
// It works with any client that implements redis.Scripter from
// github.com/redis/go-redis/v9: a single node (*redis.Client), Redis
// Cluster (*redis.ClusterClient) and client-side sharding (*redis.Ring).
// New takes a GCRA limit; NewRule takes every rule, and bands of them (see
// "Every rule"); both key by strings, and NewKeyed[K] and NewKeyedRule[K]
// by the key types of the in-process limiters, such as httplimit's client
// address, a netip.Prefix (see "Keys"). The model, the microsecond rounding rule, the over-limit
// cache and leases below are GCRA's; "Every rule" says how the other rules
// are kept and decided; outages and the verbs apply to every rule.
//
// # The model
//
// Exactly package gcra's: Rate per Period gives the emission interval T,
// Burst B ≥ 1 is the capacity, and the whole state of a key is its
// theoretical arrival time TAT. A request for n tokens at now is admitted iff
//
//	1 ≤ n ≤ B  and  max(TAT, now) + n·T − now ≤ B·T
//
// and only an admission writes (TAT ← max(TAT, now) + n·T), or a Refund of
// one (below). A denial writes nothing (unless it repairs a corrupt state).
// An absent key is a full bucket. A reservation (Reserve, Wait: "Waiting")
// is an admission that may wait: it is admitted when max(TAT, now) + n·T −
// now − B·T, its wait, is at most the longest it may wait.
//
// In Redis, TAT is an integer number of microseconds since the Unix epoch on
// the server's TIME clock, stored as a decimal string, and the key expires
// when the bucket is full again: PEXPIRE ⌈(TAT − now)/1 ms⌉ + 1 ms (set with
// SET … PX in the same call; always at least 1 ms). A key that expired thus
// had TAT ≤ now, so expiry is exact: it changes no decision. The extra
// millisecond covers the expiry clock, which Redis may read (at the start of
// the script, truncated to milliseconds) before the script reads TIME. Once
// a Refund has moved other admissions of the key, the string is "TAT:E", E
// the key's give-back epoch, and the key lives until E + B·T at least
// (Refund says why); once a reservation has queued (waited), it is
// "TAT:E:Q", Q the key's queue stamp. A bare TAT, as every value written
// before the epoch existed, is epoch 0, and a value without Q (every value
// written before reservations) has none: an upgrade changes no decision
// and no give-back (script.go, decideLua, says how the two stamps tell a
// give-back what in process a stripe's counters tell it).
//
// # The microsecond rounding rule, and why it never over-admits
//
// T is rounded up to a whole number of microseconds:
//
//	T_redis = ⌈T / 1µs⌉ µs   (T as gcra computes it, itself rounded up to 1 ns)
//
// and the decision uses B·T_redis. Every quantity the script computes is then
// a whole number of microseconds: now (TIME reports whole µs), TAT (a sum of
// now and multiples of T_redis), n·T_redis and B·T_redis. No step rounds, so
// the script computes exactly what gcra.Params.Decide computes on the same
// values in nanoseconds, with the parameters that Params reports (interval
// T_redis). Lua numbers are doubles, exact for integers below 2^53 µs; the
// largest the script forms is now + 2·B·T_redis ≤ now + 2^62 ns, below 2^53 µs
// until 2109 for the longest spans gcra accepts (and for centuries for spans
// of a year or less).
//
// It never admits more than gcra with the unrounded T: gcra admits at most
// B + d/T' tokens over any span d of its clock with interval T', and
// T_redis ≥ T, so B + d/T_redis ≤ B + d/T. The clock is Redis TIME (whole
// microseconds, truncated), so d is measured in TIME readings; a truncated
// reading is a slightly stale now, which gcra already treats as stricter.
// The rounding costs less than 1µs per interval: the rate is low by a
// relative error below 1µs/T, at most 0.1% for rates up to 1000/s. Rates
// above one event per microsecond (10^6/s) are rejected with
// gcra.ErrRateTooHigh, as gcra rejects rates above one per nanosecond,
// rather than silently rounded to a different limit. The tests run one
// table of decision vectors through gcra and through a real redis-server
// and fail on any difference.
//
// # When Redis is slow or down
//
// WithTimeout bounds every call (it needs a client with
// ContextTimeoutEnabled, or go-redis ignores the deadline). When a call
// fails, the Outage policy decides: FailClosed (the default: deny, never
// over-admit), FailOpen (admit), or FallbackTo a local
// atomiclimit.Keyed limiter. The call's error says that Redis did not
// decide, and why (it wraps ErrUnavailable and the cause).
//
// go-redis's defaults are a client's, not a limiter's: with them and no
// WithTimeout, a request waited 1.7s while Redis refused connections (4
// attempts of 5 dials each, with backoffs) and 5s while it did not answer
// (ReadTimeout; 10s for the first request). A limiter's client wants
//
//	rdb := redis.NewClient(&redis.Options{
//		Addr:                  addr,
//		ContextTimeoutEnabled: true, // WithTimeout's deadline reaches the connection
//		MaxRetries:            -1,   // no retry: it would sleep until the deadline
//		DialerRetries:         1,    // one dial: a refused one fails at once
//	})
//	lim, err := redislimit.NewKeyed[netip.Prefix](rdb, limit, burst,
//		redislimit.WithTimeout(50*time.Millisecond),
//		redislimit.WithOutage(redislimit.FallbackTo(local)),
//		redislimit.WithBreaker(5, time.Second))
//
// WithTimeout's deadline then bounds the whole call: the wait for a pooled
// connection, the dial, the write, the read and the EVAL after a NOSCRIPT,
// so that DialTimeout, ReadTimeout, WriteTimeout and PoolTimeout (5s, 5s,
// 5s and 6s by default) only cap it. Measured on 2 cores (TestOutageLatency
// asserts a bound of 1s): a request takes 0.1–0.3ms while Redis refuses
// connections, and 51ms while it is paused (SIGSTOP: connections open,
// nothing answered), 64 at once included; with WithBreaker, the requests
// after the threshold do not wait at all. Without MaxRetries -1 a refused
// request sleeps between retries until the deadline (51ms); without
// DialerRetries 1 it waits 100ms between redials, again until the deadline.
//
// Only outages take the Outage policy. Every error is one of three
// classes (errors.Is on the error of Take, Peek, Refund and Reset):
//
//   - Outage, ErrUnavailable: Redis did not answer (refused, reset, a
//     timeout, the pool's timeout) or answered that it cannot serve now
//     (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, NOREPLICAS, OOM,
//     MISCONF, max clients). The Outage policy decides; the breaker counts
//     it.
//   - Rejection, ErrRejected: any other error reply (READONLY, NOPERM,
//     NOAUTH, WRONGPASS, an unknown command, MOVED to a plain client, a
//     script error, a reply of the wrong shape). FallbackTo's limiter
//     decides, under that policy; otherwise the call is denied as
//     FailClosed denies (SourceFailClosed), FailOpen included: a
//     misconfiguration never unlimits a key. Nothing is written, so once
//     it is fixed every key decides as before. The breaker ignores it.
//   - Corrupt state, ErrCorrupt: the key held something that is not a
//     state (another type; not 1 to 16 decimal digits below 2^53, as
//     "inf", "1e19", "nan", "0x10", "garbage" are not, optionally followed
//     by ":" and an epoch of the same form, and then by ":" and a queue
//     stamp; a TAT more than 2·B·T ahead, whether or not the key expires,
//     or more than B·T ahead with no expiry: no decision but a reservation
//     stores more than B·T, and the second B·T is what TIME may step back;
//     with a queue stamp, B·T + gcra.MaxWait further, what reservations may
//     store). The script replaces it, in the same call,
//     with the empty bucket (TAT = now + B·T, expiring as every state) and
//     decides on that: Redis decided (SourceRedis), denied with RetryAfter
//     n·T. The key is neither unlimited nor locked out: it refills as any
//     key does.
//
// Each error wraps the cause, and its message starts with "redislimit: ".
// Take, Peek, Refund and Reset return the same errors (the doors,
// httplimit and grpclimit, answer a denial with such an error 503 or
// Unavailable and report the error to their hook). A decision of
// FallbackTo's limiter is the exception: its error wraps
// atomiclimit.ErrFallback too, and the doors answer it as that limiter
// decided (served, or 429 / ResourceExhausted with its wait), reporting the
// error beside the Allowed or Denied event.
//
// WithBreaker(failures, window) skips Redis after failures outages in a
// row: for window every call fails at once with ErrCircuitOpen (and
// ErrUnavailable) and the Outage policy decides; then one call probes, and
// an answer closes the breaker while an outage opens it for another
// window. Against a host that does not answer, a decision then costs
// nanoseconds instead of the whole WithTimeout.
//
// A caller whose context ends first (cancelled, or its own deadline) is not
// an outage: no policy applies, the decision is the zero Decision (denied,
// describing no state), and its error wraps ctx.Err() and not
// ErrUnavailable. A context already done makes no call; the static limits
// and the over-limit cache, which need no call, answer regardless.
//
// # Who decided
//
// Every decision is made by one of Redis, the over-limit cache, a static
// limit (Unlimited, DenyAll), the Outage policy (FailOpen, FailClosed,
// FallbackTo's limiter), or no one (the caller gave up). The error tells
// them apart where there is one: nil for Redis, the cache and the static
// limits (ErrCorrupt for Redis on a repaired state), ErrUnavailable or
// ErrRejected for the policy (and atomiclimit.ErrFallback beside them for
// FallbackTo's limiter, whose decision the doors take as the policy's: its
// denial is a 429, not a 503), the caller's ctx.Err() for no one. WithHook
// reports every decision (Allowed or Denied) and every error (Error) to a
// Hook, with its Source, which also tells apart the decisions made without
// an error, for metrics (the over-limit cache's hit rate); without a hook,
// a decision pays one branch.
//
// # The verbs
//
// A Limiter speaks the in-process limiters' grammar, less the forms that
// take the time (Redis TIME is the clock):
//
//   - Allow(ctx, key) reports whether one event may happen now, and takes
//     it: Take(ctx, key, 1)'s Allowed, in a call whose reply is one
//     integer.
//   - Take(ctx, key, n) decides a request for n, with the whole Decision
//     and a receipt (atomiclimit.RemoteReceipt): for New's GCRA, the TAT
//     the script stored, the script's TIME, and the key's latest stamp
//     max(E, Q), in µs on Redis TIME (for NewRule's rules, see "Every
//     rule"). It is
//     the zero Receipt when nothing was stored in Redis:
//     a denial, a peek (n = 0), n out of range, Unlimited and DenyAll, a
//     cache denial, and FailOpen's admissions. FallbackTo's admissions
//     carry the local limiter's receipt, and are given back there.
//   - Peek(ctx, key, n) is Take's decision, taking nothing.
//   - Refund(ctx, key, n, r) runs a second script on key alone; for New's
//     GCRA, at its TIME now: gcra.Params.Refund, exactly. When no give-back
//     that moved other admissions was made on key since the admission (the
//     key's epoch is at most the receipt's stamp), it gives back everything
//     of the admission still ahead of now that no later reservation depends
//     on, min(n·T, r − now, TAT − now, B·T − (TAT − r)): with nothing else
//     in between, the key is as if the admission had never been made (a
//     full bucket is deleted). Otherwise, when no reservation queued since
//     (nor did its queue stamp move), it gives back what is certainly the
//     admission's own, min(at + n·T − now, TAT − now), at its time at:
//     stricter than that by at most the time between Take and Refund; and
//     when one did, only what no admission after it can depend on
//     (gcra.Anything: at + n·T + T − TAT, often nothing). It never creates
//     quota, whatever was admitted, reserved or given back on key
//     meanwhile, by any process, and admissions are given back in any
//     order. A give-back that moves later admissions (TAT ≠ r) stamps the
//     key's epoch, max(E, Q) + 1 or now, whichever is later. n must be
//     Take's n, each receipt is given back once; the zero Receipt, n < 1
//     and n > B make no call.
//   - Reserve(ctx, key, n) and Wait(ctx, key), WaitN(ctx, key, n): below,
//     "Waiting".
//   - Reset(ctx, key) deletes key's state in Redis (one DEL in a script,
//     on key alone): the bucket is full again for every process, and this
//     process's over-limit cache forgets key.
//   - Quota(key) describes the parameters Redis decides with (T rounded
//     up), without a call.
//
// Take, Peek, Refund and Quota make a Limiter[K] an
// atomiclimit.KeyedLimiter[K], as the doors (httplimit, grpclimit) take
// every limiter, with no adapter. Their error is nil when Redis, the
// cache or the static limit decided (but for a repaired corrupt state,
// ErrCorrupt); on an outage it wraps ErrUnavailable and the cause, with
// the policy's decision (Refund: false), on a rejection ErrRejected; when
// ctx ended first it wraps ctx.Err(), as above.
//
// # Waiting
//
// Reserve and WaitN are atomiclimit.Limiter's ReserveN and WaitN kept in
// Redis, so that the waiters of every process are served in one order.
// For New's GCRA, a reservation is one script call (the decide script's
// op '4', gcra.Params.Reserve in µs on TIME): it pushes the key's TAT
// ahead by n·T from max(TAT, now), atomically, and replies the wait,
// max(TAT, now) + n·T − now − B·T, after which the tokens are due. The
// reservations of all processes are thus due in the order Redis ran them,
// each after the one before, and no instant has more than B due (no window
// [a, b] more than B + (b − a)/T: the gcra bound on their due times). The
// key's expiry covers the state reserved (⌈(TAT − now)/1 ms⌉ + 1 ms). A
// reservation may wait up to the nearest of ctx's deadline, WithMaxWait
// and gcra.MaxWait; one that would wait longer fails at once with
// atomiclimit.ErrDeadline and stores nothing. WaitN sleeps for the wait
// Redis replied, from when the reply arrived (never before the tokens are
// due on TIME): one round trip per waiter, no polling. In the tests, three
// Limiters on three clients sharing one key with 16 waiters each (48 in
// all, burst 4, T 2 ms) made one call per Wait, 1.0 per admitted request
// (TestWaitConcurrentInOrder).
//
// Reservation.Cancel gives back, in one more call, what no later
// reservation depends on (x/time/rate's rule, gcra.Params.Refund as in
// process), and nothing once its tokens are due; WaitN cancels when its
// ctx ends while it sleeps, with a context the end does not reach, bounded
// by WithTimeout. For that a give-back must know what in process its
// stripe's counters say: whether a give-back since shifted admissions, and
// whether a reservation since queued. A reservation that queues stamps the
// key (Q), a shifting give-back stamps its epoch (E), each stamp later than
// every one before; a receipt (Take's, or a reservation's) holds the
// latest stamp of its decision, and E or Q above it is the counter's
// change (script.go). The tests hold the Redis scripts to gcra's functions
// on random sequences of takes, reservations, cancels and give-backs,
// checking after every step that the admissions not given back conform
// (TestReserveMatchesGCRA, TestReserveCancelConcurrent).
//
// NewRule's windows have no queue: Reserve returns an error wrapping
// errors.ErrUnsupported, as in process, and WaitN takes (Take), and after
// a denial sleeps until the window admits, with a jitter of at most a
// quarter of that and one token's time, then takes again (WaitN says why).
// The Outage policies decide a reservation as they decide a Take: FailOpen
// admits at once, FailClosed fails, FallbackTo reserves on its local
// limiter (whose Reservation's Cancel is the local one's).
//
// A process of an earlier version of this module reads "TAT:E:Q" as a
// corrupt state and repairs it to the empty bucket, TAT = now + B·T: below
// the reservations queued beyond it, whose tokens then come on top of the
// requests it admits (up to the reserved backlog too many, once). Run
// Reserve and WaitN once every process of the prefix runs this version.
//
// # Keys
//
// A Limiter is keyed as an in-process limiter is: New and NewRule by
// strings, NewKeyed[K] and NewKeyedRule[K] by any K that
// atomiclimit.NewKeyed[K] and NewKeyedRule[K] take, so that a policy moves
// from a process to a fleet by its constructor alone (httplimit's client
// address is a netip.Prefix):
//
//	perIP, _ := atomiclimit.NewKeyed[netip.Prefix](atomiclimit.PerMinute(60), 60)
//	perIP, _ := redislimit.NewKeyed[netip.Prefix](rdb, atomiclimit.PerMinute(60), 60)
//
// The state of a key is held at one Redis key (Limiter.Key): the prefix
// (WithKeyPrefix, "atomiclimit:" otherwise), then the key written as
// follows, wrapped in a hash tag under WithHashTag ({…}, for Redis
// Cluster):
//
//   - a string (or a type whose underlying type is string): its bytes as
//     they are; "user:42" is held at "atomiclimit:user:42";
//   - a netip.Prefix: its address in its String form, "/" and its Bits in
//     decimal, which is Prefix.String for every valid prefix
//     ("2001:db8::/64", "192.0.2.1/32"; an invalid prefix, which httplimit
//     never passes, gets a text of its own, "invalid IP/-1" for the zero
//     Prefix, where String says "invalid Prefix" for them all);
//   - a netip.Addr: its String form ("192.0.2.1", "2001:db8::1",
//     "fe80::1%eth0");
//   - an integer, of any size, signed or not (int, int8 … int64, uint,
//     uint8 … uint64, uintptr, or a type defined on one): decimal ("-7",
//     "42");
//   - a byte array ([N]byte, or a type defined on one, such as a UUID):
//     its N bytes, as they are (Redis keys are binary-safe).
//
// Distinct keys of one type are distinct Redis keys: each encoding is
// one-to-one. Two types whose texts meet share states on one prefix (the
// string "2001:db8::/64" and that prefix, the string "42" and the integer
// 42): a fleet that keyed by p.String() keeps its states when it moves to
// keys of type netip.Prefix. Any other K (a float, a bool, a struct such as
// httplimit's Pair, an interface) needs WithKeyFunc, which writes the key
// as its function says, and replaces the encoding for the types above;
// without it NewKeyed returns ErrConfig.
//
// Writing the Redis key is the one allocation a key costs: a string key is
// concatenated with the prefix; any other
// encoding writes the prefix and its text into one buffer that becomes the
// string, one allocation too; WithKeyFunc's costs its function's and the
// concatenation. The over-limit cache, the Leased's cells and FallbackTo's
// limiter hold keys as they are, K, which costs nothing per decision.
//
// # A receipt from before a Reset
//
// Refund gives nothing to a state created after key's state expired (see
// refundLua for why). Reset is another matter, as is anything else that
// deletes a key before it is full again: a DEL, FLUSHALL, an eviction under
// maxmemory, a restart without persistence, a failover to a replica that
// lacked the key, and the repair of a corrupt value. The state that
// replaces the key cannot always be told from the one a receipt came from:
// a receipt from before the deletion, until its tokens are due (at the TAT
// it stored, within B·T of its Take), gives back up to its n·T to a new
// state that holds at least n·T beyond the receipt's time, and nothing to
// one that holds less (TestRefundAfterReset). The deletion already gave the whole bucket
// back; this adds at most n admissions per receipt that spans it. A door
// refunds within the request, so only a deletion that falls between a
// Take and its Refund exposes it.
//
// It is not closed, because no way to close it is cheap. For Reset alone,
// the script could leave a marker instead of deleting the key (the reset's
// time, kept B·T, before which no receipt gives back): a third field in
// the stored value, which every earlier process, this module's included,
// would read as corrupt, and a key kept B·T after each Reset. For a
// deletion Redis makes itself nothing is left to compare with, unless
// every state carries a stamp of its creation, in its value and in its
// receipts (whose three words already hold the TAT, the time and the
// epoch): a longer value for every key, for a bound that holds already.
//
// # Upgrading from redisgcra
//
// This module was redisgcra (github.com/atomiclimit/atomiclimit/redisgcra).
// The new import path makes the move a deliberate migration: do not run
// both against the same key prefix. This module stores what redisgcra last
// stored; what an earlier redisgcra does not know is the give-back epoch:
// once a give-back has moved other admissions of a GCRA key (a Refund out
// of order, which a door makes when a later policy denies), the key holds
// "TAT:E" (refundLua). A redisgcra process that has give-back epochs reads
// it as this module does; an older one does not know the form:
//
//   - one that has ErrCorrupt reads the value as corrupt and repairs it to
//     the empty bucket, the strictest state: it denies the key, for up to
//     B·T, though it had room (never looser);
//   - one from before ErrCorrupt reads the value as an absent key, a full
//     bucket: it admits up to a burst at once and overwrites the value, so
//     the key forgets what it held (up to B admissions too many, once per
//     such key).
//
// Either writes a bare TAT, which this module reads as a state of epoch 0,
// as it reads every GCRA value redisgcra wrote (TestUpgradeFromRedisgcra
// runs both former scripts on such a value; TestRefundOldValues decides
// and gives back on a bare TAT). So move in one of two ways:
//
//   - Cut over: stop every redisgcra process before the first redislimit
//     process decides on the prefix. The new processes carry on from the
//     keys' states as the old ones left them.
//   - Roll over on a new prefix (WithKeyPrefix): while both fleets run,
//     each decides on its own keys, so a key may be admitted up to its
//     limit by each (twice the limit at most, for the overlap). The old
//     prefix's keys expire on their own, each once it decides as an absent
//     key does (within B·T for GCRA).
//
// # The over-limit cache
//
// WithOverLimitCache keeps, per denied key, a lower bound of its TAT on this
// process's monotonic clock. While that bound alone denies a request, the
// limiter answers without a round trip: one lock-free map load, one clock
// read, no allocation. Since admissions only raise TAT, a cached denial is
// one Redis would also give (see cache.go for the argument). Refund lowers
// TAT: a bound recorded while the refunded admission counted may deny for
// up to the n·T given back after Redis would admit (the refunding process
// forgets its bound; others' age out).
//
// Resets lower TAT too, and those made elsewhere (DEL, FLUSHALL, Reset in
// another process, a restart without persistence, a failover to a replica
// that lacked the key) are invisible to this process. So an entry answers
// only for the max age (WithOverLimitCacheMaxAge, 1s by default)
// after the Redis denial that last refreshed it: that is the cache's whole
// staleness after any reset or refund elsewhere. Reset in this process
// forgets the key at once. Reservations raise TAT as admissions do, and a
// Cancel that gives back lowers it as Refund does (this process forgets its
// entry); Reserve and WaitN ask Redis whatever the cache holds.
//
// # Leases
//
// A Leased (NewLeased) spends a Limiter's tokens from leases: a process takes
// up to k tokens of a key in one round trip (the decide script's lease op:
// as many as Redis has, up to k, but nothing unless the request fits) and
// spends them locally with one CAS on one word, which holds the lease's
// tokens left and its expiry. The lease lives max(k·T, minLife) from the
// moment its request was sent, on the process's monotonic clock; its
// tokens are never spent after that, and never handed back: they are
// dropped. A process holds at most one lease of a key: it asks for a new
// one under the key's lock, after dropping what is left of the old. Its
// verbs are the Limiter's Allow and Take; a decision made from a lease
// reports, as Remaining, the tokens left in the lease (Leased.Take).
//
// The key's lock and lease live in a cell, which the process frees once the
// key has asked for no lease for 2·L_max (Leased.Sweep, and a sweep Leased
// starts on a goroutine of its own). Freeing keeps the one lease: the sweep
// takes the cell's lock without waiting (a cell whose refill is in flight
// is kept), drops its lease, marks it dead, and only then deletes it from
// the map; a refill that had found the cell and locks it after that finds
// it dead and goes back to the map. So a freed cell leases nothing more,
// and the key's next cell is made after it was dropped and marked: the
// leases of a key in a process, over all its cells, are asked for one at a
// time, each after the last was dropped.
//
// What counts: a leased token is admitted at the clock reading its spend
// decided on, which the spend takes after loading the lease, before its
// CAS. A request for more than maxLease tokens is the Limiter's, one call,
// admitted at the TIME reading of its script. The Outage policy's
// admissions are outside the bound, as they are for the Limiter.
//
// The fleet bound. Let P processes (Leased values) share a key, with
// maxLease k_max (at most B) and L_max = max(k_max·T, minLife), and let the
// clocks (Redis TIME, each process's monotonic clock) measure real time:
// no steps and no drift. Over any interval [a, a+d], the fleet admits at
// most
//
//	B + d/T + min(P·k_max, L_max/T)
//
// tokens of the key. Proof:
//
//  1. Redis grants each lease (and each direct admission) as one GCRA
//     admission of that many tokens at its TIME reading, so the tokens
//     granted in any interval of length D are at most B + D/T (package
//     gcra; T rounded up only lowers it).
//  2. A token is admitted after it was granted: its spend read the clock
//     after loading the lease, which was stored after Redis replied.
//  3. Within L_max of its grant: the expiry is sent + life, rounded down to
//     2^20 ns, with sent read before the request, hence before the grant;
//     a spend needs a reading below the expiry; and life ≤ L_max. So the
//     tokens admitted in [a, a+d] were granted in [a − L_max, a+d], at most
//     B + (d + L_max)/T by 1.
//  4. At any instant a process holds at most k_max tokens of a key that
//     were granted and are neither admitted nor dropped: those of its one
//     lease, in flight or stored (a spend's CAS fails once a refill or a
//     sweep has dropped the lease; a freed cell's lease is dropped before
//     the key's next cell exists, and a freed cell asks for none). A token
//     admitted in [a, a+d] was granted in [a, a+d] (at most B + d/T by 1)
//     or before a, and then it was held at a by its process, its CAS being
//     after its reading ≥ a: at most P·k_max more.
//
// The bound is not exact: a dropped token was taken from Redis and never
// admitted, so the fleet may admit less than B + d/T while leases expire.
// The tests (lease_test.go) run 4 processes of 4 goroutines on one key of
// a real server and check the bound on every window of the admissions;
// lease_sweep_test.go checks it again with cells freed under the spends
// and refills in a tight loop.
//
// k adapts per key and process. It starts at 1; at each refill it doubles
// (up to k_max) if the old lease ran out before it expired, halves (down
// to 1) if it expired with tokens left, and stays if it expired empty. A
// key a process uses less than once per lifetime settles at k = 1, one
// round trip per decision, stranding nothing; a busy key that turns quiet
// strands fewer than 2·k_max tokens on its way down. A key whose cell was
// freed starts again at k = 1. The costs: a refill
// drops what is left (fewer than n) when a request needs more, every
// denial is a round trip, and a key's refills in one process take turns
// (the lock).
//
// # Every rule
//
// NewRule decides an atomiclimit.Rule in Redis, one script call per
// decision on Redis TIME, with the decisions an in-process limiter of the
// same rule (atomiclimit.NewKeyedRule) makes at the instants TIME reports,
// every field of them. The rules, and what "the same" means in a fleet:
//
//   - GCRA: New's limiter.
//   - FixedWindowUTC: windows on the UTC boundaries offset + k·period,
//     which every process computes alike. FixedWindow is rejected
//     (ErrConfig and errors.ErrUnsupported): its windows start when one
//     limiter is created, an instant a fleet does not share;
//     FixedWindowUTC(n, period, 0) is the fleet's version of it.
//   - SlidingCounter: its two fixed windows are on the UTC boundaries
//     k·period (an in-process counter has them where its limiter starts:
//     the two agree when that is on such a boundary).
//   - SlidingLog: exact; N expiries per key.
//   - Rolling: its slices are on the UTC boundaries k·slice, as the
//     counter's windows.
//   - AnchoredWindow: a window opens at the first admission after the last
//     one ended, its anchor rounded up to a multiple of the in-process
//     resolution g = 2^max(0, bits.Len(n)−2) ns (1 ns for n ≤ 3, 32 ns
//     for n ≤ 127, 16 µs for n < 2^16), counted from the Unix epoch; an
//     in-process limiter counts it from its own epoch, and the two agree
//     when that epoch is a multiple of g. Anchors are kept in ns exactly (as
//     µs and the ns beyond them), so windows end between microseconds as
//     in process. n up to 2^51 − 1 (ErrConfig beyond).
//   - Bands of these: all or nothing, in one call and one Redis key.
//
// A key's state is one Redis string of 8-byte words, big-endian, the bands'
// words one after another (rule_script.go draws the layout): GCRA 1 word (its
// TAT), the fixed window 2 (window index, count), the counter 3 (window index,
// the previous and the current count), the log 1 + N (its head, then the expiry
// of each of its last N admissions): 8·(N + 1) bytes for the log, as in
// process; the rolling window 2 + 2K (its head's slice and count, then each of
// its K slots' slice and count: twice the in-process words, whose index and
// count share one word); the anchored window 3 (its anchor's µs, the ns
// beyond them, the count). Redis adds its own per key (MEMORY USAGE, Redis 7.0, a
// key name of about 20 bytes: 104 bytes for a window or a log of 2, 968 for a
// log of 100, 520 for a rolling day by the hour). An absent key reads as zeros,
// each algorithm's fresh state. Only an admission writes (every band's new
// words, and the expiry); a denial, a peek and an n no state admits write
// nothing. The key expires ⌈I/1 ms⌉ + 1 ms after the admission, I being the
// Decision's ResetAfter: the time until the state decides as an absent key
// does, so expiry changes no decision. A value that is not a state of the
// rule (another type or length, a word of 2^53 or more, a state idle later
// than any the rule writes with no expiry, or more than twice as late with
// one) is repaired as New's TAT is, in
// the call that finds it: every band's strictest state at now (a window's
// whole count used, every slot of the log expiring at now + W), expiring as
// every state does; the call is decided on it (denied, by Redis, even
// under FailOpen) and its error wraps ErrCorrupt. The key is thus never
// unlimited and never locked out for ever: it refills within the longest idle
// time of its bands.
//
// Bands are decided as in process (algo's Set: check every band, then
// take from all), but with nothing between the check and the writes: no
// band can deny late, so nothing is ever refunded. All the bands of a key
// are in its one Redis key, so the script names one key: one Cluster slot,
// with or without WithHashTag (which still puts a user's limiters of
// several prefixes in one slot).
//
// The script decides Allowed and writes; it replies the state it read, and the
// Limiter rebuilds the Decision from it with the in-process code: gcra.Params
// and the window package's FixedParams, CounterParams, RollingParams and
// AnchoredParams (the very functions in-process limiters run), on a time base
// of the band's own whose window 0 is now's (K slices before it for the
// rolling window, whose words are rebuilt there; a multiple of g at or before
// the anchor for the anchored window); for the log, whose in-process Decision reads the
// whole ring, LogRing's formulas on the four values they need (the expired
// count, the oldest, second and latest expiries). The two sides' Allowed are
// compared on every call (a mismatch is counted; the tests assert none). The
// shared vectors (vectors_rules_test.go: hand-written timelines and random
// ones, with stale and backward times, refunds, n out of range) run every rule
// through an in-process limiter and a real redis-server, and a 3-master Redis
// Cluster, and fail on any difference.
//
// Take returns a receipt for a rule of one fixed, counter, rolling or anchored
// band: the window or slice the admission was counted in (+1); the anchored
// window's anchor and its count after the admission. Refund then gives n back
// exactly as in process (from that window's count while the state counts it,
// from the counter's previous count once it has moved on, and nothing once the
// window has left or counts less than n), in one call that reads no clock, but
// for the anchored window's first admission given back with others after it:
// that window then opens at the give-back's TIME (its anchor rounded up to g),
// as in process, and the key's expiry moves to its new end. The log's and
// bands' receipts are 0 and their Refund makes no call, as in process
// (Quota().Refunds()). Quota is the in-process Quota (T rounded up for a GCRA
// band, as New's). The Outage policies apply as to New's limiters, with the
// rule's bounds: FailOpen admits 1 ≤ n ≤ the most a state admits (1 for the
// log); FailClosed's RetryAfter hint is Window/Limit of Quota, at most a
// second. WithOverLimitCache is GCRA's only (ErrConfig and
// errors.ErrUnsupported).
//
// # Microseconds, and why they never make Redis more permissive
//
// Three places meet Redis's resolution of 1µs:
//
//   - The clock. Redis TIME is whole µs, so every decision is made at a
//     whole µs; the decisions are the in-process ones at those instants,
//     and every bound the in-process algorithms prove on the times their
//     decisions are made at (N per window, 2N − 1 in a rolling window for
//     the counter, N in every rolling window for the log, Q in every K
//     consecutive slices for the rolling window, B + d/T for GCRA) holds
//     on TIME's readings.
//   - The parameters. A window, a slice and a UTC offset must be whole µs
//     (ErrConfig): they are not rounded, so the limits are
//     exactly the user's. The anchored window's anchors are rounded up to
//     g as in process, and kept to the ns. A GCRA band's interval, which
//     the rate only implies, is rounded up as New rounds it:
//     B + d/T_redis ≤ B + d/T.
//   - The arithmetic. Every value the script handles is an integer below
//     2^53 µs, exact in Lua's doubles: times (until the year 2255), a time
//     plus two windows (W ≤ 2^61 ns, until 2109, as for GCRA), counts. The
//     floor divisions are exact (rule_script.go proves it), and the
//     counter's test prev·(W − pos) ≤ (N − cur − n)·W, whose products need
//     up to 106 bits, is computed on 18-bit limbs, exactly: doubles would
//     get it wrong (a vector of 8,428,446 per day shows one).
//
// So no step rounds a quantity the decision depends on, other than TIME
// itself. The Decision's durations are the in-process ones, in ns: the
// counter's waits may fall between microseconds (RetryAfter 166666667ns);
// the request fits from the first TIME reading at or after that instant,
// within 1µs of it.
package redislimit
