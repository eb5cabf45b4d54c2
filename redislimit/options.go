package redislimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// An Option configures a Limiter.
type Option interface{ apply(*config) }

type config struct {
	prefix    string
	hashTag   bool
	timeout   time.Duration
	outage    Outage
	cacheSize int
	cacheSet  bool
	keyFunc   any          // WithKeyFunc's func(K) string (keys.go)
	robust    robustConfig // options_robust.go

	maxWait    time.Duration
	maxWaitSet bool
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithKeyPrefix sets the prefix of every Redis key ("atomiclimit:"
// otherwise): the Redis key is the prefix and the key (Limiter.Key).
// Limiters with different limits on the same keys need different prefixes:
// a key's state means nothing under another limit.
func WithKeyPrefix(prefix string) Option {
	return optionFunc(func(c *config) { c.prefix = prefix })
}

// WithHashTag wraps the key in a Redis Cluster hash tag: the Redis key is
// prefix + "{" + key + "}", so that Redis Cluster places it by key alone.
// Several limiters (bands: per second, per day) with different prefixes then
// keep one key's buckets in one slot, and one node. The prefix must not
// contain '{' or '}' (ErrConfig).
func WithHashTag() Option {
	return optionFunc(func(c *config) { c.hashTag = true })
}

// WithTimeout bounds every call to Redis: after d, the Outage policy decides
// and the call's error wraps context.DeadlineExceeded. 0, the default, sets no
// bound beyond the caller's context and the client's own timeouts (in
// go-redis v9.22, 5s to read, with retries and redials on top: a request
// waited 5s for a paused server and 1.7s for one that refused connections).
//
// The deadline covers the whole call: the wait for a pooled connection, the
// dial, the write, the read, and the EVAL after a NOSCRIPT. go-redis
// applies a context's deadline to the connection only when the client's
// ContextTimeoutEnabled is set; New rejects WithTimeout on a
// *redis.Client, *redis.ClusterClient or *redis.Ring without it
// (ErrConfig), because the bound would not hold. Set the
// client's MaxRetries to -1 and DialerRetries to 1 as well: otherwise a
// call to a server that refuses connections sleeps between retries and
// redials until the deadline, instead of failing at once (the package
// doc, "When Redis is slow or down", has the measurements).
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.timeout = d })
}

// WithOutage sets what decides when Redis does not: FailClosed (the
// default), FailOpen or FallbackTo(local).
func WithOutage(o Outage) Option {
	return optionFunc(func(c *config) { c.outage = o })
}

// WithOverLimitCache keeps, for up to about size denied keys, what their
// last denial revealed, and answers later requests that it alone shows must
// be denied without a round trip: one lock-free map load and a clock read,
// no allocation. A cached denial is one Redis would give too (cache.go has
// the argument); its RetryAfter can be short by at most the round trip of
// the denial it came from (plus 1µs), never long. The exception is Refund,
// which lowers a key's TAT by at most the n·T given back: an entry recorded
// while the admission counted may deny for up to that long after Redis
// would admit (the refunding process forgets its entry; other processes'
// age out).
//
// Entries go stale once the bucket could admit again; when the cache is
// full, a new denial first removes stale entries (at most every 100ms), and
// is not cached if that frees no room.
func WithOverLimitCache(size int) Option {
	return optionFunc(func(c *config) { c.cacheSize, c.cacheSet = size, true })
}

// WithMaxWait bounds how long Reserve and WaitN wait for their tokens, d
// at most (gcra.MaxWait, about 36 years, otherwise; a larger d is that),
// before ctx's deadline shortens it: a request whose tokens would be due
// later fails at once with atomiclimit.ErrDeadline, and takes nothing.
// d = 0 reserves only tokens available now. A negative d is
// ErrConfig.
func WithMaxWait(d time.Duration) Option {
	return optionFunc(func(c *config) { c.maxWait, c.maxWaitSet = d, true })
}

// An Outage is what decides when Redis cannot: the call failed, or the
// timeout passed. Use FailClosed, FailOpen or FallbackTo; the zero Outage is
// invalid.
type Outage struct {
	kind outageKind
	// local is FallbackTo's *atomiclimit.Keyed[K], for the K of the Limiter
	// it is given to (checked by NewKeyed).
	local any
}

type outageKind uint8

const (
	outageInvalid outageKind = iota
	outageClosed
	outageOpen
	outageFallback
)

var (
	// FailClosed denies every request while Redis is unavailable: the limit
	// is never exceeded, and nothing passes. RetryAfter is a hint (one
	// interval, at most a second). The default.
	FailClosed = Outage{kind: outageClosed}
	// FailOpen admits every request (1 ≤ n ≤ burst) while Redis is
	// unavailable: availability first, no limit at all meanwhile.
	FailOpen = Outage{kind: outageOpen}
)

// FallbackTo decides with the local, in-process limiter k while Redis is
// unavailable, per key. Each process then enforces k's limit on its own: a
// fleet of N processes admits up to N times it, so give k the limit's share
// of one process (say Per(rate/N, period)). Admissions made locally are not
// written to Redis; when Redis is back, its buckets carry on from where they
// were (a server restarted without persistence has lost them: every bucket
// is full again). The caller owns k (its sweeper, Close). k's key type is
// the Limiter's (ErrConfig otherwise): the policy moves between the
// two with its keys.
func FallbackTo[K comparable](k *atomiclimit.Keyed[K]) Outage {
	return Outage{kind: outageFallback, local: k}
}

func (o Outage) valid() bool {
	switch o.kind {
	case outageClosed, outageOpen:
		return true
	case outageFallback:
		return o.local != nil
	}
	return false
}

// String returns the policy's name.
func (o Outage) String() string {
	switch o.kind {
	case outageClosed:
		return "fail-closed"
	case outageOpen:
		return "fail-open"
	case outageFallback:
		return "fallback"
	}
	return "invalid"
}
