package atomicbucket

import "github.com/atomiclimit/atomiclimit/internal/timebase"

// A Clock tells the time; WithClock makes a Limiter read it. Implementations
// must be safe for concurrent use. time.Now is the default's wall-clock
// equivalent, but the default reads only the monotonic clock.
type Clock = timebase.Clock

// CoarseTick is the period of the process-wide coarse clock that
// WithCoarseClock selects.
const CoarseTick = timebase.CoarseTick

// An Option configures a Limiter.
type Option interface{ apply(*config) }

type config struct {
	clock  Clock
	coarse bool
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
//
// The ticker runs while any coarse limiter is reachable and stops when the
// last one is garbage collected. The cached time lags real time by δ: at most
// one CoarseTick plus the scheduler's delay of the ticker goroutine. Each
// decision is then the one the exact limiter would make δ earlier, so, with T
// the emission interval:
//   - a client that asks continuously is admitted at most ⌈δ/T⌉ fewer tokens
//     over any span than with the exact clock, and never more (at 1 ms and
//     1000/s, one token);
//   - for any traffic, the bound B + d/T holds on the coarse readings, so
//     over a real-time span of length d at most B + (d+δ)/T are admitted.
func WithCoarseClock() Option {
	return optionFunc(func(cfg *config) { cfg.coarse, cfg.clock = true, nil })
}
