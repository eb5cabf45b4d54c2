package window

import (
	"fmt"

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

func configure(opts []Option, fixed bool) (config, error) {
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.alignd && !fixed {
		return cfg, fmt.Errorf("%w: WithAlign applies to fixed windows only", ErrOption)
	}
	return cfg, nil
}

// newSource returns the clock the options chose (see timebase.Choose).
func newSource[T any](cfg *config, owner *T) timebase.Source {
	return timebase.Choose(owner, cfg.source, cfg.coarse, cfg.clock)
}
