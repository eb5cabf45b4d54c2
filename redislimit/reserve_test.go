package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// TestReserveVectors: reservations and their cancels on a timeline (T an
// hour, so that nothing expires in real time), each step run on Redis
// and on the model (reserve_model_test.go), which must agree, with the
// schedule checked after every step; and hand-written expectations, which
// are x/time/rate's rule and gcra's TestRefund rows in Redis.
func TestReserveVectors(t *testing.T) {
	s := sharedServer(t)
	const h = int64(time.Hour / time.Microsecond)
	forever := gcra.MaxWait

	t.Run("cancel-behind-3", func(t *testing.T) {
		// Reserve 3, then 1 (due at 1h), then 3 (due at 4h), all at 0;
		// cancel the 1: the 3 behind it are due one token after it, so
		// nothing comes back, and the state stays 7h.
		w := newWorld(t, s.client(t), gcra.Every(time.Hour), 3)
		w.reserve(0, 3, forever)
		one := w.reserve(0, 1, forever)
		w.reserve(0, 3, forever)
		assert.Equal(t, int64(time.Hour), one.due)
		assert.False(t, w.giveBack(one, 0))
		w.check("after")
		assert.Equal(t, fmt.Sprintf("%d:0:%d", w.t0+7*h, w.t0+1), w.value(), "7h; two reservations queued: stamps t0, t0 + 1")
	})

	t.Run("cancel-behind-1", func(t *testing.T) {
		// Reserve 3, then 2 (due at 2h), then 1 (due at 3h); cancel the
		// 2: all of it comes back (the 1 behind it is due 3 tokens after
		// the first 3), and the state is 4h.
		w := newWorld(t, s.client(t), gcra.Every(time.Hour), 3)
		w.reserve(0, 3, forever)
		two := w.reserve(0, 2, forever)
		w.reserve(0, 1, forever)
		assert.True(t, w.giveBack(two, 0))
		w.check("after")
		assert.Equal(t, w.t0+4*h, w.t0+w.tat/us)
	})

	t.Run("reverse-order", func(t *testing.T) {
		// Cancels in the reverse order of reserving give everything back:
		// the key ends absent.
		w := newWorld(t, s.client(t), gcra.Every(time.Hour), 2)
		var rs []*admission
		for range 4 {
			rs = append(rs, w.reserve(0, 2, forever))
		}
		for i := len(rs) - 1; i >= 0; i-- {
			assert.True(t, w.giveBack(rs[i], 0), "cancel %d", i)
			w.check(fmt.Sprint("cancel ", i))
		}
		assert.Empty(t, w.value())
	})

	t.Run("issue-28", func(t *testing.T) {
		// Burst 4: reserve 4, then m, then 4, all at 0; cancel the m and
		// reserve m again: the new one is due where the schedule without
		// the cancelled one ends, never with the third's 4 (5 or 8 due at
		// once before the in-process fix).
		for m, wantDue := range map[int]int64{1: 6, 4: 12} {
			w := newWorld(t, s.client(t), gcra.Every(time.Hour), 4)
			w.reserve(0, 4, forever)
			mid := w.reserve(0, m, forever)
			w.reserve(0, 4, forever)
			w.giveBack(mid, 0)
			again := w.reserve(0, m, forever)
			w.check(fmt.Sprint("m=", m))
			assert.Equal(t, wantDue*int64(time.Hour), again.due, "m=%d", m)
		}
	})

	t.Run("due", func(t *testing.T) {
		// A reservation cancelled at its due instant comes back (its
		// tokens are not used yet); 1µs later it is used and nothing
		// comes back.
		w := newWorld(t, s.client(t), gcra.Every(time.Hour), 1)
		w.reserve(0, 1, forever)
		at := w.reserve(0, 1, forever)
		assert.True(t, w.giveBack(at, h), "at its due instant")
		w.check("at")
		w.reserve(h, 1, forever) // due at once: the bucket is full again
		late := w.reserve(h, 1, forever)
		require.Equal(t, 2*int64(time.Hour), late.due)
		assert.False(t, w.giveBack(late, 2*h+1), "1µs after")
		w.check("after")
	})

	t.Run("longest-wait", func(t *testing.T) {
		// A wait of exactly the longest wait is reserved; 1µs less fails
		// with ErrDeadline and stores nothing.
		w := newWorld(t, s.client(t), gcra.Every(time.Hour), 2)
		w.reserve(0, 2, 0)
		before := w.value()
		assert.Nil(t, w.reserve(0, 1, time.Hour-time.Microsecond))
		assert.Equal(t, before, stored(t, w.c, w.l.Key("k")), "a refusal stores nothing")
		assert.Equal(t, time.Hour, w.replyWait, "the wait it needed")
		assert.NotNil(t, w.reserve(0, 1, time.Hour))
		w.check("after")
		// A take behind the reservation is denied until the reservation's
		// slot is refilled too.
		assert.Nil(t, w.take(h, 1))
		assert.NotNil(t, w.take(2*h, 1))
		w.check("take")
	})

	t.Run("take-given-back-behind-a-queue", func(t *testing.T) {
		// Burst 2. P and K taken at 0 (TAT 2h); P given back: K's slot
		// moves to [0, 1h] (a shift: an epoch). R reserves 2, due at 1h
		// (TAT 3h: a queue stamp). K given back now: gcra.Anything, and
		// nothing comes back, since R is due one token after K's slot.
		// Taken as gcra.NoneQueued (the key's queue not counted), a whole
		// T would come back (TAT 2h, below the 3h R leaves), and a take
		// at 1h would make 3 tokens due at 1h: over the burst.
		w := newWorld(t, s.client(t), gcra.Every(time.Hour), 2)
		p := w.take(0, 1)
		k := w.take(0, 1)
		assert.True(t, w.giveBack(p, 0))
		r := w.reserve(0, 2, forever)
		assert.Equal(t, int64(time.Hour), r.due)
		assert.False(t, w.giveBack(k, 0), "R depends on it")
		w.check("after K")
		assert.Nil(t, w.take(h, 1), "R holds the burst at 1h")
		w.check("at 1h")
	})

	t.Run("take-behind-queue", func(t *testing.T) {
		// A take admitted after a queued reservation, given back after a
		// give-back that shifted: gcra.Anything, the strictest.
		w := newWorld(t, s.client(t), gcra.Every(time.Hour), 4)
		a := w.take(0, 2)
		w.reserve(0, 3, forever) // due at 1h
		w.giveBack(a, 0)         // shifts: epoch
		b := w.take(3*h, 1)
		w.reserve(3*h, 2, forever)
		w.giveBack(w.adms[1], 3*h) // the first reservation, due: used
		w.check("b")
		w.giveBack(b, 3*h)
		w.check("after")
	})
}

// TestReserveMatchesGCRA runs random takes, reservations (waiting up to a
// random longest wait), cancels, give-backs of takes (of the last
// admission, or any other live) and peeks on one key, with time going
// forward, against the model, which checks every answer, stored value and
// expiry, and the schedule after every step. Times and T are whole
// quarters of an hour, so that no key expires during the test but for a
// full bucket, which the world expires itself.
func TestReserveMatchesGCRA(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	const q = int64(15 * time.Minute / time.Microsecond)
	seeds, steps := uint64(40), 300
	if testing.Short() || raceEnabled {
		seeds = 12
	}
	counts := map[string]int{}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, 30))
		burst := 1 + rng.IntN(5)
		w := newWorld(t, c, gcra.Every(time.Duration(1+rng.IntN(4))*15*time.Minute), burst)
		T := w.p.Interval()
		var now int64
		for i := range steps {
			if rng.IntN(3) == 0 {
				now += q * rng.Int64N(4)
			}
			n := 1 + rng.IntN(burst)
			where := fmt.Sprintf("seed %d step %d", seed, i)
			switch op := rng.IntN(10); {
			case op < 3:
				w.take(now, n)
			case op < 6:
				maxWait := []time.Duration{0, T, T * time.Duration(rng.IntN(4*burst)), gcra.MaxWait}[rng.IntN(4)]
				w.reserve(now, n, maxWait)
			case op < 9:
				var live []*admission
				for _, a := range w.adms {
					if a.live {
						live = append(live, a)
					}
				}
				if len(live) == 0 {
					continue
				}
				a := live[len(live)-1]
				if rng.IntN(2) == 0 {
					a = live[rng.IntN(len(live))]
				}
				w.giveBack(a, now)
			default:
				w.peek(now, n)
			}
			w.check(where)
		}
		for k, v := range w.counts {
			counts[k] += v
		}
	}
	for _, k := range []string{"take", "reserve-refused", "reserve-queued", "reserve-now", "cancel-due",
		"give-back/0/true", "give-back/1/true", "give-back/2/true", "give-back/2/false", "deleted"} {
		assert.Positive(t, counts[k], "no %s: the test misses a branch", k)
	}
	t.Logf("%v (give-back/since/gave: 0 alone, 1 none queued, 2 anything)", counts)
}

// TestReserveErrors: what Reserve refuses without a call, and the errors
// it returns.
func TestReserveErrors(t *testing.T) {
	ctx := context.Background()
	none := &noServer{}
	l, err := redislimit.New(none, gcra.Every(time.Second), 3)
	require.NoError(t, err)
	for _, tc := range []struct {
		n    int
		want error
	}{{-1, gcra.ErrInvalidN}, {4, gcra.ErrExceedsBurst}} {
		r, err := l.Reserve(ctx, "k", tc.n)
		assert.Nil(t, r)
		assert.ErrorIs(t, err, tc.want, "n=%d", tc.n)
		assert.Regexp(t, `^redislimit: `, err.Error())
	}
	r, err := l.Reserve(ctx, "k", 0)
	require.NoError(t, err)
	assert.Zero(t, r.Delay(), "n = 0: due now")
	assert.NoError(t, r.Cancel(ctx), "nothing to cancel")
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Reserve(done, "k", 1)
	assert.Equal(t, context.Canceled, err)
	past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	_, err = l.Reserve(past, "k", 1)
	assert.Equal(t, context.DeadlineExceeded, err, "a deadline passed: nothing reserved")
	assert.Zero(t, none.calls, "none of these calls Redis")

	for _, lim := range []gcra.Limit{gcra.Unlimited, gcra.DenyAll} {
		sl, err := redislimit.New(none, lim, 3)
		require.NoError(t, err)
		r, err := sl.Reserve(ctx, "k", 1)
		if lim == gcra.Unlimited {
			require.NoError(t, err)
			assert.Zero(t, r.Delay())
		} else {
			assert.ErrorIs(t, err, gcra.ErrExceedsBurst)
		}
	}
	assert.Zero(t, none.calls, "nor do the static limits")

	// A window rule: pacing is GCRA's, as in process.
	wl, err := redislimit.NewRule(none, atomiclimit.FixedWindowUTC(3, time.Second, 0))
	require.NoError(t, err)
	_, err = wl.Reserve(ctx, "k", 1)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Regexp(t, `^redislimit: `, err.Error())
	in, err := atomiclimit.NewKeyedRule[string](atomiclimit.FixedWindowUTC(3, time.Second, 0), atomiclimit.WithSweepInterval(0))
	require.NoError(t, err)
	_, err = in.ReserveN("k", time.Now(), 1)
	assert.ErrorIs(t, err, errors.ErrUnsupported, "the same error in process")
	assert.Zero(t, none.calls)

	_, err = redislimit.New(none, gcra.Every(time.Second), 3, redislimit.WithMaxWait(-time.Nanosecond))
	assert.ErrorIs(t, err, redislimit.ErrInvalidMaxWait)
}

// TestReserveLongestWait: the longest wait is ctx's deadline or
// WithMaxWait, whichever is nearer, and a reservation beyond it fails
// with ErrDeadline, reserving nothing.
func TestReserveLongestWait(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithMaxWait(90*time.Minute))
	require.NoError(t, err)
	r, err := l.Reserve(ctx, "k", 1)
	require.NoError(t, err)
	require.Zero(t, r.Delay())
	before := stored(t, c, l.Key("k"))

	soon, cancel := context.WithTimeout(ctx, 59*time.Minute)
	defer cancel()
	_, err = l.Reserve(soon, "k", 1)
	assert.ErrorIs(t, err, atomiclimit.ErrDeadline, "due in an hour, after ctx's deadline")
	assert.Regexp(t, `^redislimit: `, err.Error())
	assert.Equal(t, before, stored(t, c, l.Key("k")), "nothing reserved")

	later, cancel := context.WithTimeout(ctx, 61*time.Minute)
	defer cancel()
	r, err = l.Reserve(later, "k", 1)
	require.NoError(t, err)
	assert.InDelta(t, float64(time.Hour), float64(r.Delay()), float64(time.Second))

	_, err = l.Reserve(ctx, "k", 1)
	assert.ErrorIs(t, err, atomiclimit.ErrDeadline, "due in two hours, after WithMaxWait")
	require.NoError(t, r.Cancel(ctx))
	assert.True(t, strings.HasPrefix(stored(t, c, l.Key("k")), before+":"), "the cancel gave the hour back: %s, then %s", before, stored(t, c, l.Key("k")))
}

// TestReserveOldValues: a key whose value was written before reservations
// ("TAT", "TAT:E") is reserved on as any other; a reservation that does
// not queue keeps the form, one that queues writes "TAT:E:Q"; and a take
// and a give-back keep the stamp.
func TestReserveOldValues(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	const h = int64(time.Hour / time.Microsecond)
	l, err := redislimit.New(c, gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	forever := gcra.MaxWait
	for _, old := range []string{strconv.FormatInt(t0+h, 10), fmt.Sprintf("%d:%d", t0+h, t0-5)} {
		require.NoError(t, c.Set(ctx, l.Key("k"), old, time.Hour+time.Millisecond).Err())
		epoch := ""
		if i := len(strconv.FormatInt(t0+h, 10)); len(old) > i {
			epoch = old[i:]
		}
		r, err := l.ReserveAt(ctx, "k", 1, forever, t0)
		require.NoError(t, err)
		_, _, stamp := r.Taken()
		assert.Equal(t, fmt.Sprint(t0+2*h, epoch), stored(t, c, l.Key("k")), "%s: not queued: the form kept", old)
		q, err := l.ReserveAt(ctx, "k", 1, forever, t0)
		require.NoError(t, err)
		if epoch == "" {
			epoch = ":0"
		}
		assert.Equal(t, fmt.Sprint(t0+3*h, epoch, ":", t0), stored(t, c, l.Key("k")), "%s: queued: stamped", old)
		_, _, qstamp := q.Taken()
		assert.Equal(t, t0, qstamp, "its own stamp in its receipt")
		ok, err := q.CancelAt(ctx, t0)
		require.NoError(t, err)
		assert.True(t, ok, "alone and last: back whole")
		assert.Equal(t, fmt.Sprint(t0+2*h, epoch, ":", t0), stored(t, c, l.Key("k")), "the stamp kept")
		ok, err = r.CancelAt(ctx, t0)
		require.NoError(t, err)
		assert.True(t, ok, "alone (no shift since its stamp %d): back whole", stamp)
		assert.Equal(t, fmt.Sprint(t0+h, epoch, ":", t0), stored(t, c, l.Key("k")))
	}
}

// TestReserveRealClock: Reserve and Cancel on Redis TIME, as a caller uses
// them: the second reservation of a drained key is due an interval later,
// Delay counts down on this process's clock, and a Cancel gives the
// interval back; a Cancel once Delay has run out makes no call.
func TestReserveRealClock(t *testing.T) {
	s := sharedServer(t)
	cs := &countingScripter{Client: s.client(t)}
	ctx := context.Background()
	l, err := redislimit.New(cs, gcra.Every(time.Second), 1, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	first, err := l.Reserve(ctx, "k", 1)
	require.NoError(t, err)
	require.Zero(t, first.Delay())
	start := time.Now()
	second, err := l.Reserve(ctx, "k", 1)
	require.NoError(t, err)
	d := second.DelayFrom(start)
	assert.Greater(t, d, 900*time.Millisecond)
	assert.LessOrEqual(t, d, time.Second+time.Since(start), "the wait, from the reply's arrival")
	assert.Less(t, second.Delay(), d)
	calls := cs.count()
	require.NoError(t, second.Cancel(ctx))
	assert.Equal(t, calls+1, cs.count(), "one call")
	require.NoError(t, second.Cancel(ctx))
	assert.Equal(t, calls+1, cs.count(), "a second Cancel does nothing")
	after, err := l.Peek(ctx, "k", 1)
	require.NoError(t, err)
	assert.False(t, after.Allowed)
	assert.LessOrEqual(t, after.RetryAfter, time.Second, "the interval came back")

	// Due: no call, nothing back.
	short, err := redislimit.New(cs, gcra.Every(time.Millisecond), 1, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	_, err = short.Reserve(ctx, "k", 1)
	require.NoError(t, err)
	r, err := short.Reserve(ctx, "k", 1)
	require.NoError(t, err)
	time.Sleep(r.Delay() + time.Millisecond)
	calls = cs.count()
	require.NoError(t, r.Cancel(ctx))
	assert.Equal(t, calls, cs.count(), "due: no call")
}

// TestReserveCancelConcurrent: three Limiters (three processes) of four
// goroutines each take, reserve (waiting up to a random longest wait),
// cancel and give back on one key, on an explicit timeline (T an hour:
// nothing expires in real time). The timeline moves only between the
// goroutines' steps (a step holds a read lock from its clock reading to
// its reply; a goroutine moves it, after a step, under the write lock),
// so that each cancel's
// fate is known (its tokens due at its now or not) and no give-back is
// decided at a time before a decision Redis made before it, as a clock
// does; within a tick, any interleaving. At the end, the admissions
// neither given back nor cancelled before they were due conform (no window
// over B + (b − a)/T), and the key's state is at least the TAT they leave.
func TestReserveCancelConcurrent(t *testing.T) {
	const (
		processes  = 3
		goroutines = 4 // per process
		burst      = 4
	)
	rounds := 150
	if testing.Short() || raceEnabled {
		rounds = 60
	}
	s := sharedServer(t)
	ctx := context.Background()
	prefix := uniq(t)
	var lims []*redislimit.Limiter[string]
	for range processes {
		l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), burst, redislimit.WithKeyPrefix(prefix))
		require.NoError(t, err)
		lims = append(lims, l)
	}
	c := s.client(t)
	t0 := serverNow(t, c)
	const h = int64(time.Hour / time.Microsecond)
	span := burst * h
	var (
		tick    sync.RWMutex
		clock   atomic.Int64 // µs on the timeline
		mu      sync.Mutex
		live    []dueN // the admissions kept, or cancelled once due (used)
		workers sync.WaitGroup
		failed  atomic.Int64
	)
	type held struct {
		res *redislimit.Reservation
		rc  atomiclimit.Receipt
		n   int
		due int64 // µs on Redis TIME
	}
	for g := range processes * goroutines {
		workers.Add(1)
		go func() {
			defer workers.Done()
			l := lims[g%processes]
			rng := rand.New(rand.NewPCG(uint64(g), 31))
			var mine []held
			keep := func(x held) {
				mu.Lock()
				live = append(live, dueN{(x.due - t0) * us, x.n})
				mu.Unlock()
			}
			step := func() error {
				tick.RLock()
				defer tick.RUnlock()
				now := clock.Load()
				n := 1 + rng.IntN(burst)
				switch op := rng.IntN(10); {
				case op < 3:
					r, rc := l.TakeAt(ctx, "k", n, t0+now)
					if r.Err != nil {
						return r.Err
					}
					if r.Allowed {
						mine = append(mine, held{rc: rc, n: n, due: t0 + now})
					}
				case op < 7:
					maxWait := time.Duration(rng.Int64N(span)) * time.Microsecond
					res, err := l.ReserveAt(ctx, "k", n, maxWait, t0+now)
					if err != nil {
						if errors.Is(err, atomiclimit.ErrDeadline) {
							return nil
						}
						return err
					}
					stored, at, _ := res.Taken()
					mine = append(mine, held{res: res, n: n, due: max(stored-span, at)})
				default:
					if len(mine) == 0 {
						return nil
					}
					i := rng.IntN(len(mine))
					x := mine[i]
					mine = append(mine[:i], mine[i+1:]...)
					switch {
					case x.res != nil:
						if t0+now > x.due {
							keep(x) // due: used, whatever the cancel
						}
						_, err := x.res.CancelAt(ctx, t0+now)
						return err
					case rng.IntN(2) == 0:
						_, err := l.RefundAt(ctx, "k", x.n, x.rc, t0+now) // a stack's give-back
						return err
					}
					keep(x) // a take used
				}
				return nil
			}
			for range rounds {
				if err := step(); err != nil {
					t.Error(err)
					failed.Add(1)
					return
				}
				if rng.IntN(4) == 0 {
					// A tick: no step is between its clock reading and
					// its reply.
					tick.Lock()
					clock.Add(rng.Int64N(h))
					tick.Unlock()
				}
			}
			for _, x := range mine {
				keep(x) // not given back: used when due
			}
		}()
	}
	workers.Wait()
	require.Zero(t, failed.Load())
	now := clock.Load()
	v := stored(t, c, lims[0].Key("k"))
	tat := int64(0)
	if v != "" {
		tat = (atoi(t, tatOf(v)) - t0) * us
	}
	sched := conforms(t, live, burst, int64(time.Hour), "the live admissions")
	assert.GreaterOrEqual(t, max(tat, now*us), sched, "the state is below the TAT the schedule leaves")
	t.Logf("%d admissions live, %d tokens; timeline at %v", len(live), tokens(live), time.Duration(now)*time.Microsecond)
	assert.Greater(t, 2*tokens(live), int(now/h), "the test keeps the key busy: more than half of what it refills is live")
}

// tokens is the number of tokens of a schedule.
func tokens(dues []dueN) (n int) {
	for _, d := range dues {
		n += d.n
	}
	return n
}

// TestReserveHook: a Reserve reports allowed when it is made (a Cancel is
// no event), denied with the wait it needed when none allowed fits; a
// rule's error and a ctx done before the call report nothing.
func TestReserveHook(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	var denied []time.Duration
	var mu sync.Mutex
	h := newRecHook()
	hook := h.hook()
	hook.Denied = func(policy string, src redislimit.Source, n int, retry time.Duration) {
		mu.Lock()
		denied = append(denied, retry)
		mu.Unlock()
		h.Denied(policy, src, n, retry)
	}
	l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithHook("p", hook))
	require.NoError(t, err)
	_, err = l.Reserve(ctx, "k", 1)
	require.NoError(t, err)
	r, err := l.Reserve(ctx, "k", 1)
	require.NoError(t, err)
	require.Positive(t, r.Delay())
	require.NoError(t, r.Cancel(ctx))
	assert.Equal(t, 2, h.count(redislimit.SourceRedis, "allowed"))
	soon, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = l.Reserve(soon, "k", 1)
	require.ErrorIs(t, err, atomiclimit.ErrDeadline)
	_, err = l.Reserve(ctx, "k", 2)
	require.ErrorIs(t, err, gcra.ErrExceedsBurst)
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Reserve(done, "k", 1)
	require.Error(t, err)
	assert.Equal(t, 2, h.count(redislimit.SourceRedis, "allowed"))
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "denied"))
	assert.Equal(t, 1, h.count(redislimit.SourceStatic, "denied"))
	assert.Equal(t, 4, h.total(), "%v", h.events)
	require.Len(t, denied, 2)
	assert.InDelta(t, float64(time.Hour), float64(denied[0]), float64(time.Minute), "the wait it needed")
	assert.Equal(t, gcra.Never, denied[1])

	wl, err := redislimit.NewRule(s.client(t), atomiclimit.FixedWindowUTC(1, time.Second, 0), redislimit.WithHook("p", h.hook()))
	require.NoError(t, err)
	_, err = wl.Reserve(ctx, "k", 1)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Equal(t, 4, h.total(), "a rule's error is no decision")
}

// TestReserveCorrupt: a corrupt state is repaired in the reservation's
// call (the empty bucket, TAT = now + B·T) and reserved on behind the
// repair: the Reservation comes with an error wrapping ErrCorrupt, which
// the hook hears; a reservation that cannot fit behind it is refused with
// ErrDeadline and ErrCorrupt, storing the repair only.
func TestReserveCorrupt(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	h := newRecHook()
	l, err := redislimit.New(c, gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithHook("p", h.hook()))
	require.NoError(t, err)
	require.NoError(t, c.Set(ctx, l.Key("a"), "garbage", 0).Err())
	r, err := l.Reserve(ctx, "a", 1)
	require.ErrorIs(t, err, redislimit.ErrCorrupt)
	require.NotNil(t, r)
	assert.InDelta(t, float64(time.Hour), float64(r.Delay()), float64(time.Minute), "behind the empty bucket: one interval")
	assert.Regexp(t, `^\d+:0:\d+$`, stored(t, c, l.Key("a")), "reserved (queued) on the repair")
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "error"))
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "allowed"))

	require.NoError(t, c.Set(ctx, l.Key("b"), "garbage", 0).Err())
	soon, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = l.Reserve(soon, "b", 1)
	assert.ErrorIs(t, err, atomiclimit.ErrDeadline)
	assert.ErrorIs(t, err, redislimit.ErrCorrupt)
	assert.Regexp(t, `^\d+$`, stored(t, c, l.Key("b")), "the repair alone")
	assert.Equal(t, 2, h.count(redislimit.SourceRedis, "error"))
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "denied"))
}
