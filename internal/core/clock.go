package core

import (
	"github.com/atomiclimit/atomiclimit/internal/keyed"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Clock tells the time; WithClock makes a Limiter read it. Implementations
// must be safe for concurrent use. time.Now is the default's wall-clock
// equivalent, but the default reads only the monotonic clock.
type Clock = timebase.Clock

// CoarseTick is the period of the process-wide coarse clock that
// WithCoarseClock selects.
const CoarseTick = timebase.CoarseTick

// An Option configures a Limiter or a Keyed limiter. The clock options apply
// to both; WithMaxKeys, WithSweepInterval and WithShards to Keyed only (New
// rejects them with ErrOption).
type Option interface{ apply(*config) }

type config struct {
	clock  Clock
	coarse bool
	source *timebase.Source // tests only (export_test.go)

	// Keyed only.
	keyedOnly string       // the name of the first keyed-only option given
	keyed     keyed.Config // key bound, sweeper, shards, the hook's evictions
	hook      Hook
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithClock makes the Limiter read c instead of the monotonic clock, for
// deterministic tests and simulations. c.Now() at construction is the
// limiter's epoch: earlier times given to the …At methods count as the epoch.
func WithClock(c Clock) Option {
	return optionFunc(func(cfg *config) { cfg.clock, cfg.coarse = c, false })
}

// WithCoarseClock makes the Limiter read a cached time that one process-wide
// ticker advances every CoarseTick, instead of reading the clock on every
// call: a plain load replaces the clock read, the cheapest hot path there is.
// The ticker runs while any coarse limiter is reachable and stops when the
// last one is garbage collected.
//
// The cached time lags real time by δ < CoarseTick while the ticker runs on
// time. Each decision is then the one the exact limiter would make δ
// earlier: a client that asks continuously is at most ⌈CoarseTick/T⌉ tokens
// behind what the exact clock would admit by then (T the emission interval),
// never ahead, and the lag does not accumulate. For any traffic the bound
// B + d/T holds on the coarse readings, so over a real-time span of length d
// at most B + (d + CoarseTick)/T are admitted.
//
// That holds only if the bucket cannot overflow between two readings, so New
// and SetRule reject, with ErrCoarseTick, a finite GCRA limit whose
// (B−1)·T < CoarseTick: between ticks such a bucket would fill up and
// discard tokens, and admit less than its rate (at T = 1µs and B = 100, a
// tenth of it). A ticker delayed longer than (B−1)·T (a long stop-the-world
// pause, a starved CPU) loses the tokens that overflow during the stall.
func WithCoarseClock() Option {
	return optionFunc(func(cfg *config) { cfg.coarse, cfg.clock = true, nil })
}
