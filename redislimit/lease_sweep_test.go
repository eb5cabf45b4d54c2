package redislimit_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// sweepLeased is a Leased of a fresh key prefix on the shared server, with
// leases of up to 64 tokens (MaxLife 64 ms), on the fake clock *now.
func sweepLeased(t *testing.T, now *atomic.Int64) *redislimit.Leased[string] {
	t.Helper()
	l, err := redislimit.New(sharedServer(t).client(t), gcra.Every(time.Millisecond), 1<<20, redislimit.WithKeyPrefix(uniq(t)))
	if err != nil {
		t.Fatal(err)
	}
	ls := newLeased(t, l, 64, 10*time.Millisecond)
	ls.SetClock(now.Load)
	return ls
}

// TestLeasedSweepFreesIdle: a sweep frees the cells of the keys that asked
// for no lease for 2·MaxLife, and no sooner; a freed key's next request
// makes a new cell (k = 1) and is decided as usual.
func TestLeasedSweepFreesIdle(t *testing.T) {
	if redislimit.LeaseCellSize != 32 {
		t.Errorf("a cell is %d bytes, want 32 (the type doc says so)", redislimit.LeaseCellSize)
	}
	var now atomic.Int64
	ls := sweepLeased(t, &now)
	ctx := context.Background()
	const keys = 100
	for i := range keys {
		if !ls.Allow(ctx, strconv.Itoa(i)) {
			t.Fatalf("key %d denied", i)
		}
	}
	idle := 2 * int64(ls.MaxLife()) // every key asked at t0 = 0
	for i, c := range []struct {
		at        int64
		wantFreed int
		wantCells int
	}{
		{0, 0, keys},
		{int64(ls.MaxLife()), 0, keys}, // the leases just expired: kept
		{idle - 1, 0, keys},
		{idle, keys, 0},
		{idle, 0, 0},
	} {
		now.Store(c.at)
		if freed := ls.Sweep(); freed != c.wantFreed || ls.Cells() != c.wantCells {
			t.Fatalf("step %d: at %v: Sweep() = %d with %d cells left, want %d and %d",
				i, time.Duration(c.at), freed, ls.Cells(), c.wantFreed, c.wantCells)
		}
	}
	for i := range keys {
		if !ls.Allow(ctx, strconv.Itoa(i)) {
			t.Fatalf("key %d denied after its cell was freed", i)
		}
		if k, left := ls.LeaseState(strconv.Itoa(i)); k != 1 || left != 0 {
			t.Fatalf("key %d: k, left = %d, %d, want a new cell's 1, 0", i, k, left)
		}
	}
	if ls.Cells() != keys {
		t.Fatalf("%d cells, want %d", ls.Cells(), keys)
	}
}

// TestLeasedSweepKeepsBusy: a key's cell stays while its lease is live and
// for MaxLife after, with its k; a cell whose refill is in flight (its lock
// held) is kept however old its last request.
func TestLeasedSweepKeepsBusy(t *testing.T) {
	var now atomic.Int64
	ls := sweepLeased(t, &now)
	ctx := context.Background()
	for range 200 { // leases of 1, 2, …, 64, 64, 64: k = 64, 55 left
		if !ls.Allow(ctx, "busy") {
			t.Fatal("denied while busy")
		}
	}
	maxLife := int64(ls.MaxLife())
	for i, c := range []struct {
		at              int64
		spend           bool // Allow("busy") at `at`, before the sweep
		wantFreed       int
		wantK, wantLeft int
	}{
		{maxLife / 2, true, 0, 64, 54},       // spent from the live lease
		{maxLife * 15 / 16, true, 0, 64, 53}, // late in its life (it ends near 64 ms: 2^20 ns units)
		{2*maxLife - 1, false, 0, 64, 53},    // expired, not idle yet: k kept
		{2 * maxLife, false, 1, 0, 0},        // idle: freed
	} {
		now.Store(c.at)
		if c.spend && !ls.Allow(ctx, "busy") {
			t.Fatalf("step %d: denied", i)
		}
		if freed := ls.Sweep(); freed != c.wantFreed {
			t.Fatalf("step %d: Sweep() = %d, want %d", i, freed, c.wantFreed)
		}
		if k, left := ls.LeaseState("busy"); k != c.wantK || left != c.wantLeft {
			t.Fatalf("step %d: k, left = %d, %d, want %d, %d", i, k, left, c.wantK, c.wantLeft)
		}
	}

	// Idle counts from the last lease request, not from the cell's birth:
	// a key made at 0 that asks again at t1 is kept until t1 + 2·MaxLife.
	now.Store(0)
	if !ls.Allow(ctx, "late") {
		t.Fatal("late: denied at 0")
	}
	t1 := 3 * maxLife // its lease of 1 has expired: the next Allow refills
	now.Store(t1)
	if !ls.Allow(ctx, "late") {
		t.Fatal("late: denied at t1")
	}
	now.Store(t1 + 2*maxLife - 1)
	if ls.Sweep(); !ls.HasCell("late") {
		t.Fatal("late: freed 2·MaxLife after its cell was made, though it asked again at t1")
	}
	now.Store(t1 + 2*maxLife)
	if ls.Sweep(); ls.HasCell("late") {
		t.Fatal("late: kept at t1 + 2·MaxLife")
	}

	// A refill in flight holds the cell's lock: the sweep passes it by. (The
	// clock jumps while the request is out, so its lease arrives expired.)
	now.Store(0)
	asking, release := make(chan struct{}), make(chan struct{})
	ls.OnRequest(func(key string, _ bool) {
		if key == "slow" {
			close(asking)
			<-release
		}
	}, func(string) {})
	done := make(chan bool)
	go func() { done <- ls.Allow(ctx, "slow") }()
	<-asking
	now.Store(100 * maxLife)
	if freed := ls.Sweep(); freed != 0 || ls.Cells() != 1 {
		t.Fatalf("Sweep() during a refill = %d with %d cells, want 0 and 1", freed, ls.Cells())
	}
	close(release)
	if <-done {
		t.Fatal("slow: admitted from a lease that arrived expired")
	}
	now.Store(200 * maxLife)
	if freed := ls.Sweep(); freed != 1 || ls.Cells() != 0 {
		t.Fatalf("Sweep() after the refill = %d with %d cells, want 1 and 0", freed, ls.Cells())
	}
}

// TestLeasedSweepRefillRace is the race the dead mark closes, played step by
// step: refill A finds key's cell c and is about to lock it; a sweep frees
// c; request B makes a new cell c' and leases on it; then A locks c. A must
// not lease on c (the process would hold two leases of the key, c's and
// c”s): it finds c dead and goes on with c'.
func TestLeasedSweepRefillRace(t *testing.T) {
	var now atomic.Int64
	ls := sweepLeased(t, &now)
	ctx := context.Background()
	var stale atomic.Int32
	ls.OnRequest(func(_ string, current bool) {
		if !current {
			stale.Add(1)
		}
	}, func(string) {})
	var arm atomic.Bool
	reached, release := make(chan struct{}), make(chan struct{})
	var retries atomic.Int32
	ls.OnLocking(func(_ string, retry bool) {
		if retry {
			retries.Add(1)
		}
		if arm.CompareAndSwap(true, false) {
			close(reached)
			<-release
		}
	})

	if !ls.Allow(ctx, "k") { // t0: c, a lease of 1, spent
		t.Fatal("denied")
	}
	now.Store(2 * int64(ls.MaxLife())) // c is idle
	arm.Store(true)
	done := make(chan bool)
	go func() { done <- ls.Allow(ctx, "k") }() // A: refill, holds c, stops before c.mu.Lock
	<-reached
	if freed := ls.Sweep(); freed != 1 || ls.Cells() != 0 {
		t.Fatalf("Sweep() = %d with %d cells, want 1 and 0", freed, ls.Cells())
	}
	if !ls.Allow(ctx, "k") { // B: c', a lease of 1, spent
		t.Fatal("B denied")
	}
	close(release)
	if !<-done {
		t.Fatal("A denied")
	}
	// A went on with c': its lease of 1 ran out in time, so k doubled, and
	// A spent one of the 2.
	if k, left := ls.LeaseState("k"); k != 2 || left != 1 || ls.Cells() != 1 {
		t.Fatalf("k, left = %d, %d with %d cells, want 2, 1 with 1: A leased on the freed cell", k, left, ls.Cells())
	}
	if n := stale.Load(); n != 0 {
		t.Fatalf("%d lease requests on a cell not in the map", n)
	}
	if n := retries.Load(); n != 1 {
		t.Fatalf("%d refills found their cell dead, want 1 (A)", n)
	}
}

// TestLeasedSweepDropsLease: a sweep drops the lease of the cell it frees,
// so a goroutine that loaded the cell before and spends on it after fails
// (and refills on the key's new cell): the freed cell's tokens are never
// spent beside a new lease's. SetIdle(0) frees a cell whose lease is live.
func TestLeasedSweepDropsLease(t *testing.T) {
	var now atomic.Int64
	ls := sweepLeased(t, &now)
	ls.SetIdle(0)
	ctx := context.Background()
	for range 2 { // leases of 1 and 2: 1 left
		if !ls.Allow(ctx, "k") {
			t.Fatal("denied")
		}
	}
	if _, left := ls.LeaseState("k"); left != 1 {
		t.Fatalf("left %d, want 1", left)
	}
	stale := ls.HoldCell("k")
	if freed := ls.Sweep(); freed != 1 {
		t.Fatalf("Sweep() = %d, want 1", freed)
	}
	if stale(1) {
		t.Fatal("spent a token of a freed cell's lease")
	}
	if !ls.Allow(ctx, "k") {
		t.Fatal("denied after the sweep")
	}
	if k, left := ls.LeaseState("k"); k != 1 || left != 0 || ls.Cells() != 1 {
		t.Fatalf("k, left = %d, %d with %d cells, want a new cell's 1, 0 with 1", k, left, ls.Cells())
	}
	if stale(1) {
		t.Fatal("spent from a freed cell after the key's new lease")
	}
}

// TestLeasedSweepStress: P processes spend and refill a few keys from many
// goroutines while each process sweeps in a tight loop with every cell
// whose lock is free counted idle (SetIdle(0)), so that cells are freed
// under the spends and refills all the time. Every lease request must be
// on the map's current cell of its key, at most one per key and process in
// flight at a time, and the admissions of each key must keep the fleet
// bound on every window (package doc, "Leases"):
//
//	admitted in [a, a+d] ≤ B + d/T + min(P·k_max, L_max/T)
func TestLeasedSweepStress(t *testing.T) {
	s := sharedServer(t)
	const (
		P        = 2
		perP     = 6
		keys     = 3 // key i's requests are for i+1 tokens: OnAdmit's n names the key
		burst    = 20
		maxLease = 8
		perG     = 3000 // requests per goroutine, at most
		run      = 300 * time.Millisecond
	)
	prefix := uniq(t)
	epoch := time.Now()
	var mu sync.Mutex
	times := make([][]int64, keys) // per key, one entry per token admitted
	var stale, overlap, requests, freed, retries atomic.Int64
	fleet := make([]*redislimit.Leased[string], P)
	for p := range fleet {
		l, err := redislimit.New(s.client(t), gcra.Every(100*time.Microsecond), burst, redislimit.WithKeyPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		ls := newLeased(t, l, maxLease, 5*time.Millisecond)
		ls.SetEpoch(epoch)
		ls.SetIdle(0)
		inFlight := make([]atomic.Int32, keys)
		ls.OnRequest(func(key string, current bool) {
			requests.Add(1)
			if !current {
				stale.Add(1)
			}
			if inFlight[key[0]-'a'].Add(1) > 1 {
				overlap.Add(1)
			}
		}, func(key string) { inFlight[key[0]-'a'].Add(-1) })
		ls.OnAdmit(func(at int64, n int) {
			mu.Lock()
			for range n {
				times[n-1] = append(times[n-1], at)
			}
			mu.Unlock()
		})
		ls.OnSwept(func(n int) { freed.Add(int64(n)) })
		ls.OnLocking(func(_ string, retry bool) {
			if retry {
				retries.Add(1)
			}
		})
		fleet[p] = ls
	}
	ctx := context.Background()
	var workers, sweepers sync.WaitGroup
	stop := make(chan struct{})
	end := time.Now().Add(run)
	for p, ls := range fleet {
		sweepers.Add(1)
		go func() {
			defer sweepers.Done()
			for {
				select {
				case <-stop:
					return
				default:
					ls.Sweep()
				}
			}
		}()
		for g := range perP {
			workers.Add(1)
			go func() {
				defer workers.Done()
				for i := 0; i < perG && time.Now().Before(end); i++ {
					k := (p + g + i) % keys
					ls.Take(ctx, string(rune('a'+k)), k+1)
				}
			}()
		}
	}
	workers.Wait()
	close(stop)
	sweepers.Wait()

	if n := stale.Load(); n != 0 {
		t.Errorf("%d lease requests on a cell not in the map (a second lease of a key in a process)", n)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d lease requests while another of the same key and process was in flight", n)
	}
	if freed.Load() == 0 {
		t.Error("the sweeps freed no cell: the test exercised nothing")
	}
	T := int64(fleet[0].Limiter().Params().Interval())
	extra := min(int64(P*maxLease)*T, int64(fleet[0].MaxLife()))
	limit := int64(burst)*T + extra
	total := 0
	for k, tk := range times {
		total += len(tk)
		worst, d := worstWindow(tk, T)
		if worst > limit {
			t.Errorf("key %c: a window of %v admitted %.1f tokens over d/T, bound %.1f",
				'a'+k, time.Duration(d), float64(worst)/float64(T), float64(limit)/float64(T))
		}
	}
	t.Logf("%d lease requests, %d cells freed, %d refills found their cell dead, %d tokens admitted",
		requests.Load(), freed.Load(), retries.Load(), total)
	if total == 0 {
		t.Error("nothing admitted")
	}
}

// TestLeasedAutoSweep: Leased sweeps by itself once the lease requests since
// its last sweep reach SweepFloor (or the cells that sweep kept), on a
// goroutine of its own, never the caller's.
func TestLeasedAutoSweep(t *testing.T) {
	var now atomic.Int64
	ls := sweepLeased(t, &now)
	ctx := context.Background()
	var requests atomic.Int64
	ls.OnRequest(func(string, bool) { requests.Add(1) }, func(string) {})
	type sweep struct {
		freed, requests int
		goid            uint64
	}
	swept := make(chan sweep, 16)
	ls.OnSwept(func(freed int) { swept <- sweep{freed, int(requests.Load()), goid()} })
	const old = 100
	for i := range old {
		if !ls.Allow(ctx, fmt.Sprint("old", i)) {
			t.Fatal("denied")
		}
	}
	now.Store(2 * int64(ls.MaxLife())) // the old keys are idle
	me := goid()
	for i := range redislimit.SweepFloor - old {
		if !ls.Allow(ctx, fmt.Sprint("new", i)) {
			t.Fatal("denied")
		}
	}
	select {
	case s := <-swept:
		if s.goid == me {
			t.Errorf("the sweep ran on the goroutine of the request that started it")
		}
		if s.requests < redislimit.SweepFloor {
			t.Errorf("a sweep after %d lease requests, want none before %d", s.requests, redislimit.SweepFloor)
		}
		if s.freed != old {
			t.Errorf("the sweep freed %d cells, want the %d idle ones", s.freed, old)
		}
	case <-time.After(10 * time.Second): // a failure, not a wait: the sweep was started above
		t.Fatal("no sweep after SweepFloor lease requests")
	}
	if n := ls.Cells(); n != redislimit.SweepFloor-old {
		t.Errorf("%d cells, want the %d new keys'", n, redislimit.SweepFloor-old)
	}
	select {
	case s := <-swept:
		t.Errorf("a second sweep (%+v), after %d requests", s, requests.Load())
	default:
	}
}

// TestLeasedMemory measures the heap a leased key holds (its cell and the
// map's share, not the key's own bytes), and that a sweep gives it back.
func TestLeasedMemory(t *testing.T) {
	var now atomic.Int64
	ls := sweepLeased(t, &now)
	ctx := context.Background()
	const keys = 4096
	names := make([]string, keys) // made first: the keys' bytes are not counted
	for i := range names {
		names[i] = fmt.Sprint("m", i)
	}
	ls.Allow(ctx, "warm") // the client's connection and buffers
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	before := heap()
	for _, k := range names {
		if !ls.Allow(ctx, k) {
			t.Fatal("denied")
		}
	}
	leased := heap()
	// The 4,096 requests start automatic sweeps (one per sweepFloor): let
	// the last finish before the clock moves, or it would free some of the
	// cells that Sweep is to count.
	for deadline := time.Now().Add(10 * time.Second); ls.AutoSweeping(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("an automatic sweep still runs after 10 s")
		}
	}
	now.Store(2 * int64(ls.MaxLife()))
	if freed := ls.Sweep(); freed != keys+1 {
		t.Fatalf("Sweep() = %d, want %d", freed, keys+1)
	}
	swept := heap()
	per := float64(leased-before) / keys
	t.Logf("%.0f B per leased key (cell %d B), %.0f B per key left after the sweep", per, redislimit.LeaseCellSize, float64(swept-before)/keys)
	// Per key: the cell, the map's entry (a string header and a pointer,
	// 24 B) and its table share, 17 to 34 B as the table fills (64-byte
	// buckets, doubled past 3.75 keys each): 73 to 90 B, and a few for the
	// clock and the client.
	if !raceEnabled && (per > 96 || float64(swept-before)/keys > per/4) {
		t.Errorf("%.0f B per key leased, %.0f B per key after the sweep: want at most 96 and a quarter of it",
			per, float64(swept-before)/keys)
	}
	runtime.KeepAlive(names)
}

// goid is the calling goroutine's id, from its stack trace's first line.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}
