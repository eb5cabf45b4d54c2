package atomiclimit

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Limiter is a single-key limiter under one rule, with x/time/rate's
// vocabulary: Allow, Take, Peek, and for GCRA Reserve and Wait, each with an
// …N form that takes the time and the count. Its state is one word alone on
// a cache line, as an atomicbucket.PaddedBucket (a rule wider than one word
// keeps its words beside it); for GCRA the hot path
// is one clock read, one load and, for an admission, one CompareAndSwap. It
// is safe for concurrent use.
//
// Times are nanoseconds since the limiter's epoch on its clock: the
// monotonic clock by default, so wall-clock jumps change nothing. The zero
// Limiter is not usable: create one with New or NewRule.
type Limiter struct {
	cell  paddedWord // first, so it starts the allocation's first line
	rule  atomic.Pointer[rule]
	st    algo.State                 // a one-word rule's state: the cell's word
	wide  atomic.Pointer[algo.State] // a rule wider than one word: its words (nil for one word); replaced when forgotten
	src   timebase.Source
	start int64        // where the windows of every rule it builds start (newRule)
	reach atomic.Int64 // how far ahead of the clock a state can be idle (see rule.far)
	// stamped is set, for good, by the first decision at a time the caller
	// gave (AllowN, TakeN, PeekN, ReserveN), before it decides: see mayBeFar.
	stamped atomic.Bool
}

// stamp converts a time the caller gave, noting that one was given.
func (l *Limiter) stamp(t time.Time) int64 {
	if !l.stamped.Load() {
		l.stamped.Store(true)
	}
	return l.src.At(t)
}

// mayBeFar reports whether the limiter may hold a far state (see far): on
// the default clock, which never goes back, and with no time given by a
// caller, every decision was at a reading of the clock no later than a
// later reading, so no state is idle later than its rule's idle time after
// the clock. Call it after loading the state the denial met: a caller's
// time sets stamped before it decides, and once set it stays set, so a
// denial that met a far state (or one retired by forget, which follows a
// far state) sees it set.
func (l *Limiter) mayBeFar() bool { return !l.src.IsMonotonic() || l.stamped.Load() }

// NewRule returns a single-key limiter of rule, starting full (or empty, for
// windows).
func NewRule(spec Rule, opts ...Option) (*Limiter, error) {
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.keyedOnly != "" {
		return nil, fmt.Errorf("%w: %s applies to keyed limiters only", ErrOption, cfg.keyedOnly)
	}
	l := &Limiter{}
	l.src = newSource(&cfg, l)
	l.start = l.src.Now()
	r, err := newRule(spec, &l.src, l.start)
	if err != nil {
		return nil, err
	}
	l.st = algo.State{Word: &l.cell.word}
	if r.set.Words() > 1 {
		l.wide.Store(newWideState(r.set))
	}
	l.reach.Store(r.far)
	l.rule.Store(r)
	return l, nil
}

// newWideState returns a new state of set, wider than one word.
func newWideState(set *algo.Set) *algo.State {
	words := make([]atomic.Uint64, set.Words())
	st := &algo.State{Word: &words[0], Rest: words[1:]}
	var floors [algo.MaxBands]atomic.Uint64
	set.Init(*st, floors[:])
	return st
}

// state returns the limiter's state.
func (l *Limiter) state() algo.State {
	if p := l.wide.Load(); p != nil {
		return *p
	}
	return l.st
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

// checkClock rejects parameters the clock cannot serve exactly.
func checkClock(src *timebase.Source, p *gcra.Params) error {
	if !src.IsCoarse() || p.IsUnlimited() || p.Burst() == 0 {
		return nil
	}
	if room := time.Duration(p.Burst()-1) * p.Interval(); room < coarseTick {
		return fmt.Errorf("%w: (%d-1)·%v = %v < %v; raise the burst to at least %d or use the default clock",
			ErrOption, p.Burst(), p.Interval(), room, coarseTick, 1+(coarseTick+p.Interval()-1)/p.Interval())
	}
	return nil
}

// paddedWord is a limiter's state word alone on a cache line, as an
// atomicbucket.PaddedBucket: a limiter hit from many cores neither suffers
// nor causes false sharing.
type paddedWord struct {
	word atomic.Uint64
	//lint:ignore U1000 prevents false sharing with the next object
	_ [cacheLine - 8]byte
}

// bucket is the limiter's word as a GCRA bucket.
func (l *Limiter) bucket() *algo.Bucket { return algo.BucketOf(&l.cell.word) }

// Allow reports whether one event may happen now, and takes it if so. It
// is shorthand for AllowN(clock.Now(), 1).
func (l *Limiter) Allow() bool {
	// The GCRA path by hand (Bucket.AllowN's first attempt inlines here),
	// as in AllowN: a call less on the hottest path there is.
	r, now := l.rule.Load(), l.src.Now()
	var ok, settled, suspect bool
	if !r.gcra || r.g.IsUnlimited() {
		ok, suspect = l.allowGeneric(r, now, 1)
	} else {
		if ok, settled = l.bucket().TryAllowN(&r.g, now, 1); !settled {
			ok = l.bucket().AllowN(&r.g, now, 1) // the bucket's first attempt inlines above
		}
		// far by hand (it does not inline): one load of a word just loaded.
		suspect = !ok && int64(l.cell.word.Load())-now > r.far
	}
	if !ok && (suspect || l.src.IsCoarse()) {
		return l.allowAgain(r, now, 1, l.src.IsCoarse())
	}
	return ok
}

// allowAgain decides again a request for n that was denied at now under r:
// on a new state if the state was one to forget (see far), else, if fresh,
// at a fresh reading of a coarse clock (a lagging ticker costs a denial one
// precise clock read, and no admissions; see Keyed.allowFresh).
func (l *Limiter) allowAgain(r *rule, now int64, n int, fresh bool) bool {
	if l.far(r, now) && l.forget(now) {
		return l.allowOnce(l.rule.Load(), now, n)
	}
	if fresh {
		if t, later := l.src.Recheck(now); later {
			return l.allowOnce(l.rule.Load(), t, n)
		}
	}
	return false
}

// AllowN reports whether n events may happen at now, and takes them if so.
// n = 0 is admitted and takes nothing; n < 0, and n above what the rule can
// ever admit, are denied.
func (l *Limiter) AllowN(now time.Time, n int) bool {
	r, t := l.rule.Load(), l.stamp(now)
	var ok, settled, suspect bool
	if !r.gcra || r.g.IsUnlimited() {
		ok, suspect = l.allowGeneric(r, t, n)
	} else {
		if ok, settled = l.bucket().TryAllowN(&r.g, t, n); !settled {
			ok = l.bucket().AllowN(&r.g, t, n) // as in Allow: the first attempt inlines above
		}
		suspect = !ok && int64(l.cell.word.Load())-t > r.far // as in Allow
	}
	if suspect {
		return l.allowAgain(r, t, n, false)
	}
	return ok
}

// allowOnce is AllowN on the state as it is.
func (l *Limiter) allowOnce(r *rule, now int64, n int) bool {
	if !r.gcra || r.g.IsUnlimited() {
		ok, _ := l.allowGeneric(r, now, n)
		return ok
	}
	if ok, settled := l.bucket().TryAllowN(&r.g, now, n); settled {
		return ok
	}
	return l.bucket().AllowN(&r.g, now, n)
}

// allowGeneric is allow for every rule but a finite GCRA one. suspect
// reports a denial on a state that may be one to forget (see far):
// allowAgain decides.
func (l *Limiter) allowGeneric(r *rule, now int64, n int) (ok, suspect bool) {
	switch {
	case r.gcra: // Unlimited
		return n >= 0, false // writes nothing
	case r.word != nil:
		_, ok = algo.AdmitWordAt(&l.cell.word, r.word, r.grid.At(now), n)
		return ok, !ok && l.far(r, now)
	}
	for {
		st := l.state()
		ok := r.set.Admit(st, now, n)
		if ok || !l.mayBeFar() || !r.set.Suspect(st, now) {
			return ok, false
		}
		if !r.set.IsRetired(st) {
			return false, true // far
		}
		// A wide state being forgotten is retired first: decide again on
		// the one that replaces it.
	}
}

// Take is Allow for n events with the whole decision: remaining,
// retry-after, reset-after and time to the next event. n = 0 is an admitted
// peek that takes nothing. Take is shorthand for TakeN(clock.Now(), n).
func (l *Limiter) Take(n int) gcra.Decision {
	now := l.src.Now()
	d := l.decide(now, n, false)
	if !d.Allowed && l.src.IsCoarse() {
		if t, later := l.src.Recheck(now); later {
			d = l.decide(t, n, false) // see allowAgain
		}
	}
	return d
}

// TakeN is Take at the given time.
func (l *Limiter) TakeN(now time.Time, n int) gcra.Decision {
	return l.decide(l.stamp(now), n, false)
}

// Peek returns the decision Take(n) would make now, taking nothing;
// Peek(0) describes the limiter as it is. Peek is shorthand for
// PeekN(clock.Now(), n).
func (l *Limiter) Peek(n int) gcra.Decision { return l.decide(l.src.Now(), n, true) }

// PeekN is Peek at the given time.
func (l *Limiter) PeekN(now time.Time, n int) gcra.Decision {
	return l.decide(l.stamp(now), n, true)
}

// decide is TakeN, or PeekN with peek, on a state that is not one to
// forget (a peek forgets it too: it takes nothing, but describes the state
// every later decision meets).
func (l *Limiter) decide(now int64, n int, peek bool) gcra.Decision {
	r := l.rule.Load()
	d := l.decideOnce(r, now, n, peek)
	if !d.Allowed && l.far(r, now) && l.forget(now) {
		d = l.decideOnce(l.rule.Load(), now, n, peek)
	}
	return d
}

func (l *Limiter) decideOnce(r *rule, now int64, n int, peek bool) gcra.Decision {
	switch {
	case !r.gcra:
		for {
			st := l.state()
			d, _ := r.set.Decide(st, now, n, peek)
			if d.Allowed || !r.set.IsRetired(st) {
				return d
			}
		}
	case peek:
		return l.bucket().PeekN(&r.g, now, n)
	}
	d, _ := l.bucket().TakeN(&r.g, now, n)
	return d
}

// far reports whether a denial at now met a state that may be one to
// forget: idle more than r.far after now. Loads only; forget decides.
func (l *Limiter) far(r *rule, now int64) bool {
	if r.gcra {
		return int64(l.cell.word.Load())-now > r.far
	}
	if !l.mayBeFar() {
		return false
	}
	from, _ := r.set.IdleFrom(l.state())
	return from-now > r.far
}

// forget starts the state again as a new one if it becomes idle later than
// any decision at now or at the clock could have made it (see "Clocks that
// jump" in the package doc), and reports whether it did.
func (l *Limiter) forget(now int64) bool {
	r := l.rule.Load()
	if p := l.wide.Load(); p != nil {
		// First retire the old words, so that a decision still on them is
		// denied and decides again; then the new words replace them.
		if !r.set.RetireFar(*p, now, l.src.GiveBack(), &l.reach) {
			return false
		}
		l.wide.CompareAndSwap(p, newWideState(r.set))
		return true
	}
	for {
		// One word: a CompareAndSwap from the far value to a new state's
		// (0 for every one-word rule). A decision racing with it either
		// stores first (and forget looks again) or meets the new state.
		w := l.cell.word.Load()
		from := int64(w)
		if !r.gcra {
			from, _ = r.set.IdleFrom(l.st)
		}
		if !algo.Far(from, now, l.src.GiveBack(), &l.reach) {
			return false
		}
		if l.cell.word.CompareAndSwap(w, 0) {
			return true
		}
	}
}

// Quota describes the limiter's rule.
func (l *Limiter) Quota() Quota { return l.rule.Load().quota() }

// SetRule changes the rule from the next decision on. The rule must be
// compatible with the current one (the same algorithm and window:
// ErrIncompatible). It changes nothing on error.
//
// The state stays. For GCRA, as a GCRA stored in Redis does when a caller
// passes new parameters: a full bucket stays full, and a bucket that needs
// time Δ to be full still needs Δ, so right after the change it holds
// floor((B'·T' − Δ) / T') tokens under the new limit. For windows the counts
// stay and the new count limit applies to them. Each decision reads the
// rule once, so a call that races with SetRule is decided wholly under the
// old or wholly under the new rule, never a mix.
func (l *Limiter) SetRule(spec Rule) error {
	r, err := newRule(spec, &l.src, l.start)
	if err != nil {
		return err
	}
	if err := compatible(l.rule.Load(), r); err != nil {
		return err
	}
	algo.Raise(&l.reach, r.far) // first the reach: no decision under r finds its states far
	l.rule.Store(r)
	return nil
}
