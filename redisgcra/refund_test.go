package redisgcra_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redisgcra"
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
// limiter that never had the admission holds (Check before = Check after,
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
		a, err := redisgcra.New(c, gcra.PerSecond(3), 3, redisgcra.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		b, err := redisgcra.New(c, gcra.PerSecond(3), 3, redisgcra.WithKeyPrefix(uniq(t)))
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
	a, err := redisgcra.New(c, gcra.Every(time.Hour), 2, redisgcra.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	b, err := redisgcra.New(c, gcra.Every(time.Hour), 1, redisgcra.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	require.True(t, b.Allow(ctx, "user")) // b is drained

	before, err := a.Check(ctx, "user", 1)
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
	after, err := a.Check(ctx, "user", 1)
	require.NoError(t, err)
	assert.Equal(t, before, after) // a full bucket's decision does not depend on now
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 1, ResetAfter: time.Hour}, after)
	assert.Empty(t, stored(t, c, a.Key("user")), "a bucket full again is deleted")
	ok, err = a.Refund(ctx, "user", 1, ra)
	require.NoError(t, err)
	assert.False(t, ok, "a receipt gives back once")
}

// TestRefundOrder: a refund after another admission on the key gives back
// nothing and writes nothing; refunds in reverse order of Take give back
// each.
func TestRefundOrder(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	prefix := uniq(t)
	l, err := redisgcra.New(c, gcra.Every(time.Hour), 5, redisgcra.WithKeyPrefix(prefix))
	require.NoError(t, err)
	other, err := redisgcra.New(s.client(t), gcra.Every(time.Hour), 5, redisgcra.WithKeyPrefix(prefix)) // another process
	require.NoError(t, err)
	const h = int64(time.Hour / time.Microsecond)

	_, r1 := l.TakeAt(ctx, "k", 1, t0)
	_, r2 := l.TakeAt(ctx, "k", 2, t0)
	require.Equal(t, atomiclimit.RemoteReceipt([3]uint64{uint64(t0 + h)}), r1)
	require.Equal(t, atomiclimit.RemoteReceipt([3]uint64{uint64(t0 + 3*h)}), r2)
	writes := commandCalls(t, c, "set") + commandCalls(t, c, "del")
	ok, err := l.RefundAt(ctx, "k", 1, r1, t0)
	require.NoError(t, err)
	assert.False(t, ok, "r2 came after r1")
	assert.Equal(t, strconv.FormatUint(remoteWord(r2), 10), stored(t, c, l.Key("k")))
	assert.Equal(t, writes, commandCalls(t, c, "set")+commandCalls(t, c, "del"), "a refused refund writes nothing")

	// Reverse order gives back both: the key is as before r1 (absent: full).
	ok, err = l.RefundAt(ctx, "k", 2, r2, t0)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, strconv.FormatUint(remoteWord(r1), 10), stored(t, c, l.Key("k")))
	ok, err = l.RefundAt(ctx, "k", 1, r1, t0)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Empty(t, stored(t, c, l.Key("k")))
	assert.Equal(t, gcra.Decision{Allowed: true, Remaining: 5, ResetAfter: 0}, l.DecideAt(ctx, "k", 0, false, t0).Decision)

	// Another process's admission in between: nothing to give back either.
	_, r3 := l.TakeAt(ctx, "k", 1, t0)
	r, _ := other.TakeAt(ctx, "k", 1, t0)
	require.True(t, r.Allowed)
	ok, err = l.RefundAt(ctx, "k", 1, r3, t0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, strconv.FormatInt(t0+2*h, 10), stored(t, c, l.Key("k")))
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
	l, err := redisgcra.New(c, gcra.Every(time.Hour), 3, redisgcra.WithKeyPrefix(uniq(t)))
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

// TestRefundMatchesGCRA runs random takes, peeks and refunds (of the last
// receipt, or of an older one) on one key, with time going forward and
// back, against gcra's Decide and Refund; every decision, every refund's
// answer and every stored TAT must agree. A refund that leaves TAT = now
// deletes the key, which the model mirrors (an absent key is TAT 0).
// Times and T are whole quarters of an hour, so that every debt is at least
// that long and no key expires during the test.
func TestRefundMatchesGCRA(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	const q = int64(15 * time.Minute / time.Microsecond)
	counts := map[string]int{}
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 3))
		burst := 1 + rng.IntN(5)
		l, err := redisgcra.New(c, gcra.Every(time.Duration(1+rng.IntN(4))*15*time.Minute), burst, redisgcra.WithKeyPrefix(uniq(t)))
		require.NoError(t, err)
		p := l.Params()
		var tat int64 // the model's state in ns on the timeline; 0: absent
		type taken struct {
			r atomiclimit.Receipt
			n int
		}
		var receipts []taken
		var at int64 // µs
		for i := range 300 {
			at = max(0, at+q*(rng.Int64N(7)-2))
			now := at * us
			n := 1 + rng.IntN(burst)
			switch op := rng.IntN(10); {
			case op < 5:
				next, want := p.Decide(tat, now, n)
				r, receipt := l.TakeAt(ctx, "k", n, t0+at)
				require.Equal(t, want, r.Decision, "seed %d step %d: take", seed, i)
				if want.Allowed {
					tat = next
					require.Equal(t, atomiclimit.RemoteReceipt([3]uint64{uint64(t0 + next/us)}), receipt, "seed %d step %d", seed, i)
					receipts = append(receipts, taken{receipt, n})
				} else {
					require.Zero(t, receipt)
				}
				counts["take"]++
			case op < 6:
				_, want := p.Decide(tat, now, n)
				require.Equal(t, want, l.DecideAt(ctx, "k", n, false, t0+at).Decision, "seed %d step %d: peek", seed, i)
			default:
				if len(receipts) == 0 {
					continue
				}
				tk := receipts[len(receipts)-1]
				if rng.IntN(3) == 0 {
					tk = receipts[rng.IntN(len(receipts))]
				}
				back, want := lastRefund(p, tat, now, (int64(remoteWord(tk.r))-t0)*us, tk.n)
				ok, err := l.RefundAt(ctx, "k", tk.n, tk.r, t0+at)
				require.NoError(t, err)
				require.Equal(t, want, ok, "seed %d step %d: refund", seed, i)
				if ok {
					tat = back
					if back == now {
						tat = 0 // deleted
						counts["refund-delete"]++
					} else {
						counts["refund-set"]++
					}
				} else {
					counts["refund-none"]++
				}
			}
			want := ""
			if tat != 0 {
				want = strconv.FormatInt(t0+tat/us, 10)
			}
			require.Equal(t, want, stored(t, c, l.Key("k")), "seed %d step %d: stored TAT", seed, i)
		}
	}
	for _, k := range []string{"take", "refund-delete", "refund-set", "refund-none"} {
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
	l, err := redisgcra.New(none, gcra.Every(time.Hour), 3)
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
		sl, err := redisgcra.New(none, lim, 3)
		require.NoError(t, err)
		ok, err := sl.Refund(ctx, "k", 1, atomiclimit.RemoteReceipt([3]uint64{5}))
		assert.False(t, ok)
		assert.NoError(t, err)
	}
	assert.Zero(t, none.calls)

	for _, name := range policyNames {
		p := newPolicy(t, name)
		ol, err := redisgcra.New(none, gcra.Every(time.Hour), 3, redisgcra.WithOutage(p.outage))
		require.NoError(t, err)
		ok, err := ol.Refund(ctx, "k", 3, atomiclimit.RemoteReceipt([3]uint64{1<<53 - 1}))
		assert.False(t, ok, name)
		assert.ErrorIs(t, err, redisgcra.ErrUnavailable, name)
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
	l, err := redisgcra.New(c, gcra.Every(time.Hour), 5, redisgcra.WithKeyPrefix(uniq(t)))
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
	exists, err := c.ScriptExists(ctx, redisgcra.RefundSHA).Result()
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, exists)
}

// TestRefundForgetsCacheEntry: the refunding process drops its over-limit
// cache's bound for the key, which the refund made too high, so the next
// request goes to Redis and is admitted.
func TestRefundForgetsCacheEntry(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	l, err := redisgcra.New(s.client(t), gcra.Every(time.Hour), 2, redisgcra.WithKeyPrefix(uniq(t)), redisgcra.WithOverLimitCache(10))
	require.NoError(t, err)
	var clock fakeClock
	l.SetLocalClock(clock.now)
	_, _, err = l.Take(ctx, "k", 1)
	require.NoError(t, err)
	_, r, err := l.Take(ctx, "k", 1)
	require.NoError(t, err)
	require.False(t, l.Allow(ctx, "k"))
	require.Equal(t, 1, l.CacheLen())
	require.Equal(t, redisgcra.SourceCache, l.Decide(ctx, "k", 1).Source)
	ok, err := l.Refund(ctx, "k", 1, r)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Zero(t, l.CacheLen())
	d := l.Decide(ctx, "k", 1)
	assert.Equal(t, redisgcra.SourceRedis, d.Source)
	assert.True(t, d.Allowed)
}

// lastRefund is the give-back the refund script makes: n·T of the admission
// that stored next, when the state is still next, never below now.
func lastRefund(p *gcra.Params, tat, now, next int64, n int) (int64, bool) {
	if tat != next || n < 1 || n > p.Burst() {
		return tat, false
	}
	back := max(next-int64(n)*int64(p.Interval()), now)
	return back, back < tat
}
