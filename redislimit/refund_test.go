package redislimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// The refund tests run on explicit timelines (µs after t0, the server's
// time when the test starts), as the decision vectors do. Every positive
// debt they leave is long (an hour's interval, or at least 50ms in a test
// that takes far less), so that no key expires in real time during a test.

// serverNow returns the server's TIME in µs.
func serverNow(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	now, err := c.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMicro()
}

// stored returns the TAT stored under rkey, or "" if the key is absent.
func stored(t *testing.T, c *redis.Client, rkey string) string {
	t.Helper()
	v, err := c.Get(context.Background(), rkey).Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	return v
}

// TestTakeRefundRestores: a Take given back at once leaves the state a
// limiter that never had the admission holds (Peek before = Peek after,
// and the same stored TAT); given back later, every decision from then on
// is that limiter's.
func TestTakeRefundRestores(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	const ms = 1000 // µs
	for _, delay := range []int64{0, 50 * ms, 400 * ms} {
		// 3/s, burst 3: T rounds up to 333334µs.
		a, err := redislimit.New(c, gcra.Per(3, time.Second), 3, redislimit.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		b, err := redislimit.New(c, gcra.Per(3, time.Second), 3, redislimit.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		both := func(at int64, n int) {
			t.Helper()
			ra, rb := a.DecideAt(ctx, "k", n, true, t0+at), b.DecideAt(ctx, "k", n, true, t0+at)
			require.Equal(t, rb.Decision, ra.Decision, "delay %d at %d n %d", delay, at, n)
		}
		both(0, 1) // some debt first

		at := int64(100 * ms)
		before := a.DecideAt(ctx, "k", 2, false, t0+at)
		r, receipt := a.TakeAt(ctx, "k", 2, t0+at)
		require.True(t, r.Allowed)
		require.NotZero(t, receipt)
		ok, err := a.RefundAt(ctx, "k", 2, receipt, t0+at+delay)
		require.NoError(t, err)
		assert.True(t, ok, "delay %d", delay)
		after := a.DecideAt(ctx, "k", 2, false, t0+at+delay)
		assert.Equal(t, b.DecideAt(ctx, "k", 2, false, t0+at+delay).Decision, after.Decision, "delay %d: check after", delay)
		if delay == 0 {
			assert.Equal(t, before.Decision, after.Decision, "check before = check after")
			assert.Equal(t, stored(t, c, b.Key("k")), stored(t, c, a.Key("k")), "the same TAT as never admitted")
		}
		for _, st := range []struct {
			at int64
			n  int
		}{{450 * ms, 2}, {450 * ms, 1}, {500 * ms, 1}, {1200 * ms, 3}, {1300 * ms, 1}, {1700 * ms, 1}} {
			both(st.at, st.n)
		}
	}
}

// TestRefundRealClock: the same on Redis TIME, as a door uses it: policy a
// admits, policy b denies, a's admission is given back, and a's key is as
// if the request had never come (a full bucket is deleted).
func TestRefundRealClock(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	a, err := redislimit.New(c, gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	b, err := redislimit.New(c, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	require.True(t, b.Allow(ctx, "user")) // b is drained

	before, err := a.Peek(ctx, "user", 1)
	require.NoError(t, err)
	da, ra, err := a.Take(ctx, "user", 1)
	require.NoError(t, err)
	require.True(t, da.Allowed)
	db, rb, err := b.Take(ctx, "user", 1)
	require.NoError(t, err)
	require.False(t, db.Allowed)
	require.Zero(t, rb)
	ok, err := a.Refund(ctx, "user", 1, ra)
	require.NoError(t, err)
	assert.True(t, ok)
	after, err := a.Peek(ctx, "user", 1)
	require.NoError(t, err)
	assert.Equal(t, before, after) // a full bucket's decision does not depend on now
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 1, ResetAfter: time.Hour}, after)
	assert.Empty(t, stored(t, c, a.Key("user")), "a bucket full again is deleted")
	ok, err = a.Refund(ctx, "user", 1, ra)
	require.NoError(t, err)
	assert.False(t, ok, "a receipt gives back once")
}

// TestRefundAnyOrder: admissions are given back in any order, each in
// full when nothing else happened since it but give-backs that moved no
// other admission, and the key ends as if none had been made. (The refund
// script before the give-back epoch gave nothing back once anything else
// was admitted on the key: a policy stacked before another stayed charged
// for the requests the other denied.)
func TestRefundAnyOrder(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	prefix := uniq(t)
	l, err := redislimit.New(c, gcra.Every(time.Hour), 5, redislimit.WithKeyPrefix(prefix))
	require.NoError(t, err)
	other, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 5, redislimit.WithKeyPrefix(prefix)) // another process
	require.NoError(t, err)
	const h = int64(time.Hour / time.Microsecond)
	p := l.Params()
	full := gcra.Decision{Allowed: true, Remaining: 5}

	// Reverse order: each is the last admission when it is given back; no
	// epoch is ever written.
	_, r1 := l.TakeAt(ctx, "rev", 1, t0)
	_, r2 := l.TakeAt(ctx, "rev", 2, t0)
	require.Equal(t, atomiclimit.RemoteReceipt([3]uint64{uint64(t0 + h), uint64(t0), 0}), r1)
	require.Equal(t, atomiclimit.RemoteReceipt([3]uint64{uint64(t0 + 3*h), uint64(t0), 0}), r2)
	for _, g := range []struct {
		r    atomiclimit.Receipt
		n    int
		want string
	}{{r2, 2, strconv.FormatInt(t0+h, 10)}, {r1, 1, ""}} {
		ok, err := l.RefundAt(ctx, "rev", g.n, g.r, t0)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, g.want, stored(t, c, l.Key("rev")))
	}
	assert.Equal(t, full, l.DecideAt(ctx, "rev", 0, false, t0).Decision)

	// Taken order: the first given back moves the second's slot (an
	// epoch, its time, is stored); the second, no longer alone, gives back
	// what is certainly its own, which at its own time is all of it.
	_, r1 = l.TakeAt(ctx, "fwd", 1, t0)
	_, r2 = l.TakeAt(ctx, "fwd", 2, t0)
	ok, err := l.RefundAt(ctx, "fwd", 1, r1, t0)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, fmt.Sprintf("%d:%d", t0+2*h, t0), stored(t, c, l.Key("fwd")), "r2's slot moved: epoch t0")
	ok, err = l.RefundAt(ctx, "fwd", 2, r2, t0)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, fmt.Sprintf("%d:%d", t0, t0+1), stored(t, c, l.Key("fwd")), "a full bucket; the epoch kept (and moved on)")
	assert.Equal(t, full, l.DecideAt(ctx, "fwd", 0, false, t0).Decision)
	// The key of an epoch lives B·T after it, so that no receipt from
	// before can reach a state made after it vanished (refundLua).
	pttl, err := c.PTTL(ctx, l.Key("fwd")).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, 5*time.Hour-time.Minute)
	assert.LessOrEqual(t, pttl, 5*time.Hour+2*time.Millisecond, "⌈E + B·T − now⌉ + 1ms, E = t0 + 1µs")

	// Another process's admission in between: the give-back is still
	// alone (an admission moves no one's slot) and gives back all of r3.
	_, r3 := l.TakeAt(ctx, "mixed", 1, t0)
	r, _ := other.TakeAt(ctx, "mixed", 1, t0)
	require.True(t, r.Allowed)
	ok, err = l.RefundAt(ctx, "mixed", 1, r3, t0)
	require.NoError(t, err)
	assert.True(t, ok)
	_, want := p.Decide(int64(time.Hour), 0, 0) // the other's admission alone
	assert.Equal(t, want, l.DecideAt(ctx, "mixed", 0, false, t0).Decision)

	// A receipt given back once: a second give-back finds nothing ahead.
	ok, err = l.RefundAt(ctx, "rev", 1, r1, t0)
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestRefundInterleaving is the interleaving that breaks a give-back of
// min(n·T, r − now, TAT − now) without the epoch: A and B admitted at t0,
// A given back (B's slot moves back by T), C admitted 1µs later (into the
// slot B vacated, ending at t0 + 1µs + T... and at t0 + 2T in the stored
// state), then B given back. Without A and B, C alone would have stored
// t0 + 1µs + T; B's receipt still says t0 + 2T, so the formula without the
// epoch gives back a whole T and leaves t0 + T: 1µs of quota created. The
// epoch tells B's give-back that it is not alone, and it gives back
// at + n·T − now, which leaves exactly C alone.
func TestRefundInterleaving(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	l, err := redislimit.New(c, gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	p := l.Params()
	T := int64(p.Interval() / time.Microsecond)

	_, a := l.TakeAt(ctx, "k", 1, t0)
	_, b := l.TakeAt(ctx, "k", 1, t0)
	ok, err := l.RefundAt(ctx, "k", 1, a, t0)
	require.NoError(t, err)
	require.True(t, ok)
	rc, _ := l.TakeAt(ctx, "k", 1, t0+1)
	require.True(t, rc.Allowed)
	ok, err = l.RefundAt(ctx, "k", 1, b, t0+1)
	require.NoError(t, err)
	require.True(t, ok)

	got := stored(t, c, l.Key("k"))
	var tat, epoch int64
	_, err = fmt.Sscanf(got, "%d:%d", &tat, &epoch)
	require.NoError(t, err, got)
	alone := t0 + 1 + T // C alone
	assert.GreaterOrEqual(t, tat, alone, "never below the state with C alone")
	assert.Equal(t, alone, tat, "and here exactly it: B gave back what was certainly its own")
	// What the formula without the epoch would have stored: 1µs below.
	bv, _ := b.Remote()
	naive, _, _ := p.Refund((t0+2*T)*us, (t0+1)*us, int64(bv[0])*us, int64(bv[1])*us, 1, gcra.Alone)
	assert.Equal(t, (alone-1)*us, naive, "the case the epoch is for")
}

// TestRefundNewState: a receipt gives nothing to a state created after the
// key vanished (by expiry, or deleted full), even though that state's
// epoch starts again at 0 and matches the receipt's: it is used only at
// r or later, when nothing of the admission is ahead of now. The expiry
// is simulated with DEL at the instant the key would expire.
func TestRefundNewState(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	l, err := redislimit.New(c, gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	const h = int64(time.Hour / time.Microsecond)
	span := 3 * h

	// A and B; A given back out of order: epoch t0, so the key lives until
	// t0 + B·T at least. Then a new state from t0 + B·T: B's receipt
	// (epoch 0) matches its epoch, and gives nothing.
	_, a := l.TakeAt(ctx, "shifted", 1, t0)
	_, b := l.TakeAt(ctx, "shifted", 1, t0)
	ok, err := l.RefundAt(ctx, "shifted", 1, a, t0)
	require.NoError(t, err)
	require.True(t, ok)
	pttl, err := c.PTTL(ctx, l.Key("shifted")).Result()
	require.NoError(t, err)
	require.Greater(t, pttl, time.Duration(span)*time.Microsecond-time.Minute, "an epoch keeps the key B·T")
	require.NoError(t, c.Del(ctx, l.Key("shifted")).Err()) // its expiry, at t0 + B·T
	for _, n := range []int{2, 1} {
		r, _ := l.TakeAt(ctx, "shifted", n, t0+span)
		require.True(t, r.Allowed)
	}
	before := stored(t, c, l.Key("shifted"))
	ok, err = l.RefundAt(ctx, "shifted", 1, b, t0+span)
	require.NoError(t, err)
	assert.False(t, ok, "B's tokens were due before the key vanished")
	assert.Equal(t, before, stored(t, c, l.Key("shifted")))

	// No shift: the key of epoch 0 vanishes only once full, at r or later.
	_, a = l.TakeAt(ctx, "plain", 2, t0)
	pttl, err = c.PTTL(ctx, l.Key("plain")).Result()
	require.NoError(t, err)
	require.LessOrEqual(t, pttl, 2*time.Hour+time.Millisecond, "expires when full, at r")
	require.NoError(t, c.Del(ctx, l.Key("plain")).Err())
	r, _ := l.TakeAt(ctx, "plain", 3, t0+2*h)
	require.True(t, r.Allowed)
	ok, err = l.RefundAt(ctx, "plain", 2, a, t0+2*h)
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestRefundOldValues: a value the limiter wrote before the give-back epoch
// existed (a bare decimal TAT) is a state of epoch 0: decided on as before,
// and its admissions given back as any other's.
func TestRefundOldValues(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	l, err := redislimit.New(c, gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	const h = int64(time.Hour / time.Microsecond)
	old := strconv.FormatInt(t0+h, 10) // one admission at t0, as the old script stored it
	require.NoError(t, c.Set(ctx, l.Key("k"), old, time.Hour+time.Millisecond).Err())
	r, rc := l.TakeAt(ctx, "k", 1, t0)
	require.NoError(t, r.Err)
	require.Equal(t, gcra.Decision{Allowed: true, Remaining: 1, ResetAfter: 2 * time.Hour}, r.Decision)
	require.Equal(t, atomiclimit.RemoteReceipt([3]uint64{uint64(t0 + 2*h), uint64(t0), 0}), rc, "epoch 0")
	assert.Equal(t, strconv.FormatInt(t0+2*h, 10), stored(t, c, l.Key("k")), "still a bare TAT")
	ok, err := l.RefundAt(ctx, "k", 1, rc, t0)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, old, stored(t, c, l.Key("k")))
}

// TestRefundNeverBelowNow: a refund stores max(receipt − n·T, now), and
// deletes the key when that is now; once the admission's tokens are due, it
// gives back nothing.
func TestRefundNeverBelowNow(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	const h = int64(time.Hour / time.Microsecond)
	l, err := redislimit.New(c, gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)

	// TAT 1h, then 3h. A refund of the 2 at 2h: max(3h − 2h, 2h) = 2h is
	// now, so the bucket is full: deleted.
	_, _ = l.TakeAt(ctx, "a", 1, t0)
	_, r := l.TakeAt(ctx, "a", 2, t0)
	ok, err := l.RefundAt(ctx, "a", 2, r, t0+2*h)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Empty(t, stored(t, c, l.Key("a")), "max(1h, 2h) = now: full, deleted")
	assert.Equal(t, 3, l.DecideAt(ctx, "a", 0, false, t0+2*h).Remaining)

	// Not clamped: a refund at 30min stores 1h, expiring once it is due.
	_, _ = l.TakeAt(ctx, "b", 1, t0)
	_, r = l.TakeAt(ctx, "b", 2, t0)
	ok, err = l.RefundAt(ctx, "b", 2, r, t0+h/2)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, strconv.FormatInt(t0+h, 10), stored(t, c, l.Key("b")))
	pttl, err := c.PTTL(ctx, l.Key("b")).Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, pttl, 30*time.Minute+time.Millisecond, "⌈30min⌉ + 1ms")
	assert.Greater(t, pttl, 30*time.Minute-time.Second)

	// Due: at or after the receipt, nothing is given back, nothing written.
	_, r = l.TakeAt(ctx, "c", 1, t0)
	ok, err = l.RefundAt(ctx, "c", 1, r, t0+h)
	require.NoError(t, err)
	assert.False(t, ok, "the token is already due")
	assert.Equal(t, strconv.FormatUint(remoteWord(r), 10), stored(t, c, l.Key("c")))
	ok, err = l.RefundAt(ctx, "c", 1, r, t0+h-1)
	require.NoError(t, err)
	assert.True(t, ok, "1µs before: max(0, now) = now: full")
	assert.Empty(t, stored(t, c, l.Key("c")))
}

// TestRefundMatchesGCRA runs random takes, peeks and give-backs (of the
// last receipt, or of any other not given back yet) on one key, with time
// going forward and back, against a model: gcra's Decide, and
// gcra.Params.Refund with the give-back epoch kept explicitly (alone
// while the key's epoch is the receipt's; a give-back that shifts sets it
// to max(E + 1, now); a full bucket of epoch 0 is deleted). Every
// decision, every give-back's answer, every stored value and every expiry
// must agree. Times and T are whole quarters of an hour, so that every debt
// is at least that long and no key expires during the test, but for a full
// bucket whose epoch is B·T old or more, which the test expires itself.
func TestRefundMatchesGCRA(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	const q = int64(15 * time.Minute / time.Microsecond)
	counts := map[string]int{}
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 3))
		burst := 1 + rng.IntN(5)
		l, err := redislimit.New(c, gcra.Every(time.Duration(1+rng.IntN(4))*15*time.Minute), burst, redislimit.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		p := l.Params()
		span := int64(p.Span()) / us // µs
		// The model: TAT in ns on the timeline (0: absent), the epoch in µs
		// on Redis's (0: none).
		var tat, epoch int64
		type held struct {
			r atomiclimit.Receipt
			n int
		}
		var receipts []held
		var at, latest int64 // µs on the timeline
		for i := range 300 {
			// Back at most B·T behind the latest step: further, the state
			// would be more than 2·B·T ahead, a corrupt one.
			at = max(0, at+q*(rng.Int64N(7)-2), latest-span)
			latest = max(latest, at)
			now := at * us
			n := 1 + rng.IntN(burst)
			where := fmt.Sprintf("seed %d step %d", seed, i)
			wrote, wnow := false, at // whether Redis wrote, and its now (µs)
			switch op := rng.IntN(10); {
			case op < 5:
				next, want := p.Decide(tat, now, n)
				r, rc := l.TakeAt(ctx, "k", n, t0+at)
				require.Equal(t, want, r.Decision, "%s: take", where)
				if want.Allowed {
					tat, wrote = next, true
					require.Equal(t, atomiclimit.RemoteReceipt([3]uint64{uint64(t0 + next/us), uint64(t0 + at), uint64(epoch)}), rc, where)
					receipts = append(receipts, held{rc, n})
				} else {
					require.Zero(t, rc)
				}
				counts["take"]++
			case op < 6:
				_, want := p.Decide(tat, now, n)
				require.Equal(t, want, l.DecideAt(ctx, "k", n, false, t0+at).Decision, "%s: peek", where)
			default:
				if len(receipts) == 0 {
					continue
				}
				j := len(receipts) - 1
				if rng.IntN(2) == 0 {
					j = rng.IntN(len(receipts))
				}
				tk := receipts[j]
				receipts = append(receipts[:j], receipts[j+1:]...) // each given back once
				v, _ := tk.r.Remote()
				stored, takenAt := (int64(v[0])-t0)*us, (int64(v[1])-t0)*us
				alone := int64(v[2]) == epoch
				gnow := max(now, takenAt) // as in process: never before the admission
				// Redis holds no queued reservations: without a shift since,
				// the give-back is alone; with one, nothing was queued since.
				since := gcra.NoneQueued
				if alone {
					since = gcra.Alone
				}
				back, shifts, want := p.Refund(tat, gnow, stored, takenAt, tk.n, since)
				if tat == 0 {
					want = false // absent: nothing to give back
				}
				ok, err := l.RefundAt(ctx, "k", tk.n, tk.r, t0+at)
				require.NoError(t, err)
				require.Equal(t, want, ok, "%s: give-back (alone %v)", where, alone)
				switch {
				case !ok:
					counts["none"]++
				case alone && shifts:
					counts["alone-shifts"]++
				case alone:
					counts["alone-last"]++
				default:
					counts["not-alone"]++
				}
				if ok {
					tat, wrote, wnow = back, true, gnow/us
					if shifts {
						epoch = max(epoch+1, t0+gnow/us)
					}
					if back == gnow && epoch == 0 {
						tat = 0 // deleted
						counts["deleted"]++
					}
				}
			}
			want := ""
			switch {
			case tat == 0:
			case epoch == 0:
				want = strconv.FormatInt(t0+tat/us, 10)
			default:
				want = fmt.Sprintf("%d:%d", t0+tat/us, epoch)
			}
			got := stored(t, c, l.Key("k"))
			idle := tat / us // when the key expires, µs on the timeline
			if epoch > 0 {
				idle = max(idle, epoch-t0+span)
			}
			if want != "" && wrote && idle <= wnow {
				// A full bucket whose epoch is B·T old or more expires 1ms
				// after its write (PX 1), as it should: whether it has yet
				// depends on real time, so the test expires it now, and the
				// model forgets it too.
				require.Contains(t, []string{"", want}, got, "%s: stored value", where)
				require.NoError(t, c.Del(ctx, l.Key("k")).Err())
				tat, epoch = 0, 0
				counts["expired"]++
				continue
			}
			require.Equal(t, want, got, "%s: stored value", where)
			if wrote && want != "" {
				pttl, err := c.PTTL(ctx, l.Key("k")).Result()
				require.NoError(t, err)
				ttl := time.Duration((idle-wnow+999)/1000+1) * time.Millisecond
				assert.LessOrEqual(t, pttl, ttl, "%s: expiry", where)
				assert.Greater(t, pttl, ttl-time.Minute, "%s: expiry", where)
			}
		}
	}
	for _, k := range []string{"take", "none", "alone-shifts", "alone-last", "not-alone", "deleted"} {
		assert.Positive(t, counts[k], "no %s: the test misses a branch", k)
	}
	t.Logf("%v", counts)
}

// TestRefundMakesNoCall: receipt 0, n out of range, a receipt Take cannot
// have returned, and static limits give back nothing without a call; an
// outage gives back nothing with ErrUnavailable, whatever the policy.
func TestRefundMakesNoCall(t *testing.T) {
	ctx := context.Background()
	none := &noServer{}
	l, err := redislimit.New(none, gcra.Every(time.Hour), 3)
	require.NoError(t, err)
	for _, tc := range []struct {
		n int
		r atomiclimit.Receipt
	}{{1, atomiclimit.Receipt{}}, {0, atomiclimit.RemoteReceipt([3]uint64{5})}, {-1, atomiclimit.RemoteReceipt([3]uint64{5})}, {4, atomiclimit.RemoteReceipt([3]uint64{5})}, {1, atomiclimit.RemoteReceipt([3]uint64{1 << 53})}, {1, atomiclimit.RemoteReceipt([3]uint64{1<<64 - 1})}} {
		ok, err := l.Refund(ctx, "k", tc.n, tc.r)
		assert.False(t, ok, "%+v", tc)
		assert.NoError(t, err, "%+v", tc)
	}
	for _, lim := range []gcra.Limit{gcra.Unlimited, gcra.DenyAll} {
		sl, err := redislimit.New(none, lim, 3)
		require.NoError(t, err)
		ok, err := sl.Refund(ctx, "k", 1, atomiclimit.RemoteReceipt([3]uint64{5}))
		assert.False(t, ok)
		assert.NoError(t, err)
	}
	assert.Zero(t, none.calls)

	for _, name := range policyNames {
		p := newPolicy(t, name)
		ol, err := redislimit.New(none, gcra.Every(time.Hour), 3, redislimit.WithOutage(p.outage))
		require.NoError(t, err)
		ok, err := ol.Refund(ctx, "k", 3, atomiclimit.RemoteReceipt([3]uint64{1<<53 - 1}))
		assert.False(t, ok, name)
		assert.ErrorIs(t, err, redislimit.ErrUnavailable, name)
		assert.ErrorIs(t, err, errNoServer, name)
	}
	assert.Equal(t, 3, none.calls)
}

// TestRefundNoScript: after SCRIPT FLUSH the refund script comes back
// through EVAL, once.
func TestRefundNoScript(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	l, err := redislimit.New(c, gcra.Every(time.Hour), 5, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	_, r1, err := l.Take(ctx, "k", 1)
	require.NoError(t, err)
	_, r2, err := l.Take(ctx, "k", 1)
	require.NoError(t, err)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	evals := commandCalls(t, c, "eval")
	ok, err := l.Refund(ctx, "k", 1, r2)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, evals+1, commandCalls(t, c, "eval"))
	ok, err = l.Refund(ctx, "k", 1, r1)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, evals+1, commandCalls(t, c, "eval"), "cached now")
	exists, err := c.ScriptExists(ctx, redislimit.RefundSHA).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, exists)
}

// TestRefundForgetsCacheEntry: the refunding process drops its over-limit
// cache's bound for the key, which the refund made too high, so the next
// request goes to Redis and is admitted.
func TestRefundForgetsCacheEntry(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOverLimitCache(10))
	require.NoError(t, err)
	var clock fakeClock
	l.SetLocalClock(clock.now)
	_, _, err = l.Take(ctx, "k", 1)
	require.NoError(t, err)
	_, r, err := l.Take(ctx, "k", 1)
	require.NoError(t, err)
	require.False(t, l.Allow(ctx, "k"))
	require.Equal(t, 1, l.CacheLen())
	require.Equal(t, redislimit.SourceCache, l.TakeResult(ctx, "k", 1).Source)
	ok, err := l.Refund(ctx, "k", 1, r)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Zero(t, l.CacheLen())
	d := l.TakeResult(ctx, "k", 1)
	assert.Equal(t, redislimit.SourceRedis, d.Source)
	assert.True(t, d.Allowed)
}
