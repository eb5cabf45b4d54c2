package atomiclimit

import (
	"time"

	"github.com/atomiclimit/atomiclimit/internal/keyed"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Clock tells the time; WithClock makes a limiter read it. Implementations
// must be safe for concurrent use. time.Now is the default's wall-clock
// equivalent, but the default reads only the monotonic clock.
type Clock interface {
	Now() time.Time
}

// coarseTick is the period of the process-wide coarse clock that
// WithCoarseClock selects: one millisecond.
const coarseTick = timebase.CoarseTick

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
	hook      *Hook
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
// ticker advances every coarseTick, instead of reading the clock on every
// call: a plain load replaces the clock read, the cheapest hot path there is.
// The ticker runs while any coarse limiter is reachable and stops when the
// last one is garbage collected.
//
// The cached time lags real time by δ: under coarseTick while the ticker
// runs on time, and by as long as the ticker waits for a P when every P
// runs work that does not yield (tens of milliseconds). An admission is
// decided on the cached time, so it is the decision the exact limiter
// would make δ earlier; for any traffic the bound B + d/T holds on the
// readings, so over a real-time span of length d at most B + (d + δ)/T are
// admitted. Every denial reads the monotonic clock once (what every
// decision costs on the default clock), decides again at that time, and,
// if the cached time lags by more than a tick, raises it (for every coarse
// limiter): a stalled ticker costs no admissions, and a client that asks
// until it is denied is never behind what the exact clock admits. A flood
// of denials costs what it costs on the default clock.
// Reserve and Wait read the precise clock (a wait computed from a lagging
// time would be waited out for nothing).
//
// New and SetRule reject, with ErrOption, a finite GCRA limit whose
// (B−1)·T < coarseTick: such a bucket holds less than a tick of tokens, so
// a client that asks continuously is denied within every tick and pays the
// precise clock read on most admissions, more than the default clock costs.
func WithCoarseClock() Option {
	return optionFunc(func(cfg *config) { cfg.coarse, cfg.clock = true, nil })
}
