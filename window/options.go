package window

import (
	"fmt"
	"time"

	"github.com/atomiclimit/atomiclimit/internal/keyed"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Clock tells the time; WithClock makes a limiter read it. It is the same
// interface as atomicbucket.Clock.
type Clock = timebase.Clock

// cacheLine is the size the padding assumes (as in atomicbucket).
const cacheLine = 64

// An Option configures a limiter of this package.
type Option interface{ apply(*config) }

type config struct {
	clock  Clock
	coarse bool
	align  Align
	alignd bool
	source *timebase.Source // tests only (export_test.go)

	keyed     keyed.Config // keyed limiters only
	keyedOnly string       // the first keyed-only option given
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithClock makes the limiter read c instead of the monotonic clock, for
// deterministic tests and simulations. c.Now() at construction is the
// limiter's epoch: earlier times given to the …At methods count as the
// epoch. With AlignUTC, c's wall-clock readings place the boundaries.
func WithClock(c Clock) Option {
	return optionFunc(func(cfg *config) { cfg.clock, cfg.coarse = c, false })
}

// WithCoarseClock makes the limiter read the process-wide cached time that
// atomicbucket.WithCoarseClock uses (advanced every atomicbucket.CoarseTick
// by one ticker that runs while any coarse limiter is reachable): a plain
// load replaces the clock read. The reading lags real time by δ, less than
// one tick while the ticker runs on time, and every decision is the one the
// exact limiter would make δ earlier: the bounds of each algorithm hold on the
// coarse readings, and in real time the windows start up to δ late.
func WithCoarseClock() Option {
	return optionFunc(func(cfg *config) { cfg.coarse, cfg.clock = true, nil })
}

// WithAlign places the boundaries of a fixed window (the default is
// AlignStart). NewCounter and NewLog reject it with ErrOption: their windows
// slide.
func WithAlign(a Align) Option {
	return optionFunc(func(cfg *config) { cfg.align, cfg.alignd = a, true })
}

// configure applies opts for a limiter of the given kind.
func configure(opts []Option, fixed, keyedLimiter bool) (config, error) {
	cfg := config{keyed: keyed.DefaultConfig()}
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case cfg.alignd && !fixed:
		return cfg, fmt.Errorf("%w: WithAlign applies to fixed windows only", ErrOption)
	case cfg.keyedOnly != "" && !keyedLimiter:
		return cfg, fmt.Errorf("%w: %s applies to keyed limiters only", ErrOption, cfg.keyedOnly)
	case !cfg.keyed.Valid():
		return cfg, fmt.Errorf("%w: WithMaxKeys(%d, %v)", ErrInvalidMaxKeys, cfg.keyed.MaxKeys, cfg.keyed.Full)
	}
	return cfg, nil
}

// A FullPolicy says what a keyed limiter that holds its key bound does with
// a new key when no key is idle (the same type as atomicbucket.FullPolicy).
type FullPolicy = keyed.FullPolicy

// The policies of WithMaxKeys (see atomicbucket.RejectNew and EvictStalest).
// For windows, an active key that EvictStalest removes loses its counts: its
// next request starts a fresh window.
const (
	RejectNew    = keyed.RejectNew
	EvictStalest = keyed.EvictStalest
)

// KeyedStats counts what a keyed limiter has done (the same type as
// atomicbucket.KeyedStats).
type KeyedStats = keyed.Stats

// WithMaxKeys bounds a keyed limiter to n keys (0: no bound), exactly. When
// it holds n keys and a request comes for a new one, idle keys are removed
// first; only if none is idle does policy decide (see
// atomicbucket.WithMaxKeys).
func WithMaxKeys(n int, policy FullPolicy) Option {
	return keyedOption("WithMaxKeys", func(c *keyed.Config) { c.MaxKeys, c.Full = n, policy })
}

// WithSweepInterval sets how long the background sweeper of a keyed limiter
// takes for one pass over every key (default one minute); d ≤ 0 starts no
// sweeper (see atomicbucket.WithSweepInterval).
func WithSweepInterval(d time.Duration) Option {
	return keyedOption("WithSweepInterval", func(c *keyed.Config) { c.SweepEvery = d })
}

// WithShards sets the number of shards of a keyed limiter's map.
func WithShards(n int) Option {
	return keyedOption("WithShards", func(c *keyed.Config) { c.Shards = n })
}

func keyedOption(name string, set func(*keyed.Config)) Option {
	return optionFunc(func(cfg *config) {
		set(&cfg.keyed)
		if cfg.keyedOnly == "" {
			cfg.keyedOnly = name
		}
	})
}

// newSource returns the clock the options chose (see timebase.Choose).
func newSource[T any](cfg *config, owner *T) timebase.Source {
	return timebase.Choose(owner, cfg.source, cfg.coarse, cfg.clock)
}
