package atomicbucket

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Limiter is a single-key GCRA rate limiter with x/time/rate's vocabulary:
// Allow, Reserve and Wait, each with an …N or …At form that takes the time.
// Its state is one PaddedBucket; the hot path is one clock read, one load and,
// for an admission, one CompareAndSwap. It is safe for concurrent use.
//
// Times are nanoseconds since the limiter's epoch on its clock: the
// monotonic clock by default, so wall-clock jumps change nothing. The zero
// Limiter is not usable: create one with New.
type Limiter struct {
	cell   PaddedBucket // first, so it starts the allocation's first line
	params atomic.Pointer[gcra.Params]
	src    timebase.Source
}

// New returns a Limiter that admits limit's rate with the given burst,
// starting full. It returns an error wrapping a gcra sentinel
// (ErrInvalidLimit, ErrRateTooHigh, ErrInvalidBurst, ErrOverflow) for a bad
// configuration.
func New(limit gcra.Limit, burst int, opts ...Option) (*Limiter, error) {
	p, err := gcra.NewParams(limit, burst)
	if err != nil {
		return nil, err
	}
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.keyedOnly != "" {
		return nil, fmt.Errorf("%w: %s", ErrKeyedOption, cfg.keyedOnly)
	}
	l := &Limiter{}
	l.src = newSource(&cfg, l)
	if err := checkClock(&l.src, &p); err != nil {
		return nil, err
	}
	l.params.Store(&p)
	return l, nil
}

// paramsFor validates limit and burst, and checks them against src's clock.
func paramsFor(src *timebase.Source, limit gcra.Limit, burst int) (*gcra.Params, error) {
	p, err := gcra.NewParams(limit, burst)
	if err != nil {
		return nil, err
	}
	if err := checkClock(src, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// newSource returns the clock the options chose (see timebase.Choose).
func newSource[T any](cfg *config, owner *T) timebase.Source {
	return timebase.Choose(owner, cfg.source, cfg.coarse, cfg.clock)
}

// ErrCoarseTick is returned by New and SetLimit for a limiter on the coarse
// clock whose (burst−1)·interval is shorter than CoarseTick: its bucket would
// overflow between ticks and admit less than its rate (see WithCoarseClock).
var ErrCoarseTick = errors.New("atomicbucket: (burst-1)·interval is shorter than the coarse clock's tick")

// ErrKeyedOption is returned by New for an option that only a Keyed limiter
// takes.
var ErrKeyedOption = errors.New("atomicbucket: option applies to keyed limiters only")

// checkClock rejects parameters the clock cannot serve exactly.
func checkClock(src *timebase.Source, p *gcra.Params) error {
	if !src.IsCoarse() || p.IsUnlimited() || p.Burst() == 0 {
		return nil
	}
	if room := time.Duration(p.Burst()-1) * p.Interval(); room < CoarseTick {
		return fmt.Errorf("%w: (%d-1)·%v = %v < %v; raise the burst to at least %d or use the default clock",
			ErrCoarseTick, p.Burst(), p.Interval(), room, CoarseTick, 1+(CoarseTick+p.Interval()-1)/p.Interval())
	}
	return nil
}

// Allow reports whether one event may happen now, and consumes a token if so.
// Allow is shorthand for AllowN(clock.Now(), 1).
func (l *Limiter) Allow() bool {
	// Bucket.AllowN by hand, so that its first attempt inlines here.
	p, now := l.params.Load(), l.src.Now()
	if p.IsUnlimited() {
		return true // writes nothing
	}
	if ok, settled := l.cell.tryAllowN(p, now, 1); settled {
		return ok
	}
	return l.cell.allowContended(p, now, 1)
}

// AllowN reports whether n events may happen at now, and consumes n tokens
// if so. n = 0 is admitted and consumes nothing; n < 0 and n > burst are
// denied (see Decide for the reason).
func (l *Limiter) AllowN(now time.Time, n int) bool {
	p, t := l.params.Load(), l.src.At(now)
	if p.IsUnlimited() {
		return n >= 0 // writes nothing
	}
	if ok, settled := l.cell.tryAllowN(p, t, n); settled {
		return ok
	}
	return l.cell.allowContended(p, t, n)
}

// Decide is Allow for n tokens with the whole decision: remaining tokens,
// retry-after, reset-after and time to the next token. Decide is shorthand
// for DecideAt(clock.Now(), n).
func (l *Limiter) Decide(n int) gcra.Decision {
	return l.cell.DecideN(l.params.Load(), l.src.Now(), n)
}

// DecideAt is Decide at the given time.
func (l *Limiter) DecideAt(now time.Time, n int) gcra.Decision {
	return l.cell.DecideN(l.params.Load(), l.src.At(now), n)
}

// Peek returns the decision Decide(n) would make now, consuming nothing.
// Peek is shorthand for PeekAt(clock.Now(), n).
func (l *Limiter) Peek(n int) gcra.Decision {
	return l.cell.PeekN(l.params.Load(), l.src.Now(), n)
}

// PeekAt is Peek at the given time.
func (l *Limiter) PeekAt(now time.Time, n int) gcra.Decision {
	return l.cell.PeekN(l.params.Load(), l.src.At(now), n)
}

// Tokens returns the number of tokens available now.
// Tokens is shorthand for TokensAt(clock.Now()).
func (l *Limiter) Tokens() int { return l.cell.State(l.params.Load(), l.src.Now()).Remaining }

// TokensAt returns the number of tokens available at now: what a request at
// that instant could take. math.MaxInt for Unlimited, 0 for DenyAll.
func (l *Limiter) TokensAt(now time.Time) int {
	return l.cell.State(l.params.Load(), l.src.At(now)).Remaining
}

// Params returns the limiter's current parameters (immutable; SetLimit
// replaces them rather than changing them).
func (l *Limiter) Params() *gcra.Params { return l.params.Load() }

// SetLimit changes the limit and burst from the next decision on. It returns
// the same errors as New, and changes nothing on error.
//
// The bucket keeps its theoretical arrival time, as a GCRA stored in Redis
// does when a caller passes new parameters: a full bucket stays full, and a
// bucket that needs time Δ to be full still needs Δ, so right after the change
// it holds floor((B'·T' − Δ) / T') tokens under the new limit. Each decision
// reads the parameters once, so a call that races with SetLimit is decided
// wholly under the old or wholly under the new limit, never a mix.
func (l *Limiter) SetLimit(limit gcra.Limit, burst int) error {
	p, err := paramsFor(&l.src, limit, burst)
	if err != nil {
		return err
	}
	l.params.Store(p)
	return nil
}

// String describes the limiter's configuration, e.g. "100/1s burst 10".
func (l *Limiter) String() string { return paramsString(l.params.Load()) }
