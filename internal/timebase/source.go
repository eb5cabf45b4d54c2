// Package timebase gives limiters their notion of "now": nanoseconds since an
// epoch, on the monotonic clock by default, from an injected Clock for tests,
// or from the process-wide coarse clock for the cheapest hot path.
package timebase

import (
	"runtime"
	"sync/atomic"
	"time"
	_ "unsafe" // cheaprand's linkname
)

// A Clock tells the time. time.Now is the implementation the limiters use
// unless they are given another; tests inject a fake one.
type Clock interface {
	Now() time.Time
}

// processEpoch is the time base of every limiter that uses the monotonic or
// the coarse clock. It carries a monotonic reading, so time.Since(processEpoch)
// reads only the monotonic clock and never jumps with the wall clock.
var processEpoch = time.Now()

type mode uint8

const (
	modeMonotonic mode = iota
	modeCoarse
	modeClock
)

// A Source reads the time as nanoseconds since its epoch, clamped by
// nanos to [0, MaxNow]. (The coarse reading is stored unclamped:
// time.Since of the process epoch is never negative, and stays below MaxNow
// for 73 years of uptime.) Its zero value reads the monotonic clock.
// A Source is immutable after construction and safe for concurrent use.
type Source struct {
	mode   mode
	coarse *atomic.Int64 // modeCoarse: the cached reading, on processEpoch's base
	// modeCoarse: the reading the ticker stored at its last tick (nil: it
	// never ran). While the cached reading is still that one, the ticker
	// ran on time and a denial's Recheck mostly skips the precise clock.
	tick  *atomic.Int64
	fresh func() int64 // modeCoarse: a precise reading for Refresh (nil: time.Since(epoch))
	// modeCoarse: Recheck's draw (nil: cheaprand); tests make it
	// deterministic (ManualCoarse).
	draw  func() uint32
	clock Clock     // modeClock
	epoch time.Time // processEpoch, or the injected clock's time at construction
}

// Monotonic returns the default Source: time.Since(epoch), monotonic only.
func Monotonic() Source { return Source{mode: modeMonotonic, epoch: processEpoch} }

// FromClock returns a Source that reads c, with c.Now() as its epoch.
func FromClock(c Clock) Source { return Source{mode: modeClock, clock: c, epoch: c.Now()} }

// Now returns the current time in nanoseconds since the epoch. The coarse
// path is inlined into callers; the others are one call away.
func (s *Source) Now() int64 {
	if s.mode == modeCoarse {
		return s.coarse.Load() // a plain load: the cheapest clock there is
	}
	return s.precise()
}

func (s *Source) precise() int64 {
	if s.mode == modeClock {
		return nanos(s.clock.Now().Sub(s.epoch))
	}
	return nanos(time.Since(s.epoch))
}

// Refresh is for a decision at now, read from s, that was denied: for a
// coarse Source it reads the monotonic clock, raises the shared coarse
// reading to it if that lags by more than a tick, and returns it with true
// if it is later than now (the caller then decides again). The coarse reading lags whenever the ticker
// goroutine waits for a P (up to tens of milliseconds when every P runs
// work that does not yield); a denial is where a lag costs admissions, so
// a denial pays one precise clock read to end it, and an admission pays
// nothing. For the other sources it returns now and false.
func (s *Source) Refresh(now int64) (int64, bool) {
	if s.mode != modeCoarse {
		return now, false
	}
	var t int64
	if s.fresh != nil {
		t = s.fresh()
	} else {
		t = int64(time.Since(s.epoch))
	}
	// Raise the shared reading only when it lags by more than two ticks (the
	// ticker is stalled, not merely late: a timer wakes up to a tick late on
	// a busy machine): a flood of denials on a ticker that runs then writes
	// nothing that every core's reads would have to fetch, and the reading
	// stays the ticker's own (see Recheck).
	if t-s.coarse.Load() > stalled {
		raise(s.coarse, t)
	}
	return t, t > now
}

// Recheck is Refresh for a denial, at about the cost of the coarse clock
// while its ticker runs: when the cached reading is the one the ticker
// stored at its last tick, one denial in recheckEvery, chosen at random,
// reads the precise clock, and the others decide at the reading as it is.
// A ticker that stalls is found out within about that many denials (one
// finds the reading lagging by more than a tick and raises it); from then
// on the reading is a denial's, not the ticker's, and every denial reads
// the precise clock, as Refresh does, until the ticker runs again. A flood
// of denials thus writes nothing and reads one clock in recheckEvery.
func (s *Source) Recheck(now int64) (int64, bool) {
	if s.mode != modeCoarse {
		return now, false
	}
	if s.tick != nil && s.coarse.Load() == s.tick.Load() {
		// The ticker's own reading: it ran at its last tick.
		var r uint32
		if s.draw == nil {
			r = cheaprand()
		} else {
			r = s.draw()
		}
		if r%recheckEvery != 0 {
			return now, false
		}
	}
	return s.Refresh(now)
}

// cheaprand is the runtime's per-thread wyrand: a multiply and an add on
// the M's own state, about a nanosecond, where math/rand/v2's ChaCha8 takes
// several (and was most of a coarse denial's cost). Recheck needs a cheap
// draw, not an unpredictable one: a client cannot see which denial read
// the clock. The runtime keeps this name for packages that reach it so
// (go.dev/issue/67401), xsync among them.
//
//go:linkname cheaprand runtime.cheaprand
func cheaprand() uint32

// stalled is how far the coarse reading must lag for a Refresh to raise it.
const stalled = 2 * int64(CoarseTick)

// recheckEvery is how many denials at the ticker's reading share one
// precise clock read, on average.
const recheckEvery = 64

// Precise is Now, but for a coarse Source a fresh reading (Refresh's): for
// the calls that turn a reading into a wait (Reserve, Wait), where a lagging
// reading would be waited out for nothing.
func (s *Source) Precise() int64 {
	now := s.Now()
	if t, later := s.Refresh(now); later {
		return t
	}
	return now
}

// GiveBack returns s as the clock of give-backs. gcra.Params.Refund needs a
// reading no earlier than any decision the state it loads was decided at;
// a coarse reading can lag one that Refresh stamped, so on a coarse Source
// a give-back reads the fresh clock (Precise). Give-backs are off the hot
// path: the read costs nothing there.
func (s *Source) GiveBack() GiveBackClock { return GiveBackClock{s} }

// A GiveBackClock reads a Source for a give-back (see Source.GiveBack).
type GiveBackClock struct{ s *Source }

// Now returns s.Precise().
func (c GiveBackClock) Now() int64 { return c.s.Precise() }

// IsCoarse reports whether s reads the coarse clock.
func (s *Source) IsCoarse() bool { return s.mode == modeCoarse }

// IsMonotonic reports whether s is the default Source: the monotonic
// clock, which never goes back.
func (s *Source) IsMonotonic() bool { return s.mode == modeMonotonic }

// At converts t to nanoseconds since the epoch. Times before the epoch count
// as the epoch (see gcra.Nanos: only ever stricter).
func (s *Source) At(t time.Time) int64 { return nanos(t.Sub(s.epoch)) }

// MaxNow is the latest time a Source reads, in ns since its epoch: 2^61
// ns, about 73 years, gcra.MaxNow (a test of the root package holds the two
// together: the clock knows no arithmetic, only where the arithmetic's
// times end).
const MaxNow = int64(1) << 61

// nanos is d clamped to [0, MaxNow], as gcra.Nanos clamps it.
func nanos(d time.Duration) int64 { return min(max(int64(d), 0), MaxNow) }

// Time converts nanoseconds since the epoch back to a time.Time. For the
// monotonic and coarse sources the result carries a monotonic reading, so
// comparing it with a context deadline uses the monotonic clock.
func (s *Source) Time(ns int64) time.Time { return s.epoch.Add(time.Duration(ns)) }

// Choose returns the Source a limiter's options chose: src when set (tests
// drive the coarse path by hand), the coarse clock, an injected clock, or the
// monotonic default. A coarse Source holds a reference on the process-wide
// ticker until owner is garbage collected.
func Choose[T any](owner *T, src *Source, coarse bool, clock Clock) Source {
	switch {
	case src != nil:
		return *src
	case coarse:
		s, release := Coarse()
		// The ticker stops when the last coarse limiter is unreachable.
		runtime.AddCleanup(owner, func(release func()) { release() }, release)
		return s
	case clock != nil:
		return FromClock(clock)
	default:
		return Monotonic()
	}
}
