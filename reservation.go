package atomiclimit

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// A Reservation holds tokens that a Limiter has promised for a time that may
// lie in the future: the leaky-bucket pacing form of the limiter. Act after
// Delay, or Cancel to give back what no later reservation depends on. A Reservation belongs to one
// goroutine and must not be copied: Cancel refunds when the state is still
// the one its admission stored, so a copy cancelled later could refund a
// newer reservation that happens to have stored the same state.
type Reservation struct {
	cell     *algo.Bucket     // the bucket that holds its tokens
	src      *timebase.Source // its limiter's clock
	params   *gcra.Params     // the parameters it was admitted under
	taken    algo.Taken       // what Refund needs
	actAt    int64            // when its tokens are due, ns since the epoch
	n        int
	finished bool  // cancelled, or nothing left to cancel
	owner    giver // a keyed limiter told of the give-back, or nil
	key      *cell // the keyed limiter's cell that holds the tokens
}

// A giver is told that a cell's state was given something back: a keyed
// limiter, whose full store must then look at the key again (it may be idle
// sooner than the store last saw).
type giver interface{ gaveBack(c *cell) }

// Reserve is shorthand for ReserveN(clock.Now(), 1).
func (l *Limiter) Reserve() (*Reservation, error) {
	return l.reservePtr(l.src.Precise(), 1)
}

// ReserveN reserves n tokens at now, however long (up to gcra.MaxWait)
// they take to become available, and returns a Reservation whose Delay says
// how long to wait. It fails, consuming nothing, with an error wrapping
// gcra.ErrInvalidN for n < 0 and gcra.ErrExceedsBurst for n > burst (or
// DenyAll), which no wait can satisfy, and ErrDeadline if the tokens would be
// due more than gcra.MaxWait (about 36 years) ahead.
func (l *Limiter) ReserveN(now time.Time, n int) (*Reservation, error) {
	return l.reservePtr(l.stamp(now), n)
}

func (l *Limiter) reservePtr(now int64, n int) (*Reservation, error) {
	r, _, err := l.reserve(now, n, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (l *Limiter) reserve(now int64, n int, maxWait int64) (Reservation, int64, error) {
	r := l.rule.Load()
	if !r.gcra {
		return Reservation{}, 0, errPacing(r)
	}
	if l.far(r, now) && l.forget(now) {
		r = l.rule.Load()
	}
	return reserveOn(l.bucket(), &r.g, &l.src, now, n, maxWait, &l.reach)
}

// errPacing is the error of Reserve and Wait on a rule other than GCRA:
// pacing (a reservation due in the future, refunded on cancel) is the
// leaky bucket's, and the windows have no such queue.
func errPacing(r *rule) error {
	return fmt.Errorf("atomiclimit: Reserve and Wait pace a GCRA rule, not %v: %w", r.spec, errors.ErrUnsupported)
}

// reserveOn admits n tokens of b under p, due within maxWait ns of now (at
// most gcra.MaxWait). A request that would wait longer fails with
// ErrDeadline, returning the wait it would need; one that can never pass
// fails with gcra.ErrInvalidN or gcra.ErrExceedsBurst, and the wait
// gcra.Never.
func reserveOn(b *algo.Bucket, p *gcra.Params, src *timebase.Source, now int64, n int, maxWait int64, reach *atomic.Int64) (Reservation, int64, error) {
	if n < 0 {
		return Reservation{}, int64(gcra.Never), fmt.Errorf("%w: n=%d", gcra.ErrInvalidN, n)
	}
	if n == 0 {
		// A peek: due now, nothing reserved, nothing to cancel (no cell).
		return Reservation{src: src, params: p, actAt: now, finished: true}, 0, nil
	}
	if n > p.Burst() {
		return Reservation{}, int64(gcra.Never), fmt.Errorf("%w: n=%d, burst=%d", gcra.ErrExceedsBurst, n, p.Burst())
	}
	taken, wait, ok := b.ReserveN(p, now, n, maxWait, reach)
	if !ok {
		return Reservation{}, wait, fmt.Errorf("%w: n=%d needs %v", ErrDeadline, n, time.Duration(wait))
	}
	return Reservation{cell: b, src: src, params: p, taken: taken, actAt: now + wait, n: n}, 0, nil
}

// Delay returns how long to wait before acting on the reservation: 0 if its
// tokens were available at once.
func (r *Reservation) Delay() time.Duration {
	if r == nil || r.cell == nil {
		return 0
	}
	return max(time.Duration(r.actAt-r.src.Now()), 0)
}

// DelayFrom returns how long after now the reservation's tokens are due.
func (r *Reservation) DelayFrom(now time.Time) time.Duration {
	if r == nil || r.cell == nil {
		return 0
	}
	return max(time.Duration(r.actAt-r.src.At(now)), 0)
}

// Cancel gives back the reservation's tokens if they are not yet due, as
// far as no later reservation depends on them (x/time/rate's rule): the
// later reservations keep the times they were promised, so that no instant
// ever has more than the burst due, and the tokens they depend on stay
// taken. A reservation with nothing reserved after it comes back whole:
// the limiter is as if it had never been made (cancelling several in the
// reverse order of reserving gives all of them back). The clock is read
// after the bucket's state is loaded (see atomicbucket.Bucket.Refund). A
// second Cancel does nothing.
func (r *Reservation) Cancel() {
	if r == nil || r.finished || r.cell == nil {
		return
	}
	r.cancel(r.src.GiveBack())
}

// CancelAt is Cancel at the given time, for callers that stamp their own
// times (as ReserveN's): now must not precede the time of any decision of
// the limiter since the reservation, or the give-back could be generous.
func (r *Reservation) CancelAt(now time.Time) {
	if r == nil || r.finished || r.cell == nil {
		return
	}
	r.cancel(fixedClock(r.src.At(now)))
}

// fixedClock is a Clock that always reads the same time.
type fixedClock int64

func (c fixedClock) Now() int64 { return int64(c) }

func (r *Reservation) cancel(clk algo.Clock) (refunded bool) {
	r.finished = true
	if clk.Now() > r.actAt {
		return false // its tokens were due and are taken to be used
	}
	if !r.cell.Refund(r.params, r.taken, r.n, clk) {
		return false
	}
	if r.owner != nil {
		r.owner.gaveBack(r.key)
	}
	return true
}
