package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/internal/keyed"
)

// A FullPolicy says what a Keyed limiter with a key bound does with a request
// for a new key when it holds the bound and no key is idle.
type FullPolicy uint8

const (
	// RejectNew denies requests for new keys until a key becomes idle and is
	// removed. Keys already present are unaffected: no key ever loses its
	// state, so no key is ever admitted beyond its limit.
	RejectNew FullPolicy = FullPolicy(keyed.RejectNew)
	// EvictStalest removes the keys closest to idle (smallest TAT), a batch of
	// 1/16 of one shard at a time, to make room. An evicted key that was not
	// idle loses its debt: its next request finds a full bucket, so it may be
	// admitted up to B more than its limit allows. Choose it when forgetting
	// a key is better than refusing a new one (Stats counts such evictions in
	// EvictedActive).
	EvictStalest FullPolicy = FullPolicy(keyed.EvictStalest)
)

// WithMaxKeys bounds a Keyed limiter to n keys (n = 0: no bound), exactly,
// under any concurrency. When it holds n keys and a request comes for a new
// one, it first removes idle keys: it sweeps shards until one yields an idle
// key or all have been swept (a scan that finds none is not repeated for
// 10 ms of the limiter's clock, or ten times the scan's own duration if
// longer, unless a key it saw may have become idle: so a flood of new keys
// keeps a full limiter scanning at most about a tenth of the time). Only if
// no key is idle does policy decide.
// The bound also presizes the map for n keys, up to 2^22, so that it never
// grows (a growth copies a shard while requests for its new keys wait); the
// tables cost from the start what a full limiter holds: 64 bytes per 3.75
// keys of the bound, rounded up to a power of two per shard. A larger bound
// presizes for 2^22 keys, and the map grows beyond as keys come.
func WithMaxKeys(n int, policy FullPolicy) Option {
	return optionFunc(func(cfg *config) {
		cfg.keyed.MaxKeys, cfg.keyed.Full = n, keyed.FullPolicy(policy)
		cfg.keyedOnlyOption("WithMaxKeys")
	})
}

// WithSweepInterval sets how long the background sweeper takes for one pass
// over every key (default one minute): it wakes every d/shards and sweeps
// one shard, removing the keys that are idle (no later decision could tell
// them from a new key); the step is at least 1 ms, so a d below shards·1 ms
// takes shards·1 ms. A shorter d frees idle keys' memory sooner and costs
// more CPU: a pass takes a few cache misses per key, and while every P of
// the process is busy the sweeper runs only by preempting one of them. d ≤ 0
// starts no sweeper; Sweep still removes idle keys on demand, and a full
// limiter removes them when it needs room.
func WithSweepInterval(d time.Duration) Option {
	return optionFunc(func(cfg *config) {
		cfg.keyed.SweepEvery = d
		cfg.keyedOnlyOption("WithSweepInterval")
	})
}

// WithShards sets the number of shards of a Keyed limiter's map (rounded up
// to a power of two; default 16). A map without a key bound grows by
// doubling one shard's table at a time, and the requests for new keys of
// that shard wait for the copy: more shards make each copy smaller. Each
// shard holds about 2 KiB when empty. WithMaxKeys avoids growth altogether.
// n must be in [0, 65536] (0: the default), or the constructor fails with
// ErrOption.
func WithShards(n int) Option {
	return optionFunc(func(cfg *config) {
		cfg.keyed.Shards = n
		cfg.keyedOnlyOption("WithShards")
	})
}

func (cfg *config) keyedOnlyOption(name string) {
	if cfg.keyedOnly == "" {
		cfg.keyedOnly = name
	}
}
