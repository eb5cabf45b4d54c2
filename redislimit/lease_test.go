package redislimit_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

func newLeased(t *testing.T, l *redislimit.Limiter[string], maxLease int, minLife time.Duration) *redislimit.Leased[string] {
	t.Helper()
	ls, err := redislimit.NewLeased(l, maxLease, minLife)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func TestNewLeasedErrors(t *testing.T) {
	s := sharedServer(t)
	rdb := s.client(t)
	l, err := redislimit.New(rdb, gcra.Every(time.Millisecond), 10)
	if err != nil {
		t.Fatal(err)
	}
	unl, err := redislimit.New(rdb, gcra.Unlimited, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		l        *redislimit.Limiter[string]
		maxLease int
		minLife  time.Duration
	}{
		{nil, 1, time.Second},
		{unl, 1, time.Second},
		{l, 0, time.Second},
		{l, redislimit.MaxLease + 1, time.Second},
		{l, 1, 0},
		{l, 1, -time.Second},
	} {
		if _, err := redislimit.NewLeased(c.l, c.maxLease, c.minLife); !errors.Is(err, redislimit.ErrInvalidLease) {
			t.Errorf("case %d: err = %v, want ErrInvalidLease", i, err)
		}
	}
	if _, err := redislimit.NewLeased(l, redislimit.MaxLease, time.Second); err != nil {
		t.Errorf("MaxLease: %v", err)
	}
}

// TestLeasedFleetBound runs P Leased limiters (stand-ins for processes, each
// with its own client) on one key of one server from many goroutines, and
// checks the package doc's bound on every window of the admissions:
//
//	admitted in [a, a+d] ≤ B + d/T + min(P·k_max, L_max/T)
func TestLeasedFleetBound(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxLease int
		minLife  time.Duration
		maxN     int // requests of 1 to maxN tokens
	}{
		{"bound=Pk", 16, 20 * time.Millisecond, 1}, // P·k_max = 64 < L_max/T = 200
		{"bound=life", 64, time.Millisecond, 1},    // L_max/T = 64 < P·k_max = 256
		{"bound=Pk/n=1to3", 16, 20 * time.Millisecond, 3},
	} {
		t.Run(c.name, func(t *testing.T) { testFleetBound(t, c.maxLease, c.minLife, c.maxN) })
	}
}

func testFleetBound(t *testing.T, maxLease int, minLife time.Duration, maxN int) {
	s := sharedServer(t)
	const (
		P     = 4
		perP  = 4
		burst = 50
		run   = 300 * time.Millisecond
	)
	prefix := uniq(t)
	epoch := time.Now()
	var mu sync.Mutex
	var times []int64 // one entry per token admitted, ns since epoch
	fleet := make([]*redislimit.Leased[string], P)
	for p := range fleet {
		l, err := redislimit.New(s.client(t), gcra.Every(100*time.Microsecond), burst, redislimit.WithKeyPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		ls := newLeased(t, l, maxLease, minLife)
		ls.SetEpoch(epoch)
		ls.OnAdmit(func(at int64, n int) {
			mu.Lock()
			for range n {
				times = append(times, at)
			}
			mu.Unlock()
		})
		fleet[p] = ls
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	end := time.Now().Add(run)
	for p := range P * perP {
		ls := fleet[p%P]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				ls.Take(ctx, "hot", 1+i%maxN)
			}
		}()
	}
	wg.Wait()

	T := int64(fleet[0].Limiter().Params().Interval())
	lmax := int64(fleet[0].MaxLife())
	extra := min(int64(P*min(maxLease, burst))*T, lmax) // in ns: P·k_max·T or L_max
	worst, worstD := worstWindow(times, T)
	limit := int64(burst)*T + extra
	t.Logf("%d tokens admitted in %v; worst window %v: %.1f tokens over d/T, bound B + %.1f = %.1f",
		len(times), run, time.Duration(worstD), float64(worst)/float64(T), float64(extra)/float64(T), float64(limit)/float64(T))
	if worst > limit {
		t.Fatalf("fleet bound broken: a window of %v admitted %.1f tokens over d/T, bound %.1f",
			time.Duration(worstD), float64(worst)/float64(T), float64(limit)/float64(T))
	}
	// The leases are used: at least half of what the bound allows, where a
	// lease outlives a slow round trip. With a 1 ms minLife, a loaded
	// machine's round trips can outlast most leases (they arrive expired
	// and are dropped, as they must be), so there the count is only logged.
	if min := (burst + int(run/(100*time.Microsecond))) / 2; minLife >= 10*time.Millisecond && len(times) < min {
		t.Errorf("%d tokens admitted, want at least %d", len(times), min)
	}
}

// worstWindow sorts times (one entry per token admitted, ns) and returns
// the most tokens admitted in a window [t_i, t_j] beyond its d/T, as
// (j − i + 1)·T − (t_j − t_i), in ns, and the window's length d.
func worstWindow(times []int64, T int64) (worst, d int64) {
	slices.Sort(times)
	// For i ≤ j: (j − i + 1)·T ≤ B·T + extra + (t_j − t_i). With
	// f(j) = (j+1)·T − t_j and g(i) = i·T − t_i, that is
	// f(j) − g(i) ≤ B·T + extra: keep the least g so far.
	worst = -1 << 62
	minG, minGAt := int64(1<<62), int64(0)
	for j, tj := range times {
		if g := int64(j)*T - tj; g < minG {
			minG, minGAt = g, tj
		}
		if f := int64(j+1)*T - tj; f-minG > worst {
			worst, d = f-minG, tj-minGAt
		}
	}
	return worst, d
}

// TestLeasedAdapts: k doubles while leases are spent in time, up to maxLease,
// and halves each time a lease expires with tokens left, down to 1, so a
// quiet key strands at most one token per lease lifetime. An expired lease
// is never spent.
func TestLeasedAdapts(t *testing.T) {
	s := sharedServer(t)
	l, err := redislimit.New(s.client(t), gcra.Every(time.Millisecond), 10000, redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	ls := newLeased(t, l, 64, 10*time.Millisecond)
	var now int64
	ls.SetClock(func() int64 { return now })
	var admitted int
	ls.OnAdmit(func(_ int64, n int) { admitted += n })
	ctx := context.Background()
	step := func(i int, wantK, wantLeft int) {
		t.Helper()
		if k, left := ls.LeaseState("k"); k != wantK || left != wantLeft {
			t.Fatalf("step %d: k, left = %d, %d, want %d, %d", i, k, left, wantK, wantLeft)
		}
	}
	// Busy: leases of 1, 2, 4, …, 64, 64, 64 (255 tokens), 200 spent.
	for range 200 {
		if !ls.Allow(ctx, "k") {
			t.Fatal("denied while busy")
		}
	}
	step(0, 64, 55)
	// Quiet: one request per second, long after each lease expired (64ms
	// for 64 tokens): each refill halves k, and the expired tokens are
	// dropped, not spent.
	for i, wantK := range []int{32, 16, 8, 4, 2, 1, 1} {
		now += int64(time.Second)
		if !ls.Allow(ctx, "k") {
			t.Fatalf("step %d: denied", i+1)
		}
		step(i+1, wantK, wantK-1)
	}
	if admitted != 207 {
		t.Fatalf("admitted %d, want 207: an expired lease was spent", admitted)
	}
}

// TestLeasedPartial: a nearly empty bucket still leases what it has; a
// request Redis cannot cover takes nothing, with Redis's decision; a
// refill drops what is left of the old lease; a spend's decision counts
// the lease's tokens left.
func TestLeasedPartial(t *testing.T) {
	s := sharedServer(t)
	l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 10, redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ls := newLeased(t, l, 8, time.Hour)
	for i := range 7 { // leases of 1, 2 and 4
		if !ls.Allow(ctx, "k") {
			t.Fatalf("request %d denied", i)
		}
	}
	for i, c := range []struct {
		n               int
		want            bool
		wantK, wantLeft int
	}{
		{1, true, 8, 2},  // k = 8 asked, Redis had 3: leased
		{1, true, 8, 1},  // from the lease
		{3, false, 8, 0}, // 1 left < 3: dropped; Redis is empty: nothing taken
		{1, false, 8, 0},
		{0, true, 8, 0},
		{-1, false, 8, 0},
		{9, false, 8, 0}, // above maxLease: the Limiter decides, in one call
	} {
		d, r, err := ls.Take(ctx, "k", c.n)
		if err != nil || d.Allowed != c.want || r != (atomiclimit.Receipt{}) {
			t.Fatalf("step %d: Take(%d) = %+v, %v, %v, want allowed %v, no receipt, no error", i, c.n, d, r, err, c.want)
		}
		k, left := ls.LeaseState("k")
		if k != c.wantK || left != c.wantLeft {
			t.Fatalf("step %d: k, left = %d, %d, want %d, %d", i, k, left, c.wantK, c.wantLeft)
		}
		switch {
		case c.n == 0:
			if d != (gcra.Decision{Allowed: true}) {
				t.Fatalf("step %d: %+v, want an admitted peek that reads nothing", i, d)
			}
		case c.n < 0:
			if d != (gcra.Decision{RetryAfter: gcra.Never}) {
				t.Fatalf("step %d: %+v, want a denial that never passes", i, d)
			}
		case d.Allowed && c.n > 0:
			if d != (gcra.Decision{Allowed: true, Remaining: left}) {
				t.Fatalf("step %d: %+v, want the lease's %d left", i, d, left)
			}
		case !d.Allowed:
			// Redis's decision: it is empty (debt B·T, a few µs less by
			// now), so n waits n·T, less those µs (never for n > B).
			want := time.Duration(c.n) * time.Hour
			if c.n > 10 {
				want = gcra.Never
			}
			if d.Remaining != 0 || d.RetryAfter > want || d.RetryAfter < want-time.Second || d.ResetAfter < 10*time.Hour-time.Second {
				t.Fatalf("step %d: %+v, want Redis's denial: RetryAfter about %v, ResetAfter about 10h", i, d, want)
			}
		}
	}
	// Redis holds exactly the 10 leased: a direct peek for 1 is denied.
	if r := l.PeekResult(ctx, "k", 1); r.Allowed || r.Err != nil {
		t.Fatalf("Peek after 10 leased: %+v", r)
	}
}

// TestLeasedAllocs: spending from a lease allocates nothing.
func TestLeasedAllocs(t *testing.T) {
	s := sharedServer(t)
	l, err := redislimit.New(s.client(t), gcra.Every(time.Microsecond), 1<<20, redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	ls := newLeased(t, l, 4096, time.Hour)
	ctx := context.Background()
	for {
		if !ls.Allow(ctx, "k") {
			t.Fatal("denied")
		}
		if _, left := ls.LeaseState("k"); left >= 3000 {
			break
		}
	}
	_, before := ls.LeaseState("k")
	if a := testing.AllocsPerRun(1000, func() { ls.Allow(ctx, "k") }); a != 0 {
		t.Errorf("Allow from a lease: %v allocs, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() { ls.Take(ctx, "k", 1) }); a != 0 {
		t.Errorf("Take from a lease: %v allocs, want 0", a)
	}
	if _, left := ls.LeaseState("k"); left != before-2002 {
		t.Fatalf("left %d, want %d: a refill ran during the measurement", left, before-2002)
	}
}

// TestLeasedOutage: without Redis, the Limiter's Outage policy decides.
func TestLeasedOutage(t *testing.T) {
	s := startServer(t)
	rdb := s.client(t)
	s.kill()
	ctx := context.Background()
	for _, c := range []struct {
		o    redislimit.Outage
		want bool
	}{{redislimit.FailOpen, true}, {redislimit.FailClosed, false}} {
		l, err := redislimit.New(rdb, gcra.Every(time.Millisecond), 10, redislimit.WithOutage(c.o))
		if err != nil {
			t.Fatal(err)
		}
		ls := newLeased(t, l, 8, time.Second)
		if got := ls.Allow(ctx, "k"); got != c.want {
			t.Errorf("%v: Allow = %v, want %v", c.o, got, c.want)
		}
		d, _, err := ls.Take(ctx, "k", 2)
		if d.Allowed != c.want || !errors.Is(err, redislimit.ErrUnavailable) {
			t.Errorf("%v: Take = %+v, %v, want allowed %v and ErrUnavailable", c.o, d, err, c.want)
		}
	}
}

// TestLeasedCorrupt: a corrupt state is repaired by the lease's call as by
// Take's (an empty bucket), and the request is denied, with ErrCorrupt.
func TestLeasedCorrupt(t *testing.T) {
	s := sharedServer(t)
	rdb := s.client(t)
	l, err := redislimit.New(rdb, gcra.Every(time.Hour), 10, redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rdb.Set(ctx, l.Key("k"), "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	d, _, err := newLeased(t, l, 8, time.Hour).Take(ctx, "k", 1)
	if d.Allowed || !errors.Is(err, redislimit.ErrCorrupt) || d.RetryAfter != time.Hour {
		t.Fatalf("from a corrupt state: %+v, %v; want denied for an hour, ErrCorrupt", d, err)
	}
	if r := l.PeekResult(ctx, "k", 1); r.Allowed || r.Err != nil || r.ResetAfter <= 9*time.Hour {
		t.Fatalf("after the repair: %+v, want an empty bucket", r)
	}
}

// TestLeasedLongLife: a minLife beyond what the expiry field holds (here the
// longest Duration) gives leases that live to the field's end, not ones
// that wrap around to an expiry in the past and are never spent.
func TestLeasedLongLife(t *testing.T) {
	s := sharedServer(t)
	l, err := redislimit.New(s.client(t), gcra.Every(time.Millisecond), 100, redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	ls := newLeased(t, l, 8, time.Duration(math.MaxInt64))
	var admitted int
	ls.OnAdmit(func(_ int64, n int) { admitted += n })
	ctx := context.Background()
	for i := range 8 {
		if !ls.Allow(ctx, "k") {
			t.Fatalf("request %d denied", i)
		}
	}
	if admitted != 8 {
		t.Fatalf("admitted %d from leases, want 8", admitted)
	}
}

// TestLeasedLargeRequest: a request larger than a lease is the Limiter's
// decision, every field, heard by its Hook and answered by its over-limit
// cache once Redis has denied; a spend from a lease is neither.
func TestLeasedLargeRequest(t *testing.T) {
	s := sharedServer(t)
	h := newRecHook()
	l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 10, redislimit.WithKeyPrefix(uniq(t)),
		redislimit.WithOverLimitCache(10), redislimit.WithHook("p", h.hook()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ls := newLeased(t, l, 4, time.Hour)
	d, _, err := ls.Take(ctx, "k", 8)
	if err != nil || d != (gcra.Decision{Allowed: true, Remaining: 2, ResetAfter: 8 * time.Hour}) {
		t.Fatalf("Take(8) = %+v, %v; want the Limiter's admission", d, err)
	}
	if d, _, _ := ls.Take(ctx, "k", 1); !d.Allowed { // a lease of 1
		t.Fatal("Take(1) denied")
	}
	for _, want := range []redislimit.Source{redislimit.SourceRedis, redislimit.SourceCache} {
		d, _, err := ls.Take(ctx, "k", 5)
		if err != nil || d.Allowed || d.RetryAfter < 4*time.Hour-time.Second || d.RetryAfter > 4*time.Hour {
			t.Fatalf("Take(5) = %+v, %v; want a denial for about 4h", d, err)
		}
		if h.count(want, "denied") != 1 {
			t.Fatalf("the %v denial was not heard", want)
		}
	}
	if h.total() != 3 {
		t.Fatalf("%d events, want 3: the Limiter's admission and two denials, not the lease's", h.total())
	}
}

// TestLeasedArrivedExpired: a lease whose reply comes after its life has
// passed is never spent; the request is denied with RetryAfter 0 (Redis had
// room), and the next refill drops the lease and halves k.
func TestLeasedArrivedExpired(t *testing.T) {
	s := sharedServer(t)
	l, err := redislimit.New(s.client(t), gcra.Every(time.Millisecond), 100, redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ls := newLeased(t, l, 8, 10*time.Millisecond)
	now := int64(time.Hour)
	ls.SetClock(func() int64 { return now })
	for range 3 { // leases of 1 and 2, spent in time: the next is of 4
		if !ls.Allow(ctx, "k") {
			t.Fatal("denied")
		}
	}
	slow := true
	ls.OnRequest(func(string, bool) {}, func(string) {
		if slow {
			now += int64(time.Second) // the reply comes after the lease's life
		}
	})
	d, r, err := ls.Take(ctx, "k", 1)
	if err != nil || d != (gcra.Decision{}) || r != (atomiclimit.Receipt{}) {
		t.Fatalf("Take = %+v, %v, %v; want a denial with RetryAfter 0", d, r, err)
	}
	if k, left := ls.LeaseState("k"); k != 4 || left != 4 {
		t.Fatalf("k, left = %d, %d; want the lease of 4 installed, unspent", k, left)
	}
	slow = false
	if !ls.Allow(ctx, "k") {
		t.Fatal("denied after the expired lease")
	}
	if k, left := ls.LeaseState("k"); k != 2 || left != 1 {
		t.Fatalf("k, left = %d, %d; want k halved to 2, 1 left", k, left)
	}
}
