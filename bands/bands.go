// Package bands limits one key by several limits at once, such as 20 per
// second and 1,000 per hour and 10,000 per day: a request is admitted only if
// every band admits it. A band is a GCRA limit (gcra), a fixed window, a
// sliding-window counter or an exact sliding log (window).
//
// Limiter is one key's bands; Keyed holds a set of bands per key on a shared
// sharded map, with exact idle eviction (see Keyed for the protocol and why
// it keeps every band's bound).
//
// # Guarantees
//
// Every band keeps its own bound under any interleaving of any number of
// goroutines, stale times included: a GCRA band admits at most B + d/T over
// any span d, a fixed band at most N per window, a counter band at most N per
// fixed window (2N−1 per rolling window), a log band at most N per rolling
// window. Each band's state is one atomic word, updated by CompareAndSwap
// (the log's is its ring); the words of all bands share one cache line.
//
// An admission first checks every band with loads only; a request any band
// denies writes nothing. Then it takes the request from each band in turn.
// If a band that passed the check denies now (another goroutine took its last
// quota in between), the bands already taken from are refunded, last first,
// and the request is denied. A refund cannot create quota:
//
//   - GCRA (gcra.Params.Refund) refunds only while the band's TAT is still
//     the one this admission stored, and then restores max(TAT − n·T, now),
//     which is at least max(TAT before the admission, now): the state is no
//     more generous than if the admission had never happened. If anything was
//     admitted after it, the refund is dropped: those n tokens stay spent
//     until the bucket refills (the band admits less, never more).
//   - Fixed and counter bands subtract n from the count of the window the
//     admission was counted in, if that window still counts. Counts add, so
//     this leaves exactly the count of the other admissions.
//   - A log band cannot be refunded (its ring only moves forward), so a
//     limiter has at most one, and it is the last band: when it is reached
//     every other band has admitted, and nothing after it can deny.
//
// The result reports the most restrictive band: when denied, the band whose
// RetryAfter is longest (every band's admission only becomes easier as time
// passes, so after that wait, absent other traffic, all of them admit); when
// admitted, the band with the fewest remaining.
//
// # Cost
//
// Medians of -count=5 on a shared, noisy 2-vCPU VM (Go 1.26, amd64), one
// hot key, Allow on the monotonic clock, 0 allocs/op throughout:
//
//	bands                            serial allow   serial deny (by the last band)
//	1 (gcra)                         52 ns          76 ns
//	2 (+ fixed)                      60 ns          81 ns
//	3 (+ counter)                    114 ns         83 ns
//	4 (+ log)                        130 ns         87 ns
//
// measured with go test ./bands -run='^$' -bench=. -count=5 (the noise is
// visible: a one-band denial cannot cost more than an admission).
package bands

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/keyed"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/window"
)

// MaxBands is the most bands one Limiter takes: their state words fill one
// 64-byte cache line.
const MaxBands = 8

// Configuration errors. Errors from a band's own validation wrap both
// ErrInvalidBand and the sentinel of the package that rejected it
// (gcra.ErrInvalidBurst, window.ErrOverflow, …), so errors.Is matches either.
var (
	ErrNoBands        = errors.New("bands: no bands")
	ErrTooManyBands   = errors.New("bands: more than MaxBands bands")
	ErrInvalidBand    = errors.New("bands: invalid band")
	ErrLogNotLast     = errors.New("bands: a log band must be the last band, and only one")
	ErrOption         = errors.New("bands: option does not apply")
	ErrInvalidMaxKeys = errors.New("bands: invalid key bound")
	errCoarseGCRATip  = "raise the burst or use the default clock"
)

type kind uint8

const (
	kindGCRA kind = iota + 1
	kindFixed
	kindCounter
	kindLog
)

// A Band is one limit of a Limiter. Build bands with GCRA, Fixed, Counter
// and Log; New validates them.
type Band struct {
	kind   kind
	limit  gcra.Limit
	burst  int
	n      int
	period time.Duration
	align  window.Align
}

// GCRA is a band of limit with the given burst (see gcra.NewParams).
func GCRA(limit gcra.Limit, burst int) Band { return Band{kind: kindGCRA, limit: limit, burst: burst} }

// Fixed is a fixed-window band: n per window of length period, placed by
// align (window.AlignStart or window.AlignUTC).
func Fixed(n int, period time.Duration, align window.Align) Band {
	return Band{kind: kindFixed, n: n, period: period, align: align}
}

// Counter is a sliding-window-counter band: about n per rolling period.
func Counter(n int, period time.Duration) Band {
	return Band{kind: kindCounter, n: n, period: period}
}

// Log is an exact sliding-log band: at most n per rolling period, 8·n bytes.
// It must be the last band.
func Log(n int, period time.Duration) Band { return Band{kind: kindLog, n: n, period: period} }

// String describes the band, e.g. "gcra 20/1s burst 20", "fixed 1000/1h0m0s utc+0s".
func (b Band) String() string {
	switch b.kind {
	case kindGCRA:
		return fmt.Sprintf("gcra %v burst %d", b.limit, b.burst)
	case kindFixed:
		return fmt.Sprintf("fixed %d/%v %v", b.n, b.period, b.align)
	case kindCounter:
		return fmt.Sprintf("counter %d/%v", b.n, b.period)
	case kindLog:
		return fmt.Sprintf("log %d/%v", b.n, b.period)
	}
	return "invalid"
}

// band is a validated Band: the parameters of its kind.
type band struct {
	kind kind
	g    gcra.Params
	f    window.FixedParams
	c    window.CounterParams
	l    window.LogParams
}

// A Limiter is a single-key limiter with several bands. It is safe for
// concurrent use; its methods never block or allocate. The zero Limiter is
// not usable: create one with New.
type Limiter struct {
	// words[i] is band i's state: a GCRA TAT, or a packed window state. All
	// bands of a request are written together, so they share one line.
	words [MaxBands]atomic.Uint64
	c     cell // c.words is words[:len(bands)]
	bands set
	src   timebase.Source
}

// cell is one key's state: a word per band (a GCRA TAT or a packed window
// state) and, if the last band is a log, its ring.
type cell struct {
	words []atomic.Uint64
	ring  *window.LogRing
}

// set is a validated list of bands; its methods decide on any cell of as
// many words.
type set []band

// A Clock tells the time; WithClock makes a Limiter read it (the same
// interface as atomicbucket.Clock).
type Clock = timebase.Clock

// An Option configures a Limiter.
type Option interface{ apply(*config) }

type config struct {
	clock  Clock
	coarse bool
	source *timebase.Source // tests only

	keyed     keyed.Config // NewKeyed only
	keyedOnly string       // the first keyed-only option given
}

// configure applies opts for New (keyedLimiter false) or NewKeyed.
func configure(opts []Option, keyedLimiter bool) (config, error) {
	cfg := config{keyed: keyed.DefaultConfig()}
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case cfg.keyedOnly != "" && !keyedLimiter:
		return cfg, fmt.Errorf("%w: %s applies to NewKeyed only", ErrOption, cfg.keyedOnly)
	case !cfg.keyed.Valid():
		return cfg, fmt.Errorf("%w: WithMaxKeys(%d, %v)", ErrInvalidMaxKeys, cfg.keyed.MaxKeys, cfg.keyed.Full)
	}
	return cfg, nil
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMaxKeys bounds a Keyed limiter to n keys (0: no bound), exactly; see
// atomicbucket.WithMaxKeys for the policies.
func WithMaxKeys(n int, policy atomicbucket.FullPolicy) Option {
	return keyedOption("WithMaxKeys", func(c *keyed.Config) { c.MaxKeys, c.Full = n, policy })
}

// WithSweepInterval sets how long the background sweeper of a Keyed limiter
// takes for one pass over every key (default one minute); d ≤ 0 starts no
// sweeper.
func WithSweepInterval(d time.Duration) Option {
	return keyedOption("WithSweepInterval", func(c *keyed.Config) { c.SweepEvery = d })
}

// WithShards sets the number of shards of a Keyed limiter's map.
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

// WithClock makes the limiter read c instead of the monotonic clock; c.Now()
// at construction is its epoch (see atomicbucket.WithClock).
func WithClock(c Clock) Option {
	return optionFunc(func(cfg *config) { cfg.clock, cfg.coarse = c, false })
}

// WithCoarseClock makes the limiter read the process-wide coarse clock (see
// atomicbucket.WithCoarseClock). New then rejects a GCRA band whose
// (burst−1)·interval is shorter than atomicbucket.CoarseTick, with
// atomicbucket.ErrCoarseTick, for the reason given there.
func WithCoarseClock() Option {
	return optionFunc(func(cfg *config) { cfg.coarse, cfg.clock = true, nil })
}

// New returns a limiter that admits a request only if every band does.
func New(specs []Band, opts ...Option) (*Limiter, error) {
	cfg, err := configure(opts, false)
	if err != nil {
		return nil, err
	}
	l := &Limiter{}
	l.src = timebase.Choose(l, cfg.source, cfg.coarse, cfg.clock)
	if l.bands, err = newSet(specs, &l.src); err != nil {
		return nil, err
	}
	l.c.words = l.words[:len(specs)]
	if last := &l.bands[len(l.bands)-1]; last.kind == kindLog {
		l.c.ring = window.NewLogRing(&last.l)
	}
	return l, nil
}

// newSet validates specs against the limiter's clock.
func newSet(specs []Band, src *timebase.Source) (set, error) {
	switch {
	case len(specs) == 0:
		return nil, ErrNoBands
	case len(specs) > MaxBands:
		return nil, fmt.Errorf("%w: %d", ErrTooManyBands, len(specs))
	}
	s := make(set, len(specs))
	now := src.Now()
	for i, sp := range specs {
		b := &s[i]
		b.kind = sp.kind
		var err error
		switch sp.kind {
		case kindGCRA:
			b.g, err = gcra.NewParams(sp.limit, sp.burst)
			if err == nil && src.IsCoarse() && !b.g.IsUnlimited() && b.g.Burst() > 0 &&
				time.Duration(b.g.Burst()-1)*b.g.Interval() < timebase.CoarseTick {
				err = fmt.Errorf("%w: %s", atomicbucket.ErrCoarseTick, errCoarseGCRATip)
			}
		case kindFixed:
			b.f, err = window.NewFixedParams(sp.n, sp.period, sp.align.Start(src.Time(0), now, sp.period))
		case kindCounter:
			b.c, err = window.NewCounterParams(sp.n, sp.period, now)
		case kindLog:
			if i != len(specs)-1 {
				return nil, fmt.Errorf("%w: band %d of %d", ErrLogNotLast, i, len(specs))
			}
			b.l, err = window.NewLogParams(sp.n, sp.period)
		default:
			err = errors.New("the zero Band (use bands.GCRA, Fixed, Counter or Log)")
		}
		if err != nil {
			return nil, fmt.Errorf("%w %d (%v): %w", ErrInvalidBand, i, sp, err)
		}
	}
	return s, nil
}

// check reports whether band i would admit n at now. Loads only.
func (s set) check(c *cell, i int, now int64, n int) bool {
	b, w := &s[i], &c.words[i]
	switch b.kind {
	case kindGCRA:
		_, ok := b.g.Admit(int64(w.Load()), now, n)
		return ok
	case kindFixed:
		_, ok := b.f.Admit(w.Load(), now, n)
		return ok
	case kindCounter:
		_, ok := b.c.Admit(w.Load(), now, n)
		return ok
	default:
		return n == 0 || n == 1 && c.ring.Admits(&b.l, now)
	}
}

// take admits n at now on band i and returns what refund needs: the state
// the admission stored.
func (s set) take(c *cell, i int, now int64, n int) (stored uint64, ok bool) {
	b, w := &s[i], &c.words[i]
	for {
		old := w.Load()
		var next uint64
		switch b.kind {
		case kindGCRA:
			if b.g.IsUnlimited() {
				return 0, n >= 0 // writes nothing, as atomicbucket does
			}
			var tat int64
			tat, ok = b.g.Admit(int64(old), now, n)
			next = uint64(tat)
		case kindFixed:
			next, ok = b.f.Admit(old, now, n)
		case kindCounter:
			next, ok = b.c.Admit(old, now, n)
		default:
			return 0, n == 0 || n == 1 && c.ring.Allow(&b.l, now)
		}
		if !ok {
			return 0, false // a denial stores nothing
		}
		if n == 0 {
			return old, true // a peek stores nothing (next == old)
		}
		if w.CompareAndSwap(old, next) {
			return next, true
		}
		// Lost a race: decide again on the winner's state (each kind's
		// decision never moves its state back, whatever now is).
	}
}

// refund gives back the n events band i admitted by storing stored (see the
// package doc for why this cannot create quota).
func (s set) refund(c *cell, i int, now int64, stored uint64, n int) {
	b, w := &s[i], &c.words[i]
	for {
		old := w.Load()
		var back uint64
		var ok bool
		switch b.kind {
		case kindGCRA:
			var tat int64
			tat, ok = b.g.Refund(int64(old), now, int64(stored), n)
			back = uint64(tat)
		case kindFixed:
			back, ok = b.f.Refund(old, stored, n)
		case kindCounter:
			back, ok = b.c.Refund(old, stored, n)
		}
		// The log, always last, is never refunded.
		if !ok || w.CompareAndSwap(old, back) {
			return
		}
	}
}

// admit is the whole admission: check every band, then take from each,
// refunding on a late denial. It reports whether n was admitted.
func (s set) admit(c *cell, now int64, n int) bool {
	for i := range s {
		if !s.check(c, i, now, n) {
			return false // nothing written
		}
	}
	return s.takeAll(c, now, n)
}

// takeAll takes n from every band in order; if one denies, it refunds the
// bands before it, last first.
func (s set) takeAll(c *cell, now int64, n int) bool {
	var stored [MaxBands]uint64
	for i := range s {
		st, ok := s.take(c, i, now, n)
		if !ok {
			for j := i - 1; j >= 0; j-- {
				s.refund(c, j, now, stored[j], n)
			}
			return false
		}
		stored[i] = st
	}
	return true
}

// Allow reports whether one event may happen now under every band, and
// counts it in all of them if so. Allow is shorthand for
// AllowN(clock.Now(), 1).
func (l *Limiter) Allow() bool { return l.bands.admit(&l.c, l.src.Now(), 1) }

// AllowN reports whether n events may happen at now under every band, and
// counts them in all of them if so. A log band admits only n == 1 (and
// n == 0, a peek that counts nothing anywhere).
func (l *Limiter) AllowN(now time.Time, n int) bool { return l.bands.admit(&l.c, l.src.At(now), n) }

// A Decision is the outcome of a request under several bands: the
// gcra.Decision of the most restrictive band, and which band that is.
//
// Remaining is the least any band has left after the call; RetryAfter (when
// denied) the longest wait any band needs, gcra.Never if some band can never
// admit the request; ResetAfter and TokenAfter the longest over the bands.
type Decision struct {
	gcra.Decision
	// Band is the index, in the order given to New, of the band that set
	// RetryAfter (denied) or Remaining (admitted).
	Band int
}

// Decide is Allow for n events with the whole decision. Decide is shorthand
// for DecideAt(clock.Now(), n).
func (l *Limiter) Decide(n int) Decision { return l.bands.decide(&l.c, l.src.Now(), n, false) }

// DecideAt is Decide at the given time.
func (l *Limiter) DecideAt(now time.Time, n int) Decision {
	return l.bands.decide(&l.c, l.src.At(now), n, false)
}

// Peek returns the decision Decide(n) would make now, counting nothing.
// Peek is shorthand for PeekAt(clock.Now(), n).
func (l *Limiter) Peek(n int) Decision { return l.bands.decide(&l.c, l.src.Now(), n, true) }

// PeekAt is Peek at the given time.
func (l *Limiter) PeekAt(now time.Time, n int) Decision {
	return l.bands.decide(&l.c, l.src.At(now), n, true)
}

func (s set) decide(c *cell, now int64, n int, peek bool) Decision {
	ok := true
	for i := range s {
		if !s.check(c, i, now, n) {
			ok = false
			break
		}
	}
	if ok && !peek {
		ok = s.takeAll(c, now, n)
	}
	var d Decision
	d.Allowed = ok
	d.Remaining = int(^uint(0) >> 1)
	for i := range s {
		var bd gcra.Decision
		switch {
		case ok && peek:
			bd = s.peek(c, i, now, n) // as if admitted
		case ok:
			bd = s.current(c, i, now) // as stored
		default:
			bd = s.current(c, i, now) // nothing was taken
			if pk := s.peek(c, i, now, n); !pk.Allowed && pk.RetryAfter > d.RetryAfter {
				d.RetryAfter, d.Band = pk.RetryAfter, i
			}
		}
		if bd.Remaining < d.Remaining {
			d.Remaining = bd.Remaining
			if ok {
				d.Band = i
			}
		}
		d.ResetAfter = max(d.ResetAfter, bd.ResetAfter)
		d.TokenAfter = max(d.TokenAfter, bd.TokenAfter)
	}
	return d
}

// peek is band i's decision for n at now, counting nothing: Remaining and
// the durations describe the state after a hypothetical admission.
func (s set) peek(c *cell, i int, now int64, n int) gcra.Decision {
	b, w := &s[i], &c.words[i]
	switch b.kind {
	case kindGCRA:
		_, d := b.g.Decide(int64(w.Load()), now, n)
		return d
	case kindFixed:
		_, d := b.f.Decide(w.Load(), now, n)
		return d
	case kindCounter:
		_, d := b.c.Decide(w.Load(), now, n)
		return d
	default:
		if n != 1 {
			d := c.ring.State(&b.l, now) // the log records only n == 1
			if d.Allowed = n == 0; !d.Allowed {
				d.RetryAfter = gcra.Never
			}
			return d
		}
		return c.ring.Peek(&b.l, now)
	}
}

// current describes band i at now without a request.
func (s set) current(c *cell, i int, now int64) gcra.Decision {
	b, w := &s[i], &c.words[i]
	switch b.kind {
	case kindGCRA:
		return b.g.State(int64(w.Load()), now)
	case kindFixed:
		return b.f.State(w.Load(), now)
	case kindCounter:
		return b.c.State(w.Load(), now)
	default:
		return c.ring.State(&b.l, now)
	}
}

// Len returns the number of bands.
func (l *Limiter) Len() int { return len(l.bands) }
