package atomiclimit

import (
	"context"
	"time"

	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// WithSource makes a Limiter read src (tests drive the coarse path by hand).
func WithSource(src timebase.Source) Option {
	return optionFunc(func(cfg *config) { cfg.source = &src })
}

// WaitNWithTimer is WaitN with a hand-fired timer.
func (l *Limiter) WaitNWithTimer(ctx context.Context, n int, timer func(time.Duration) (<-chan time.Time, func() bool)) error {
	return l.waitN(ctx, n, l.src.Now(), timer)
}

// CoarseRunning reports whether the process-wide coarse ticker runs.
var CoarseRunning = timebase.CoarseRunning

// CancelReporting is Cancel, reporting whether it refunded anything.
func (r *Reservation) CancelReporting() bool {
	if r.finished {
		return false
	}
	return r.cancel(r.src.GiveBack())
}

// WaitNWithTimer is Keyed.WaitN with a hand-fired timer.
func (k *Keyed[K]) WaitNWithTimer(ctx context.Context, key K, n int, timer func(time.Duration) (<-chan time.Time, func() bool)) error {
	return k.waitN(ctx, key, n, k.src.Now(), timer)
}

// SweeperRunning reports whether k's background sweeper goroutine is running.
func (k *Keyed[K]) SweeperRunning() bool {
	if k.st.Done() == nil {
		return false
	}
	select {
	case <-k.st.Done():
		return false
	default:
		return true
	}
}

// Floor returns the keyed limiter's floor (ns since its epoch).
func (k *Keyed[K]) Floor() int64 { return int64(k.cells.floors[0].Load()) }

// RetireKey retires key's cell as the sweeper does at now (ns since the
// epoch), without removing it from the map: the state a caller meets while a
// sweeper is between its two steps.
func (k *Keyed[K]) RetireKey(key K, now int64) bool {
	c, ok := k.m.Load(k.hash(key))
	return ok && k.st.RetireIdle(c, now)
}

// HeldKeys counts the map's entries one by one (Len reads a counter).
func (k *Keyed[K]) HeldKeys() int {
	n := 0
	k.m.Range(func(uint64, *cell) bool { n++; return true })
	return n
}

// Nanos converts t to k's time base.
func (k *Keyed[K]) Nanos(t time.Time) int64 { return k.src.At(t) }

// SweeperDone returns the channel closed when k's sweeper has stopped.
func (k *Keyed[K]) SweeperDone() <-chan struct{} { return k.st.Done() }

// BandRemaining returns what band i of key's rule has left now (-1 if the
// limiter does not hold key).
func (k *Keyed[K]) BandRemaining(key K, i int) int {
	c, ok := k.m.Load(k.hash(key))
	if !ok {
		return -1
	}
	r, st := k.cells.rule(c), k.cells.state(c)
	return r.set.Band(i).Decide(r.set.Sub(st, i), k.src.Now(), 0, true).Remaining
}

// TakeQuota is takeInto, which a Stack decides a *Keyed policy with, as
// results.
func (k *Keyed[K]) TakeQuota(ctx context.Context, key K, n int) (Decision, Receipt, Quota, error) {
	var o Outcome
	err := k.takeInto(ctx, key, n, &o)
	return o.Decision, o.Receipt, o.Quota, err
}
