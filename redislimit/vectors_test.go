package redislimit_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// The shared decision vectors. Each runs twice: through gcra's pure
// arithmetic (Params.Decide, with the limiter's rounded Params) and through
// the script in a real redis-server, at the same times; any difference in
// any field of any step fails. Steps may also carry hand-written
// expectations, which both runs must meet.

const us = int64(time.Microsecond)

// vstep is one request at time at (µs on the vector's timeline), for n
// tokens, consuming them (take) or only peeking.
type vstep struct {
	at   int64
	n    int
	peek bool
	want *gcra.Decision // optional
}

type vector struct {
	name  string
	limit gcra.Limit
	burst int
	steps []vstep
}

func D(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func want(ok bool, remaining int, retry, reset, token time.Duration) *gcra.Decision {
	return &gcra.Decision{Allowed: ok, Remaining: remaining, RetryAfter: retry, ResetAfter: reset, TokenAfter: token}
}

func handVectors() []vector {
	const ms = 1000 // µs
	return []vector{{
		// 10/s, burst 3: T = 100ms, B·T = 300ms.
		name: "timeline", limit: gcra.Per(10, time.Second), burst: 3,
		steps: []vstep{
			{at: 0, n: 1, want: want(true, 2, 0, D(100), 0)},
			{at: 0, n: 1, want: want(true, 1, 0, D(200), 0)},
			{at: 0, n: 1, want: want(true, 0, 0, D(300), D(100))},
			{at: 0, n: 1, want: want(false, 0, D(100), D(300), D(100))},
			{at: 50 * ms, n: 1, want: want(false, 0, D(50), D(250), D(50))},
			{at: 100 * ms, n: 1, want: want(true, 0, 0, D(300), D(100))}, // TAT 400ms
			{at: 100 * ms, n: 2, want: want(false, 0, D(200), D(300), D(100))},
			// A stale or backward now is stricter, never a refill.
			{at: 50 * ms, n: 1, want: want(false, 0, D(150), D(350), D(150))},
			{at: 0, n: 1, want: want(false, 0, D(200), D(400), D(200))},
			{at: 400 * ms, n: 3, want: want(true, 0, 0, D(300), D(100))},
			{at: 550 * ms, n: 1, want: want(true, 0, 0, D(250), D(50))},
			// Peeks consume nothing.
			{at: 1000 * ms, n: 2, peek: true, want: want(true, 1, 0, D(200), 0)},
			{at: 1000 * ms, n: 3, peek: true, want: want(true, 0, 0, D(300), D(100))},
			// n > B and n < 0 never pass: Never, and nothing is consumed;
			// n = 0 is an admitted peek that consumes nothing.
			{at: 1000 * ms, n: 4, want: want(false, 3, gcra.Never, 0, 0)},
			{at: 1000 * ms, n: 0, want: want(true, 3, 0, 0, 0)},
			{at: 1000 * ms, n: -1, want: want(false, 3, gcra.Never, 0, 0)},
			{at: 1000 * ms, n: math.MinInt, want: want(false, 3, gcra.Never, 0, 0)},
			{at: 1000 * ms, n: math.MaxInt, want: want(false, 3, gcra.Never, 0, 0)},
			{at: 1000 * ms, n: 2, want: want(true, 1, 0, D(200), 0)},
			// Exactly at the retry-after instant the same request passes.
			{at: 1000 * ms, n: 2, want: want(false, 1, D(100), D(200), 0)},
			{at: 1100 * ms, n: 2, want: want(true, 0, 0, D(300), D(100))},
			{at: 1100 * ms, n: 1, peek: true, want: want(false, 0, D(100), D(300), D(100))},
		},
	}, {
		// Burst 1: one event every T, never two at once.
		name: "no-burst", limit: gcra.Every(time.Second), burst: 1,
		steps: []vstep{
			{at: 0, n: 1, want: want(true, 0, 0, time.Second, time.Second)},
			{at: 0, n: 1, want: want(false, 0, time.Second, time.Second, time.Second)},
			{at: 1000*ms - 1, n: 1, want: want(false, 0, time.Microsecond, time.Microsecond, time.Microsecond)},
			{at: 1000 * ms, n: 1, want: want(true, 0, 0, time.Second, time.Second)},
			{at: 10000 * ms, n: 1, want: want(true, 0, 0, time.Second, time.Second)},
		},
	}, {
		// 3/s: T = 333333334ns, rounded up to 333334µs in Redis.
		name: "rounded-3/s", limit: gcra.Per(3, time.Second), burst: 2,
		steps: []vstep{
			{at: 0, n: 2, want: want(true, 0, 0, 666668*time.Microsecond, 333334*time.Microsecond)},
			{at: 333333, n: 1, want: want(false, 0, time.Microsecond, 333335*time.Microsecond, time.Microsecond)},
			{at: 333334, n: 1, want: want(true, 0, 0, 666668*time.Microsecond, 333334*time.Microsecond)},
			{at: 333334 + 1000000, n: 2},
			{at: 333334 + 1000000, n: 1},
		},
	}, {
		// An interval 1ns past a whole microsecond rounds up a whole µs.
		name: "rounded-100ms+1ns", limit: gcra.Every(100*time.Millisecond + 1), burst: 4,
		steps: []vstep{
			{at: 0, n: 4, want: want(true, 0, 0, 400004*time.Microsecond, 100001*time.Microsecond)},
			{at: 100000, n: 1, want: want(false, 0, time.Microsecond, 300004*time.Microsecond, time.Microsecond)},
			{at: 100001, n: 1},
			{at: 100001, n: 1},
		},
	}, {
		// A span of 100 days: a debt of 60 days is reported whole (the
		// script's debt was once clamped at 2^52 ns, 52 days: Remaining 46).
		name: "100-day-span", limit: gcra.Every(24 * time.Hour), burst: 100,
		steps: []vstep{
			{at: 0, n: 60, want: want(true, 40, 0, 60*24*time.Hour, 0)},
			{at: 0, n: 1, peek: true, want: want(true, 39, 0, 61*24*time.Hour, 0)},
			{at: 0, n: 41, want: want(false, 40, 24*time.Hour, 60*24*time.Hour, 0)},
		},
	}}
}

// randomVectors draws sequences over every branch: full, partly drained,
// empty, backward time, invalid n, peeks. Intervals are at least 50ms so
// that a key's real-time expiry (its TTL is at least its debt) cannot fall
// inside the test's run of a vector. Time steps back at most B·T behind the
// latest step: further back, the stored TAT would be more than 2·B·T ahead,
// which the script takes for a corrupt value (TestCorruptStateRepaired).
func randomVectors(seed uint64) []vector {
	rng := rand.New(rand.NewPCG(seed, 1))
	var vs []vector
	for v := range 6 {
		interval := time.Duration(50_000+rng.IntN(200_000))*time.Microsecond + time.Duration(rng.IntN(1000)) // not always whole µs
		burst := 1 + rng.IntN(6)
		steps := make([]vstep, 60)
		at, latest := int64(0), int64(0)
		for i := range steps {
			switch r := rng.IntN(10); {
			case r < 6:
				at += rng.Int64N(int64(interval) / us) // forward, within an interval
			case r < 8:
				at += rng.Int64N(3 * int64(interval) / us)
			default:
				// backward, at most B·T behind the latest step
				at = max(0, at-rng.Int64N(int64(interval)/us), latest-int64(burst)*int64(interval)/us)
			}
			latest = max(latest, at)
			n := 1 + rng.IntN(burst)
			if rng.IntN(12) == 0 {
				n = burst + 1 - rng.IntN(burst+3) // sometimes < 1 or > B
			}
			steps[i] = vstep{at: at, n: n, peek: rng.IntN(6) == 0}
		}
		vs = append(vs, vector{name: fmt.Sprintf("random-%d-%d", seed, v), limit: gcra.Every(interval), burst: burst, steps: steps})
	}
	return vs
}

func allVectors() []vector {
	vs := handVectors()
	for seed := range uint64(3) {
		vs = append(vs, randomVectors(seed)...)
	}
	return vs
}

// gcraRun decides the vector with the pure arithmetic.
func gcraRun(p *gcra.Params, steps []vstep) []gcra.Decision {
	var tat int64 // 0: full, as an absent key
	out := make([]gcra.Decision, len(steps))
	for i, s := range steps {
		next, d := p.Decide(tat, s.at*us, s.n)
		if !s.peek {
			tat = next
		}
		out[i] = d
	}
	return out
}

func TestVectorsGCRA(t *testing.T) {
	// The vectors against gcra alone: no server needed.
	c := sharedClientOrNil()
	for _, v := range allVectors() {
		l, err := redislimit.New(c, v.limit, v.burst)
		require.NoError(t, err, v.name)
		got := gcraRun(l.Params(), v.steps)
		for i, s := range v.steps {
			if s.want != nil {
				assert.Equal(t, *s.want, got[i], "%s step %d (at %dµs n %d)", v.name, i, s.at, s.n)
			}
		}
	}
}

func TestVectorsRedis(t *testing.T) {
	runGCRAVectors(t, sharedServer(t).client(t), "")
}

// runGCRAVectors runs every GCRA vector through gcra and through Redis via
// c, on keys under prefix.
func runGCRAVectors(t *testing.T, c redis.UniversalClient, prefix string) {
	ctx := context.Background()
	// Real magnitudes: the vectors' timeline starts at the server's time.
	base, err := c.Time(ctx).Result()
	require.NoError(t, err)
	t0 := base.UnixMicro()
	before := redislimit.ScriptMismatches()
	for vi, v := range allVectors() {
		l, err := redislimit.New(c, v.limit, v.burst, redislimit.WithKeyPrefix(prefix+fmt.Sprintf("vec%d:", vi)+uniq(t)))
		require.NoError(t, err)
		p := l.Params()
		ref := gcraRun(p, v.steps)
		var tat int64 // the reference's state, to check what Redis stored
		for i, st := range v.steps {
			called := time.Now()
			r := l.DecideAt(ctx, "k", st.n, !st.peek, t0+st.at)
			require.Equal(t, redislimit.SourceRedis, r.Source, "%s step %d: %v", v.name, i, r.Err)
			require.Equal(t, ref[i], r.Decision, "%s step %d (at %dµs n %d peek %v): redis vs gcra", v.name, i, st.at, st.n, st.peek)
			if st.want != nil {
				require.Equal(t, *st.want, r.Decision, "%s step %d: hand-written", v.name, i)
			}
			if !st.peek && r.Allowed && st.n > 0 { // n = 0 stores nothing
				tat = max(tat, st.at*us) + int64(st.n)*int64(p.Interval())
				// Stored: TAT in whole µs since the Unix epoch, as a decimal
				// integer; and a TTL that outlives it.
				val, err := c.Get(ctx, l.Key("k")).Result()
				require.NoError(t, err)
				require.Equal(t, strconv.FormatInt(t0+tat/us, 10), val, "%s step %d: stored TAT", v.name, i)
				pttl, err := c.PTTL(ctx, l.Key("k")).Result()
				require.NoError(t, err)
				ahead := time.Duration(tat - st.at*us)
				// The TTL runs in the server's real time from the call on, so
				// it may have lost what passed since then (measured, not a
				// fixed slack: a loaded CI machine took more than 10 ms),
				// plus PTTL's truncation to whole milliseconds.
				passed := time.Since(called)
				require.Greater(t, pttl, ahead-passed-time.Millisecond, "%s step %d: TTL %v shorter than the debt %v less the %v since the call", v.name, i, pttl, ahead, passed)
				require.LessOrEqual(t, pttl, ahead.Truncate(time.Millisecond)+2*time.Millisecond, "%s step %d: TTL", v.name, i)
			}
		}
	}
	assert.Equal(t, before, redislimit.ScriptMismatches(), "script and gcra disagreed on Allowed")
}

// sharedClientOrNil returns a client for tests that build limiters but make
// no calls (New makes none): any non-nil Scripter will do.
func sharedClientOrNil() *noServer { return &noServer{} }
