package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/internal/core"
)

// The policies of WithMaxKeys.
const (
	// RejectNew denies requests for new keys until a key becomes idle and is
	// removed. No key ever loses its state, so no key is ever admitted beyond
	// its limit.
	RejectNew = core.RejectNew
	// EvictStalest removes the keys closest to idle to make room. An evicted
	// key that was not idle loses its state, and may be admitted up to its
	// limit again (Stats counts those in EvictedActive).
	EvictStalest = core.EvictStalest
)

// WithClock makes a limiter read c instead of the monotonic clock, for
// deterministic tests and simulations; c.Now() at construction is its epoch.
func WithClock(c Clock) Option { return core.WithClock(c) }

// WithCoarseClock makes a limiter read a process-wide cached time that one
// ticker advances every millisecond: the cheapest hot path there is. An
// admission is decided on the cached time (up to a tick late, longer while
// every P is busy); a denial reads the precise clock and decides again, so
// a lagging ticker costs no admissions.
func WithCoarseClock() Option { return core.WithCoarseClock() }

// WithMaxKeys bounds a Keyed limiter to n keys (0: no bound), exactly. When
// it is full, idle keys are removed first; only if none is idle does policy
// decide. The bound also sizes the map's tables for n keys at construction
// (64 bytes per 3.75 keys, rounded up to a power of two per shard: what a
// full limiter holds anyway), so that they almost never grow (odds below 1
// in 30,000 per shard at n keys): a growth copies one shard's table while
// the requests for new keys of that shard wait (see WithShards).
func WithMaxKeys(n int, policy FullPolicy) Option { return core.WithMaxKeys(n, policy) }

// WithSweepInterval sets how long the background sweeper of a Keyed limiter
// takes for one pass over every key (default one minute); d ≤ 0 starts no
// sweeper. A shorter d frees idle keys' memory sooner and costs that much
// more CPU: a pass takes a few cache misses per key (about half a core for
// 1.3M keys every second on the 2-vCPU benchmark machine). While every P of
// the process is busy with requests, the sweeper runs only by preempting
// one of them, and that request waits for the scheduler's next turn
// (24–41 ms measured with a pass a second); with a P to spare, 4.1–6.2 ms,
// or 15–21 ms in runs where a collection's mark workers took the Ps (README,
// "What can make one decision wait").
func WithSweepInterval(d time.Duration) Option { return core.WithSweepInterval(d) }

// WithShards sets the number of shards of a Keyed limiter's map (rounded up
// to a power of two; default 16). A map without a key bound grows by doubling
// one shard's table at a time, and the requests for new keys of that shard
// wait for the copy: more shards make each copy smaller (1 shard: a copy of
// every key). Each shard holds about 3 KiB when empty. WithMaxKeys avoids
// growth altogether. README's Benchmarks section has the measured tails.
func WithShards(n int) Option { return core.WithShards(n) }

// WithHook makes a Keyed limiter report its decisions and evictions to h
// under the name policy.
func WithHook(policy string, h Hook) Option { return core.WithHook(policy, h) }
