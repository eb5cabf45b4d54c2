package redislimit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// A hold, on a timeline of Redis times: nothing is admitted for its length,
// then the bucket refills from empty; a reservation made before it keeps
// its time and its cancel gives nothing back; a shorter hold changes
// nothing; a state of another type is replaced; a reservation made during
// it queues behind it.
func TestHold(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	const t0 = int64(1_700_000_000_000_000) // µs
	const ms = int64(time.Millisecond / time.Microsecond)
	T := 100 * time.Millisecond
	lim, err := redislimit.New(s.client(t), gcra.Every(T), 3, redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	peek := func(key string, at int64) gcra.Decision {
		t.Helper()
		r := lim.DecideAt(ctx, key, 1, false, at)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Decision
	}
	take := func(key string, at int64) bool {
		t.Helper()
		r := lim.DecideAt(ctx, key, 1, true, at)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Allowed
	}

	if !take("a", t0) {
		t.Fatal("a full bucket denied")
	}
	if err := lim.HoldAt(ctx, "a", 2*time.Second, t0); err != nil {
		t.Fatal(err)
	}
	if d := peek("a", t0+1900*ms); d.Allowed || d.RetryAfter != T {
		t.Errorf("100ms before the hold ends: %+v, want a denial of 100ms", d)
	}
	if !take("a", t0+2000*ms) || take("a", t0+2000*ms) {
		t.Error("when the hold ends: want one token, then none (the bucket refills from empty)")
	}
	if !take("a", t0+2100*ms) {
		t.Error("a token after the hold, one interval on: denied")
	}

	// A reservation before the hold keeps its time; its cancel gives back
	// nothing: the hold does not move back.
	early, err := lim.ReserveAt(ctx, "b", 3, time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	queued, err := lim.ReserveAt(ctx, "b", 1, time.Hour, t0)
	if err != nil || queued.DelayFrom(time.Now()) > T {
		t.Fatalf("the fourth token: %v, due in %v", err, queued.DelayFrom(time.Now()))
	}
	if err := lim.HoldAt(ctx, "b", time.Second, t0); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*redislimit.Reservation{queued, early} {
		if back, err := r.CancelAt(ctx, t0); back || err != nil {
			t.Errorf("a reservation before the hold gave back: %v %v", back, err)
		}
	}
	if d := peek("b", t0+999*ms); d.Allowed {
		t.Errorf("1ms before the hold ends: admitted")
	}
	if d := peek("b", t0+1000*ms); !d.Allowed {
		t.Errorf("when the hold ends: %+v", d)
	}
	// A shorter hold changes nothing; a reservation during the hold
	// queues behind it.
	if err := lim.HoldAt(ctx, "b", 500*time.Millisecond, t0); err != nil {
		t.Fatal(err)
	}
	r, err := lim.ReserveAt(ctx, "b", 1, time.Hour, t0+100*ms)
	if err != nil {
		t.Fatal(err)
	}
	if stored, _, _ := r.Taken(); stored != t0+1000*ms+3*int64(T/time.Microsecond) {
		t.Errorf("a reservation during the hold stored %d µs past t0, want the hold's end and its token", stored-t0)
	}

	// A value of another type is replaced by the hold.
	rdb := s.client(t)
	rdb.LPush(ctx, lim.Key("c"), "x")
	if err := lim.HoldAt(ctx, "c", time.Second, t0); err != nil {
		t.Fatal(err)
	}
	if take("c", t0+999*ms) || !take("c", t0+1000*ms) {
		t.Error("a hold over a list: not a hold")
	}
}

// Hold on a window rule is unsupported; a hold of no time, or on a static
// limit, makes no call; with Redis TIME, a held key's next decision waits
// for the hold.
func TestHoldEdges(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	win, err := redislimit.NewRule(s.client(t), atomiclimit.AnchoredWindow(5, time.Second), redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := win.Hold(ctx, "k", time.Second); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("a window's hold: %v, want ErrUnsupported", err)
	}
	c := &countingScripter{Client: s.client(t)}
	for _, l := range []gcra.Limit{gcra.Unlimited, gcra.Every(time.Second)} {
		lim, err := redislimit.New(c, l, 1, redislimit.WithKeyPrefix(uniq(t)))
		if err != nil {
			t.Fatal(err)
		}
		if err := lim.Hold(ctx, "k", 0); err != nil {
			t.Fatal(err)
		}
		if l == gcra.Unlimited {
			if err := lim.Hold(ctx, "k", time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := c.count(); n != 0 {
		t.Errorf("%d calls for holds that hold nothing", n)
	}
	lim, err := redislimit.New(s.client(t), gcra.Every(10*time.Millisecond), 5, redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := lim.Hold(ctx, "k", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d, _, err := lim.Take(ctx, "k", 1)
	if err != nil || d.Allowed || d.RetryAfter < 250*time.Millisecond || d.RetryAfter > 300*time.Millisecond {
		t.Errorf("a take during the hold: %+v %v, want a wait of about 300ms", d, err)
	}
}
