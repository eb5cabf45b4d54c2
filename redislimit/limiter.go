package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// A Limiter is a keyed rate limiter whose state lives in Redis: every
// process that builds a Limiter with the same rule (New's GCRA limit and
// burst, or NewRule's rule) and key prefix on the same Redis shares one
// state per key, at the Redis key Key writes. Each decision is one round
// trip (one EVALSHA); the clock is Redis TIME, so the processes' clocks play
// no part. It is safe for concurrent use.
//
// A denial writes nothing in Redis. New's decisions are gcra's, with the
// emission interval rounded up to whole microseconds (see the package doc and
// Params); NewRule's are the in-process rule's. Decisions for Unlimited and
// DenyAll need no Redis and make no call.
//
// Its methods are the in-process limiters' verbs: Allow(ctx, key) for one
// event, Take(ctx, key, n) for n with the whole decision and a receipt,
// Peek to ask without taking, Refund to give an admission back, Reset to
// forget a key, Reserve(ctx, key, n) and Wait(ctx, key) to be served when
// tokens come, in one order with every process. There is no form that
// takes the time: Redis TIME is the clock. A Limiter[K] is an atomiclimit.KeyedLimiter[K] (Take, Peek,
// Refund, Quota: contract.go), so the doors take it as they take the
// in-process limiters of the same key type: a policy moves between a
// process and a fleet by its constructor alone (NewKeyed for
// atomiclimit.NewKeyed, NewKeyedRule for atomiclimit.NewKeyedRule). Key
// says which Redis key holds a key's state (the package doc, "Keys").
type Limiter[K comparable] struct {
	core
	// keys writes a K into its Redis key (keys.go). Immutable.
	keys  keyCodec[K]
	cache *overLimitCache[K] // nil unless WithOverLimitCache
	// local is FallbackTo's limiter, nil under the other Outage policies.
	local *atomiclimit.Keyed[K]
}

// core is the part of a Limiter that does not depend on its key type: the
// rule and its scripts, the client and the options. It reaches Redis (call,
// classify.go) and tells the hook; the remote algorithms take it. Every
// field is immutable once New returns.
type core struct {
	client redis.Scripter
	// params are the parameters Redis decides with: the user's interval
	// rounded up to whole microseconds.
	params gcra.Params
	limit  gcra.Limit // as the user gave it
	// static: Unlimited or DenyAll, decided from params alone, without Redis.
	static bool
	// argT and argSpan are T and B·T in whole µs, as the script's decimal
	// arguments, boxed once.
	argT, argSpan any

	quota atomiclimit.Quota // Quota's answer for every key

	// remote decides in Redis: GCRA's scripts (New), or a rule's (NewRule).
	// Every decision and refund goes through it.
	remote remote
	// rule is the rule given to NewRule; nil for New.
	rule *atomiclimit.Rule
	// maxN is the most one request can take from a state: the burst, a
	// window's count, 1 for the log, the least of them for bands (0 for
	// DenyAll). Larger requests are never admitted: they only read the
	// state, and the Outage policies deny them.
	maxN int
	// hint is FailClosed's RetryAfter: one interval (Quota's Window/Limit,
	// T for GCRA), at most a second.
	hint time.Duration

	prefix  string
	hashTag bool
	timeout time.Duration // 0: none beyond the context's and the client's
	outage  outageKind
	breaker *breaker // nil unless WithBreaker
	// hook, if not nil, is told of every decision (WithHook): a copy of the
	// user's, with at least one field set.
	hook       *Hook
	hookPolicy string

	// maxWait is the longest a reservation waits, in ns (WithMaxWait;
	// gcra.MaxWait by default), before ctx's deadline shortens it.
	maxWait int64

	// epoch is the over-limit cache's and the breaker's time base: local
	// times are time.Since(epoch) in ns, which reads only the monotonic
	// clock.
	epoch   time.Time
	nowHook func() int64 // tests only: replaces time.Since(epoch)
	// newTimer replaces time.NewTimer in WaitN (tests only).
	newTimer func(time.Duration) (<-chan time.Time, func() bool)
	// onReserved hears every reservation's reply, before the local time
	// its Delay counts from is read (tests only).
	onReserved func(ctx context.Context, ok bool, wait time.Duration, tk taken)
}

// A result is the outcome of one decision: the Decision that Take, Peek
// and Allow return, who made it (the Source the Hook hears) and the error
// Take and Peek return with it.
type result struct {
	gcra.Decision
	// Source says who decided.
	Source Source
	// Err is Take's error (see Take): nil when Source is SourceCache or
	// SourceStatic, and when it is SourceRedis but for a repaired corrupt
	// state (ErrCorrupt).
	Err error

	// receipt is Take's: with opReceipt, the RemoteReceipt of an admission
	// Redis stored; that of FallbackTo's limiter for an admission it made
	// (Refund gives it back there); otherwise the zero Receipt.
	receipt atomiclimit.Receipt
}

// A Source says who made a decision, for the Hook (which is told it with
// every event): Redis, or one of what answers without it. The decision's
// error says the same in the cases that have one (ErrUnavailable and the
// policy in force, ErrRejected, the caller's ctx.Err()); the Hook is where
// the decisions made without an error (by Redis, the over-limit cache or a
// static limit) are told apart.
type Source uint8

const (
	// SourceRedis: the script, in one round trip.
	SourceRedis Source = iota
	// SourceCache: the over-limit cache, without a round trip (denials only).
	SourceCache
	// SourceStatic: the limit alone (Unlimited, DenyAll), without Redis.
	SourceStatic
	// SourceFailOpen: Redis failed, and the FailOpen policy admitted.
	SourceFailOpen
	// SourceFailClosed: Redis failed, and the FailClosed policy denied; or
	// Redis rejected the call (ErrRejected) under FailClosed or FailOpen,
	// which never admits on a rejection.
	SourceFailClosed
	// SourceFallback: Redis failed or rejected the call, and the local
	// limiter of FallbackTo decided: the error wraps
	// atomiclimit.ErrFallback beside the outage or rejection.
	SourceFallback
	// SourceCaller: the caller's context ended (cancelled, or past its own
	// deadline) before Redis answered. That is not an outage: no policy
	// applies, and the Decision is the zero one (denied, and every field 0:
	// it describes no state). Whether a call that reached Redis changed
	// anything is unknown.
	SourceCaller
)

// String returns the source's name, e.g. "redis", "cache", "fail-open".
func (s Source) String() string {
	switch s {
	case SourceRedis:
		return "redis"
	case SourceCache:
		return "cache"
	case SourceStatic:
		return "static"
	case SourceFailOpen:
		return "fail-open"
	case SourceFailClosed:
		return "fail-closed"
	case SourceFallback:
		return "fallback"
	case SourceCaller:
		return "caller"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// defaultKeyPrefix starts every Redis key unless WithKeyPrefix says otherwise.
const defaultKeyPrefix = "atomiclimit:"

// New returns a Limiter keyed by strings that admits limit's rate with the
// given burst per key: NewKeyed[string](client, limit, burst, opts...).
func New(client redis.Scripter, limit gcra.Limit, burst int, opts ...Option) (*Limiter[string], error) {
	return NewKeyed[string](client, limit, burst, opts...)
}

// NewKeyed returns a Limiter keyed by K that admits limit's rate with the
// given burst per key, deciding in Redis through client (a *redis.Client,
// *redis.ClusterClient or *redis.Ring, or anything else that implements
// redis.Scripter): atomiclimit.NewKeyed[K](limit, burst)'s limit, kept in
// Redis for a fleet.
//
// Burst is the capacity, with no "+1" convention (see package gcra). The
// emission interval is rounded up to whole microseconds; Params reports the
// result. A key becomes a Redis key as the package doc says ("Keys"): K is
// a string, an integer, a byte array, a netip.Prefix or a netip.Addr (or a
// type defined on a string, an integer or a byte array), or WithKeyFunc
// says how. Every error wraps ErrConfig: a key type with no encoding, a
// bad option, and a bad limit or burst (which wraps gcra's sentinel too).
// NewKeyed makes no call to Redis (the first decision loads the script).
func NewKeyed[K comparable](client redis.Scripter, limit gcra.Limit, burst int, opts ...Option) (*Limiter[K], error) {
	if client == nil {
		return nil, errNilClient
	}
	p, err := gcra.NewParams(limit, burst)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	l := &Limiter[K]{core: core{client: client, limit: limit, epoch: time.Now()}}
	switch {
	case p.IsUnlimited() || p.Burst() == 0: // Unlimited, DenyAll
		l.params, l.static = p, true
	default:
		// The rounding rule: T up to whole microseconds (package doc). As
		// gcra rejects rates above one per nanosecond rather than round them
		// to another limit, a rate above one per microsecond is rejected.
		if p.Interval() < time.Microsecond {
			return nil, fmt.Errorf("%w: %v", errRateTooHigh, limit)
		}
		us := (int64(p.Interval()) + 999) / 1000
		l.params, err = gcra.NewParams(gcra.Every(time.Duration(us)*time.Microsecond), burst)
		if err != nil {
			return nil, fmt.Errorf("%w: interval rounded up to %dµs: %w", ErrConfig, us, err)
		}
		l.argT = strconv.FormatInt(us, 10)
		l.argSpan = strconv.FormatInt(int64(l.params.Span())/1000, 10)
	}

	l.quota = atomiclimit.Quota{Kind: "gcra", Limit: l.params.Burst(), Window: l.params.Span(), IdleAfter: l.params.Span(), String: l.String()}
	if l.params.IsUnlimited() {
		l.quota.Limit, l.quota.Window, l.quota.IdleAfter = math.MaxInt, 0, 0
	}
	l.remote, l.maxN, l.hint = gcraRemote{}, l.params.Burst(), min(l.params.Interval(), time.Second)

	cfg := config{prefix: defaultKeyPrefix, outage: FailClosed}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.hashTag && strings.ContainsAny(cfg.prefix, "{}") {
		return nil, fmt.Errorf("%w: %q", errInvalidPrefix, cfg.prefix)
	}
	if cfg.timeout < 0 {
		return nil, fmt.Errorf("%w: %v", errInvalidTimeout, cfg.timeout)
	}
	if cfg.timeout > 0 && !contextTimeouts(client) {
		return nil, fmt.Errorf("%w (set it in the client's options, or use WithTimeout(0) and the client's ReadTimeout)", errContextTimeoutDisabled)
	}
	if cfg.cacheSet && cfg.cacheSize < 1 {
		return nil, fmt.Errorf("%w: %d", errInvalidCacheSize, cfg.cacheSize)
	}
	if !cfg.outage.valid() {
		return nil, errInvalidOutage
	}
	if cfg.outage.kind == outageFallback {
		local, ok := cfg.outage.local.(*atomiclimit.Keyed[K])
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: FallbackTo's limiter is a %T, and the Limiter's keys are %v", errInvalidOutage, cfg.outage.local, reflect.TypeFor[K]())
		case local == nil:
			return nil, errInvalidOutage
		}
		l.local = local
	}
	if l.keys, err = newKeyCodec[K](cfg.keyFunc); err != nil {
		return nil, err
	}
	l.prefix, l.hashTag, l.timeout, l.outage = cfg.prefix, cfg.hashTag, cfg.timeout, cfg.outage.kind
	l.maxWait = int64(gcra.MaxWait)
	if cfg.maxWaitSet {
		if cfg.maxWait < 0 {
			return nil, fmt.Errorf("%w: %v", errInvalidMaxWait, cfg.maxWait)
		}
		l.maxWait = min(int64(cfg.maxWait), int64(gcra.MaxWait))
	}
	maxAge, err := l.applyRobust(&cfg.robust)
	if err != nil {
		return nil, err
	}
	if cfg.cacheSet && !l.static {
		l.cache = newOverLimitCache[K](cfg.cacheSize, maxAge)
	}
	return l, nil
}

// contextTimeouts reports whether client honours context deadlines on its
// connections. go-redis clients do only with ContextTimeoutEnabled; other
// implementations are assumed to.
func contextTimeouts(client redis.Scripter) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

// Allow reports whether one event for key may happen now, and takes it if
// so: Take(ctx, key, 1)'s Allowed, without the rest of the decision and the
// receipt, which it does not ask Redis for. When Redis does not decide, the
// Outage policy's answer is returned as Take's is, and its error goes to
// the Hook only.
func (l *Limiter[K]) Allow(ctx context.Context, key K) bool {
	if l.cache == nil || l.hook != nil {
		return l.decide(ctx, key, 1, opTake, -1).Allowed
	}
	// The cache's check without the whole decision: Admit, not Decide,
	// needs no division.
	sent := l.localNow()
	if l.cache.denies(key, &l.params, sent, 1) {
		return false
	}
	return l.decideRemote(ctx, key, 1, opTake, -1, sent).Allowed
}

// decide is Allow (opTake), Peek (opPeek) or Take (opReceipt, with the
// receipt). nowMicros ≥ 0 replaces Redis TIME (tests only). It reports the
// result to the hook.
func (l *Limiter[K]) decide(ctx context.Context, key K, n int, o op, nowMicros int64) result {
	r := l.decideUnobserved(ctx, key, n, o, nowMicros)
	if l.hook != nil {
		l.observe(r, n, o != opPeek)
	}
	return r
}

// decideUnobserved is decide without the hook.
func (l *Limiter[K]) decideUnobserved(ctx context.Context, key K, n int, o op, nowMicros int64) result {
	if l.static {
		_, d := l.params.Decide(0, 0, n)
		return result{Decision: d, Source: SourceStatic}
	}
	var sent int64
	if l.cache != nil {
		// First read the local clock, then ask Redis: the cache's bound on
		// TAT is measured from before Redis read TIME (cache.go).
		sent = l.localNow()
		if d, ok := l.cache.deny(key, &l.params, sent, n); ok {
			return result{Decision: d, Source: SourceCache}
		}
	}
	return l.decideRemote(ctx, key, n, o, nowMicros, sent)
}

// decideRemote is decide after the cache (if any) did not answer: one round
// trip, or the Outage policy. sent is the local time read before it, for
// the cache.
func (l *Limiter[K]) decideRemote(ctx context.Context, key K, n int, o op, nowMicros, sent int64) result {
	if uint64(int64(n)-1) >= uint64(l.maxN) {
		o = opPeek // n < 1 or n > maxN: a peek, or never admitted: only read the state
	}
	d, rc, err := l.remote.decide(ctx, &l.core, l.Key(key), n, o, nowMicros)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		// The policy's admissions have no receipt of Redis: Redis holds
		// nothing of theirs (FallbackTo's carry the local limiter's: see
		// Take).
		return l.fail(key, n, o != opPeek, err)
	}
	// err is nil, or reports a corrupt state that the script repaired
	// before deciding: the decision is Redis's all the same.
	if !d.Allowed && d.ResetAfter > 0 && l.cache != nil {
		// Only GCRA limiters have a cache: a denial's ResetAfter is the debt.
		l.cache.record(key, sent+int64(d.ResetAfter)-cacheMargin, sent)
	}
	return result{Decision: d, Source: SourceRedis, Err: err, receipt: rc.remote()}
}

// deadlineErr adds ctx's error to err when ctx is done or past its
// deadline: go-redis reports a deadline that reached the connection as an
// i/o timeout, which may fire a moment before the context's own timer.
func deadlineErr(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if cerr == nil {
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			cerr = context.DeadlineExceeded
		}
	}
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// callerDone returns the error of the caller's ctx once it is done or past
// its deadline, else nil. A deadline that reached the connection may fail the
// call a moment before ctx's own timer fires, hence the second test.
func callerDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded // what ctx.Err() is about to return
	}
	return nil
}

func callerErr(cerr, err error) error {
	if err == nil || errors.Is(err, cerr) {
		return fmt.Errorf("redislimit: caller gave up: %w", cerr)
	}
	return fmt.Errorf("redislimit: caller gave up: %w (redis: %w)", cerr, err)
}

// fail returns the decision for a call that Redis did not decide, from
// call's classified error: the Outage policy's for an outage; FallbackTo's
// limiter's or a denial for a rejection (never FailOpen's admission); the
// zero Decision, decided by no one, when the caller gave up.
func (l *Limiter[K]) fail(key K, n int, take bool, err error) result {
	kind := l.outage
	switch {
	case isUnavailable(err):
	case isRejected(err):
		if kind != outageFallback {
			kind = outageClosed
		}
	default:
		return result{Source: SourceCaller, Err: err}
	}
	switch kind {
	case outageFallback:
		if take {
			// The local limiter's Take: its receipt lets a door give the
			// admission back when another policy denies the request. The
			// local limiter is in process: it never blocks, ignores ctx, and
			// fails only when it is full (ErrTooManyKeys, kept in the error).
			d, rc, lerr := l.local.Take(context.Background(), key, n)
			return result{Decision: d, Source: SourceFallback, Err: fallbackErr(err, lerr), receipt: rc}
		}
		d, _ := l.local.Peek(context.Background(), key, n)
		return result{Decision: d, Source: SourceFallback, Err: fallbackErr(err, nil)}
	case outageOpen:
		if uint64(int64(n)-1) < uint64(l.maxN) {
			return result{Decision: gcra.Decision{Allowed: true}, Source: SourceFailOpen, Err: err}
		}
		return result{Decision: gcra.Decision{RetryAfter: gcra.Never}, Source: SourceFailOpen, Err: err}
	}
	// FailClosed. The state is unknown; RetryAfter is a hint, one interval
	// (at most a second), except for requests that can never pass.
	retry := l.hint
	if uint64(int64(n)-1) >= uint64(l.maxN) {
		retry = gcra.Never
	}
	return result{Decision: gcra.Decision{RetryAfter: retry}, Source: SourceFailClosed, Err: err}
}

// fallbackErr is the error of a decision FallbackTo's limiter made for a
// call Redis did not decide (err, an outage or a rejection): err, and
// atomiclimit.ErrFallback, so that a door takes the decision as the
// policy's (a denial is its 429, not a 503) and still hears the outage;
// and local's own error, if it had one (a full local limiter's
// ErrTooManyKeys: a door answers that as the capacity refusal it is). The
// breaker's error has its wrapped form made once, as it has itself: a
// decision while the breaker is open allocates nothing for it.
func fallbackErr(err, local error) error {
	switch {
	case local != nil:
		return fmt.Errorf("%w (%w: %w)", err, atomiclimit.ErrFallback, local)
	case err == errCircuitOpen:
		return errFallbackCircuitOpen
	}
	return fmt.Errorf("%w (%w)", err, atomiclimit.ErrFallback)
}

// errFallbackCircuitOpen is fallbackErr(errCircuitOpen, nil), made once.
var errFallbackCircuitOpen = fmt.Errorf("%w (%w)", errCircuitOpen, atomiclimit.ErrFallback)

// Params returns the parameters Redis decides with: the limit's interval
// rounded up to whole microseconds, and the burst. Decisions are exactly
// Params().Decide's on Redis's clock. It is nil for a limiter of another
// rule (NewRule).
func (l *Limiter[K]) Params() *gcra.Params {
	if l.rule != nil {
		return nil
	}
	return &l.params
}

// Limit returns the limit as given to New (before rounding); the zero
// Limit for a limiter of another rule (NewRule).
func (l *Limiter[K]) Limit() gcra.Limit { return l.limit }

// String describes the limiter as the user wrote it, e.g. "100/s, burst 10
// in redis", or for NewRule the rule, e.g. "60/min sliding log in redis".
func (l *Limiter[K]) String() string {
	if l.rule != nil {
		return l.rule.String() + " in redis"
	}
	return atomiclimit.GCRA(l.limit, l.params.Burst()).String() + " in redis"
}

// scriptMismatches counts decisions where the script and gcra disagreed on
// Allowed: always 0 (the tests check it).
var scriptMismatches atomic.Uint64

// localNow is the over-limit cache's and the breaker's clock: ns since
// c.epoch, monotonic.
func (c *core) localNow() int64 {
	if c.nowHook != nil {
		return c.nowHook()
	}
	return int64(time.Since(c.epoch))
}
