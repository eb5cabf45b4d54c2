package window

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Fixed is a single-key fixed-window limiter: at most N events in each
// window of length W, the whole quota restored at each boundary and nothing
// carried over (interval refill: no burst beyond N, however long the
// limiter idled). Windows start at the limiter's creation (AlignStart) or on
// UTC boundaries (WithAlign(AlignUTC(offset))).
//
// Its state is one FixedCell alone on a cache line; the hot path is one
// clock read, one load, one division and, for an admission, one
// CompareAndSwap. It is safe for concurrent use and never blocks or
// allocates. Across a boundary it admits up to 2N in a span much shorter
// than W (N at the end of one window, N at the start of the next); use Log
// where that matters.
type Fixed struct {
	cell FixedCell
	//lint:ignore U1000 prevents false sharing with the fields below and the next object
	_   [cacheLine - 8]byte
	p   FixedParams
	src timebase.Source
}

// NewFixed returns a fixed-window limiter of n events per window of length
// period. Errors wrap ErrInvalidLimit, ErrInvalidPeriod, ErrOverflow or
// ErrOption.
func NewFixed(n int, period time.Duration, opts ...Option) (*Fixed, error) {
	cfg, err := configure(opts, true, false)
	if err != nil {
		return nil, err
	}
	f := &Fixed{}
	f.src = newSource(&cfg, f)
	f.p, err = NewFixedParams(n, period, cfg.align.Start(f.src.Time(0), f.src.Now(), period))
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Allow reports whether one event may happen now, and counts it if so.
// Allow is shorthand for AllowN(clock.Now(), 1).
func (f *Fixed) Allow() bool { return f.cell.AllowN(&f.p, f.src.Now(), 1) }

// AllowN reports whether n events may happen at now, and counts them if
// so. n < 1 and n > N are denied.
func (f *Fixed) AllowN(now time.Time, n int) bool { return f.cell.AllowN(&f.p, f.src.At(now), n) }

// Decide is Allow for n events with the whole decision. Decide is shorthand
// for DecideAt(clock.Now(), n).
func (f *Fixed) Decide(n int) gcra.Decision { return f.cell.DecideN(&f.p, f.src.Now(), n) }

// DecideAt is Decide at the given time.
func (f *Fixed) DecideAt(now time.Time, n int) gcra.Decision {
	return f.cell.DecideN(&f.p, f.src.At(now), n)
}

// Peek returns the decision Decide(n) would make now, counting nothing.
// Peek is shorthand for PeekAt(clock.Now(), n).
func (f *Fixed) Peek(n int) gcra.Decision { return f.cell.PeekN(&f.p, f.src.Now(), n) }

// PeekAt is Peek at the given time.
func (f *Fixed) PeekAt(now time.Time, n int) gcra.Decision {
	return f.cell.PeekN(&f.p, f.src.At(now), n)
}

// Params returns the limiter's parameters.
func (f *Fixed) Params() *FixedParams { return &f.p }

// String describes the configuration, e.g. "fixed 100/1s".
func (f *Fixed) String() string { return fmt.Sprintf("fixed %d/%v", f.p.limit, f.Params().Period()) }

// A Counter is a single-key sliding-window-counter limiter: about N events
// per rolling window of length W, estimated from the counts of two fixed
// windows (see CounterParams). Its state is one CounterCell alone on a cache
// line; its cost and guarantees on the hot path are Fixed's.
type Counter struct {
	cell CounterCell
	//lint:ignore U1000 prevents false sharing
	_   [cacheLine - 8]byte
	p   CounterParams
	src timebase.Source
}

// NewCounter returns a sliding-window-counter limiter of n events per
// rolling window of length period; its fixed windows start at creation.
// Errors wrap ErrInvalidLimit, ErrInvalidPeriod, ErrOverflow or ErrOption.
func NewCounter(n int, period time.Duration, opts ...Option) (*Counter, error) {
	cfg, err := configure(opts, false, false)
	if err != nil {
		return nil, err
	}
	c := &Counter{}
	c.src = newSource(&cfg, c)
	c.p, err = NewCounterParams(n, period, c.src.Now())
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Allow reports whether one event may happen now, and counts it if so.
// Allow is shorthand for AllowN(clock.Now(), 1).
func (c *Counter) Allow() bool { return c.cell.AllowN(&c.p, c.src.Now(), 1) }

// AllowN reports whether n events may happen at now, and counts them if so.
func (c *Counter) AllowN(now time.Time, n int) bool { return c.cell.AllowN(&c.p, c.src.At(now), n) }

// Decide is Allow for n events with the whole decision. Decide is shorthand
// for DecideAt(clock.Now(), n).
func (c *Counter) Decide(n int) gcra.Decision { return c.cell.DecideN(&c.p, c.src.Now(), n) }

// DecideAt is Decide at the given time.
func (c *Counter) DecideAt(now time.Time, n int) gcra.Decision {
	return c.cell.DecideN(&c.p, c.src.At(now), n)
}

// Peek returns the decision Decide(n) would make now, counting nothing.
// Peek is shorthand for PeekAt(clock.Now(), n).
func (c *Counter) Peek(n int) gcra.Decision { return c.cell.PeekN(&c.p, c.src.Now(), n) }

// PeekAt is Peek at the given time.
func (c *Counter) PeekAt(now time.Time, n int) gcra.Decision {
	return c.cell.PeekN(&c.p, c.src.At(now), n)
}

// Params returns the limiter's parameters.
func (c *Counter) Params() *CounterParams { return &c.p }

// String describes the configuration, e.g. "counter 100/1s".
func (c *Counter) String() string {
	return fmt.Sprintf("counter %d/%v", c.p.limit, c.Params().Period())
}

// A Log is a single-key exact sliding-log limiter: at most N events
// in any rolling window of length W, under any interleaving of any number of
// goroutines, stale times included. It costs 8·N bytes (plus a cache line
// for its head) and is lock-free (see LogRing). It admits one event per call: a
// request for n ≠ 1 events is denied with RetryAfter gcra.Never (use Fixed
// or Counter for weighted requests).
type Log struct {
	log LogRing
	//lint:ignore U1000 keeps the ring's head alone on its cache line
	_   [cacheLine - 32]byte
	p   LogParams
	src timebase.Source
}

// NewLog returns an exact sliding-log limiter of n events per rolling
// window of length period. Errors wrap ErrInvalidLimit, ErrInvalidPeriod,
// ErrOverflow or ErrOption.
func NewLog(n int, period time.Duration, opts ...Option) (*Log, error) {
	cfg, err := configure(opts, false, false)
	if err != nil {
		return nil, err
	}
	l := &Log{}
	l.src = newSource(&cfg, l)
	if l.p, err = NewLogParams(n, period); err != nil {
		return nil, err
	}
	l.log.slots = make([]atomic.Uint64, l.p.limit)
	return l, nil
}

// Allow reports whether one event may happen now, and records it if so.
// Allow is shorthand for AllowN(clock.Now(), 1).
func (l *Log) Allow() bool { return l.log.Allow(&l.p, l.src.Now()) }

// AllowN reports whether n events may happen at now; n == 1 is decided,
// n == 0 is admitted and records nothing, any other n is denied.
func (l *Log) AllowN(now time.Time, n int) bool {
	if n != 1 {
		return n == 0
	}
	return l.log.Allow(&l.p, l.src.At(now))
}

// Decide is Allow for n events with the whole decision. Decide is shorthand
// for DecideAt(clock.Now(), n).
func (l *Log) Decide(n int) gcra.Decision { return l.decide(l.src.Now(), n, false) }

// DecideAt is Decide at the given time.
func (l *Log) DecideAt(now time.Time, n int) gcra.Decision {
	return l.decide(l.src.At(now), n, false)
}

// Peek returns the decision Decide(n) would make now, recording nothing.
// Peek is shorthand for PeekAt(clock.Now(), n).
func (l *Log) Peek(n int) gcra.Decision { return l.decide(l.src.Now(), n, true) }

// PeekAt is Peek at the given time.
func (l *Log) PeekAt(now time.Time, n int) gcra.Decision {
	return l.decide(l.src.At(now), n, true)
}

func (l *Log) decide(now int64, n int, peek bool) gcra.Decision {
	return l.log.decideN(&l.p, now, n, peek)
}

// Params returns the limiter's parameters.
func (l *Log) Params() *LogParams { return &l.p }

// String describes the configuration, e.g. "log 100/1s".
func (l *Log) String() string { return fmt.Sprintf("log %d/%v", l.p.limit, l.p.Period()) }
