package redislimit_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// The reservation model. A world runs one key of a Limiter in a real
// redis-server, on an explicit timeline (µs after t0, the server's TIME
// when the world starts), beside a model of the same key in process:
// gcra.Params's Reserve, Decide and Refund in ns, with the two counters a
// stripe keeps (give-backs that shifted, reservations that queued; their
// readings give Refund its gcra.Since), and the stamps Redis keeps (the
// epoch E and the queue stamp Q, to predict the stored value). Every step
// (take, reserve, cancel, refund, peek) runs on both, and the world
// checks, after it, that they agree on every answer, every stored value
// and every expiry; and that the schedule conforms: the live admissions
// (neither given back nor cancelled) at the times they are due hold no
// window [a, b] with more than B + (b − a)/T tokens (no instant more than
// B), and the stored TAT is at least the TAT they leave (max over k of
// d_k + G(d_k), G(x) the tokens due at or after x): what keeps every later
// admission conforming (gcra/refund.go's two properties).
//
// Times only move forward: a give-back decided at a time before a decision
// made since could be generous (atomiclimit.Reservation.CancelAt), and
// TIME stepping back is the corrupt tests' and the vectors' concern.

// An admission is one request admitted on the key, as the world tracks it.
type admission struct {
	n           int
	reservation bool
	// In ns on the timeline: the TAT it stored, when it was decided and
	// when its tokens are due.
	stored, at, due int64
	// The stripe's counters before its decision (its own queue counted).
	shifts, queued uint64
	live           bool
	receipt        atomiclimit.Receipt     // a take's
	res            *redislimit.Reservation // a reservation's
}

type world struct {
	t    *testing.T
	ctx  context.Context
	c    *redis.Client
	l    *redislimit.Limiter[string]
	p    *gcra.Params
	t0   int64 // µs: the timeline's 0 on Redis TIME
	span int64 // B·T, µs

	// The model: TAT in ns on the timeline (0: absent); the stripe's
	// counters; the stamps, µs on Redis TIME (0: none).
	tat            int64
	shifts, queued uint64
	epoch, queue   int64

	adms []*admission
	now  int64 // µs: the last step's time
	// The last reservation's reply, as Redis gave it (OnReserved).
	replyOK   bool
	replyWait time.Duration
	counts    map[string]int
}

func newWorld(t *testing.T, c *redis.Client, limit gcra.Limit, burst int) *world {
	l, err := redislimit.New(c, limit, burst, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	w := &world{t: t, ctx: context.Background(), c: c, l: l, p: l.Params(), t0: serverNow(t, c), counts: map[string]int{}}
	w.span = int64(w.p.Span()) / us
	l.OnReserved(func(_ context.Context, ok bool, wait time.Duration, _, _, _ int64) { w.replyOK, w.replyWait = ok, wait })
	return w
}

// stamp is the next stamp of the model's key at now (µs on the timeline).
func (w *world) stamp(now int64) int64 { return max(max(w.epoch, w.queue)+1, w.t0+now) }

// take is Take(n) at now (µs on the timeline).
func (w *world) take(now int64, n int) *admission {
	w.t.Helper()
	w.now = now
	next, want := w.p.Decide(w.tat, now*us, n)
	r, rc := w.l.TakeAt(w.ctx, "k", n, w.t0+now)
	require.NoError(w.t, r.Err)
	require.Equal(w.t, want, r.Decision, "take %d at %d", n, now)
	w.counts["take"]++
	if !want.Allowed || n == 0 {
		require.Zero(w.t, rc)
		return nil
	}
	a := &admission{n: n, stored: next, at: now * us, due: now * us, shifts: w.shifts, queued: w.queued, live: true, receipt: rc}
	require.Equal(w.t, atomiclimit.RemoteReceipt([3]uint64{uint64(w.t0 + next/us), uint64(w.t0 + now), uint64(max(w.epoch, w.queue))}), rc, "take's receipt")
	w.tat = next
	w.adms = append(w.adms, a)
	w.wrote(now)
	return a
}

// reserve is Reserve(n) at now, waiting up to maxWait.
func (w *world) reserve(now int64, n int, maxWait time.Duration) *admission {
	w.t.Helper()
	w.now = now
	next, wait, ok := w.p.Reserve(w.tat, now*us, n, int64(maxWait))
	res, err := w.l.ReserveAt(w.ctx, "k", n, maxWait, w.t0+now)
	where := fmt.Sprintf("reserve %d at %d, up to %v", n, now, maxWait)
	require.Equal(w.t, ok, w.replyOK, where)
	require.Equal(w.t, time.Duration(wait), w.replyWait, "%s: the wait", where)
	if !ok {
		require.ErrorIs(w.t, err, atomiclimit.ErrDeadline, where)
		require.Nil(w.t, res)
		w.counts["reserve-refused"]++
		return nil
	}
	require.NoError(w.t, err, where)
	a := &admission{n: n, reservation: true, stored: next, at: now * us, due: now*us + max(wait, 0), live: true, res: res}
	if wait > 0 {
		// Counted before its store, and in its own reading (algo.Stripe).
		w.queued++
		w.queue = w.stamp(now)
		w.counts["reserve-queued"]++
	} else {
		w.counts["reserve-now"]++
	}
	a.shifts, a.queued = w.shifts, w.queued
	stored, at, stamp := res.Taken()
	require.Equal(w.t, []int64{w.t0 + next/us, w.t0 + now, max(w.epoch, w.queue)}, []int64{stored, at, stamp}, "%s: what its Cancel needs", where)
	w.tat = next
	w.adms = append(w.adms, a)
	w.wrote(now)
	return a
}

// giveBack gives a back at now: Refund for a take, Cancel for a
// reservation (nothing once its tokens are due: they are used).
func (w *world) giveBack(a *admission, now int64) bool {
	w.t.Helper()
	w.now = now
	require.True(w.t, a.live, "given back twice")
	var (
		got bool
		err error
	)
	if a.reservation {
		got, err = a.res.CancelAt(w.ctx, w.t0+now)
	} else {
		got, err = w.l.RefundAt(w.ctx, "k", a.n, a.receipt, w.t0+now)
	}
	require.NoError(w.t, err)
	if a.reservation && now*us > a.due {
		// Its tokens are due: used, live, and nothing comes back.
		require.False(w.t, got, "a cancel after the tokens are due")
		w.counts["cancel-due"]++
		return false
	}
	a.live = false
	since := gcra.Anything
	switch {
	case w.shifts == a.shifts:
		since = gcra.Alone
	case w.queued == a.queued:
		since = gcra.NoneQueued
	}
	gnow := max(now*us, a.at) // the script's now: never before the admission
	back, shifts, want := w.p.Refund(w.tat, gnow, a.stored, a.at, a.n, since)
	if w.tat == 0 {
		want = false // absent: nothing to give back
	}
	require.Equal(w.t, want, got, "give-back of %d (reservation %v) at %d, %v", a.n, a.reservation, now, since)
	w.counts[fmt.Sprintf("give-back/%v/%v", since, want)]++
	if !want {
		return false
	}
	w.tat = back
	if shifts {
		w.shifts++
		w.epoch = w.stamp(gnow / us)
	}
	if back == gnow && w.epoch == 0 {
		w.tat, w.queue = 0, 0 // deleted
		w.counts["deleted"]++
		return true
	}
	w.wrote(gnow / us)
	return true
}

// peek is Peek(n) at now.
func (w *world) peek(now int64, n int) {
	w.t.Helper()
	w.now = now
	_, want := w.p.Decide(w.tat, now*us, n)
	require.Equal(w.t, want, w.l.DecideAt(w.ctx, "k", n, false, w.t0+now).Decision, "peek %d at %d", n, now)
}

// wrote notes that Redis stored the model's state at now (µs): a full
// bucket whose epoch is B·T old or more expires 1ms after the write, in
// real time, which the world does itself (and the model forgets it).
func (w *world) wrote(now int64) {
	idle := w.tat / us
	if w.epoch > 0 {
		idle = max(idle, w.epoch-w.t0+w.span)
	}
	if idle <= now {
		require.Contains(w.t, []string{"", w.value()}, stored(w.t, w.c, w.l.Key("k")))
		require.NoError(w.t, w.c.Del(w.ctx, w.l.Key("k")).Err())
		w.tat, w.epoch, w.queue = 0, 0, 0
		w.counts["expired"]++
		return
	}
	pttl, err := w.c.PTTL(w.ctx, w.l.Key("k")).Result()
	require.NoError(w.t, err)
	ttl := time.Duration((idle-now+999)/1000+1) * time.Millisecond
	require.LessOrEqual(w.t, pttl, ttl, "expiry")
	require.Greater(w.t, pttl, ttl-time.Minute, "expiry")
}

// value is what the model says Redis stores.
func (w *world) value() string {
	switch {
	case w.tat == 0:
		return ""
	case w.queue > 0:
		return fmt.Sprintf("%d:%d:%d", w.t0+w.tat/us, w.epoch, w.queue)
	case w.epoch > 0:
		return fmt.Sprintf("%d:%d", w.t0+w.tat/us, w.epoch)
	}
	return strconv.FormatInt(w.t0+w.tat/us, 10)
}

// check checks the stored value and the schedule at the last step's time:
// a state decides as max(TAT, now), as a deleted key (TAT ≤ now) does.
func (w *world) check(where string) {
	w.t.Helper()
	require.Equal(w.t, w.value(), stored(w.t, w.c, w.l.Key("k")), "%s: stored value", where)
	var dues []dueN
	for _, a := range w.adms {
		if a.live {
			dues = append(dues, dueN{a.due, a.n})
		}
	}
	T := int64(w.p.Interval())
	sched := conforms(w.t, dues, w.p.Burst(), T, where)
	require.GreaterOrEqual(w.t, max(w.tat, w.now*us), sched, "%s: the state is below the TAT the schedule leaves", where)
}

// A dueN is n tokens due at a time (ns).
type dueN struct {
	at int64
	n  int
}

// conforms checks a schedule against GCRA's bound, burst B and interval T
// (ns): no window [a, b] holds more than B + (b − a)/T tokens due, so no
// instant more than B (reservation_test.go's assertConforms). It returns
// the TAT the schedule leaves: max over k of d_k + G(d_k), G(x) the work
// (tokens · T) due at or after x.
func conforms(t *testing.T, dues []dueN, burst int, T int64, where string) (tat int64) {
	t.Helper()
	sort.Slice(dues, func(i, j int) bool { return dues[i].at < dues[j].at })
	for i := range dues {
		tokens := 0
		for j := i; j < len(dues); j++ {
			tokens += dues[j].n
			if j+1 < len(dues) && dues[j+1].at == dues[j].at {
				continue // a window ends after every admission due at its end
			}
			if bound := int64(burst) + (dues[j].at-dues[i].at)/T; int64(tokens) > bound {
				t.Fatalf("%s: %d tokens due in [%v, %v], over burst + window/T = %d", where, tokens, dues[i].at, dues[j].at, bound)
			}
		}
	}
	work := int64(0)
	for i := len(dues) - 1; i >= 0; i-- {
		work += int64(dues[i].n) * T
		if i == 0 || dues[i-1].at != dues[i].at {
			tat = max(tat, dues[i].at+work)
		}
	}
	return tat
}

// tatOf is the TAT of a stored GCRA value, without its stamps.
func tatOf(v string) string { return strings.SplitN(v, ":", 2)[0] }

// atoi is strconv.ParseInt for a test.
func atoi(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return v
}
