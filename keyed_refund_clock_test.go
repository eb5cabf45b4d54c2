package atomiclimit_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// coarseKeyed returns a keyed GCRA limiter on a hand-driven coarse clock:
// reading is what the ticker last stored, fresh the monotonic clock a
// denial (and a give-back) reads.
func coarseKeyed(t testing.TB, rule atomiclimit.Rule, reading, fresh *atomic.Int64, hook bool) *atomiclimit.Keyed[string] {
	t.Helper()
	opts := []atomiclimit.Option{atomiclimit.WithSource(timebase.ManualCoarse(reading, nil, fresh.Load)), atomiclimit.WithSweepInterval(0)}
	if hook {
		opts = append(opts, atomiclimit.WithHook("p", &atomiclimit.Hook{}))
	}
	k, err := atomiclimit.NewKeyedRule[string](rule, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A coarse denial is decided again at a fresh reading, so an admission can
// be stamped ahead of the coarse reading. A give-back of an earlier
// admission must not read the lagging coarse clock: it would hand back the
// later admission's tokens. Burst 11: A takes all 11, C one at the fresh
// reading 0.5ms later, A is given back, D asks for 11 at C's instant.
func TestRefundUnderCoarseClock(t *testing.T) {
	for _, hook := range []bool{false, true} { // the fast path, and the path with a hook
		t.Run(map[bool]string{false: "path=fast", true: "path=hook"}[hook], func(t *testing.T) {
			ctx := context.Background()
			const c = int64(10 * time.Second)
			var reading, fresh atomic.Int64
			reading.Store(c)
			fresh.Store(c)
			k := coarseKeyed(t, atomiclimit.GCRA(atomiclimit.Every(100*time.Microsecond), 11), &reading, &fresh, hook)
			a, ra, _ := k.Take(ctx, "k", 11)
			if !a.Allowed {
				t.Fatal("A denied on a full bucket")
			}
			fresh.Add(int64(500 * time.Microsecond)) // the ticker has not ticked
			if d, _, _ := k.Take(ctx, "k", 1); !d.Allowed {
				t.Fatal("C denied at the fresh reading, when the bucket admits it: the denial was not decided again")
			}
			if back, _ := k.Refund(ctx, "k", 11, ra); !back {
				t.Fatal("A's give-back gave nothing")
			}
			if d, _, _ := k.Take(ctx, "k", 11); d.Allowed {
				t.Fatal("12 tokens at one instant with burst 11: the give-back returned C's token")
			}
			if d, _, _ := k.Take(ctx, "k", 10); !d.Allowed {
				t.Fatal("10 of burst 11 denied after A was given back")
			}
		})
	}
}

// TestRefundUnderCoarseClockConcurrent: goroutines take 1 to B tokens on a
// coarse clock that lags the fresh one, and give back some admissions later,
// as a door does when another policy denies. The tokens of the admissions
// kept (not given back) stay within B + elapsed/T.
func TestRefundUnderCoarseClockConcurrent(t *testing.T) {
	const (
		workers  = 8
		steps    = 3000
		burst    = 11 // the coarse clock needs (B−1)·T of a tick at least
		interval = int64(100 * time.Microsecond)
	)
	var reading, fresh atomic.Int64
	start := int64(time.Second)
	reading.Store(start)
	fresh.Store(start)
	k := coarseKeyed(t, atomiclimit.GCRA(atomiclimit.Every(time.Duration(interval)), burst), &reading, &fresh, false)
	ctx := context.Background()
	var kept atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			type admission struct {
				n int
				r atomiclimit.Receipt
			}
			var held []admission
			for range steps {
				// Time moves on in the fresh clock; the coarse reading
				// catches up only now and then, as a stalled ticker does.
				fresh.Add(rng.Int64N(interval / 2))
				if rng.IntN(256) == 0 {
					reading.Store(fresh.Load())
				}
				n := 1 + rng.IntN(burst)
				if d, r, _ := k.Take(ctx, "k", n); d.Allowed {
					held = append(held, admission{n, r})
				}
				if len(held) > 0 && rng.IntN(8) == 0 {
					i := rng.IntN(len(held))
					if back, _ := k.Refund(ctx, "k", held[i].n, held[i].r); !back {
						kept.Add(int64(held[i].n)) // nothing came back: the tokens are spent
					}
					held = append(held[:i], held[i+1:]...)
				}
			}
			for _, a := range held {
				kept.Add(int64(a.n))
			}
		}()
	}
	wg.Wait()
	bound := burst + (fresh.Load()-start)/interval
	if kept.Load() > bound {
		t.Fatalf("kept %d tokens, bound B + elapsed/T = %d", kept.Load(), bound)
	}
	t.Logf("kept %d tokens, bound %d", kept.Load(), bound)
}

// A receipt from before SetRule gives back nothing: the new rule could
// measure the admission as more than it took (here, 5s a token for an
// admission that took 1s).
func TestRefundAfterSetRuleGivesNothing(t *testing.T) {
	ctx := context.Background()
	var clk atomiclimit.ManualClock
	k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(atomiclimit.Every(time.Second), 10), atomiclimit.WithClock(&clk), atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	for range 9 {
		k.Take(ctx, "k", 1)
	}
	_, r, _ := k.Take(ctx, "k", 1)
	if err := k.SetRule(atomiclimit.GCRA(atomiclimit.Every(5*time.Second), 10)); err != nil {
		t.Fatal(err)
	}
	if back, _ := k.Refund(ctx, "k", 1, r); back {
		t.Fatal("a give-back across SetRule gave something back")
	}
	// TAT is 10s ahead: under 5s a token, 8 of the burst's 50s are left.
	admitted := 0
	for range 20 {
		if d, _, _ := k.Take(ctx, "k", 1); d.Allowed {
			admitted++
		}
	}
	if admitted != 8 {
		t.Fatalf("admitted %d after SetRule, want 8", admitted)
	}
}

// A cancelled reservation makes its key idle as a give-back does, and a full
// limiter with RejectNew finds the room: it is told of the cancel.
func TestCancelMakesRoomRejectNew(t *testing.T) {
	ctx := context.Background()
	var clk atomiclimit.ManualClock
	k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(atomiclimit.Every(time.Second), 1), atomiclimit.WithClock(&clk),
		atomiclimit.WithSweepInterval(0), atomiclimit.WithMaxKeys(2, atomiclimit.RejectNew))
	if err != nil {
		t.Fatal(err)
	}
	ra, err := k.Reserve("a")
	if err != nil {
		t.Fatal(err)
	}
	k.Take(ctx, "b", 1)
	if d, _, _ := k.Take(ctx, "c", 1); d.Allowed {
		t.Fatal("c admitted while a and b are active in a limiter of 2 keys")
	}
	ra.Cancel()
	if d, _, err := k.Take(ctx, "c", 1); !d.Allowed {
		t.Fatalf("a is idle since its cancel, yet c is refused: %v", err)
	}
}
