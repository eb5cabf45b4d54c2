package grpclimit

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// The test kit of stacked policies under contention, as the root module's
// tests hold it (its internal/stacktest): a nested module imports no
// internal package of the root, so this is a copy of what the tests here
// use. A call several policies must admit is all or nothing, and a policy
// is charged only for the calls that were served.

// A kind is one kind of policy, as a generous rule (that admits every call
// of a test) and a strict one (that denies all but a few).
type kind struct {
	name string
	// generous admits far more than a test sends; quota is its quota (its
	// burst for GCRA, its count for the windows).
	generous atomiclimit.Rule
	quota    int
	// strict admits strictQuota per hour at most.
	strict atomiclimit.Rule
	// bucket: a GCRA bucket, whose give-back may be stricter than exact by
	// the time between an admission and its give-back (a fraction of a
	// token here); the windows give back exactly.
	bucket bool
}

// strictQuota is the most any strict rule admits in a test.
const strictQuota = 5

// kinds are the kinds of policy: every rule of package atomiclimit, bands
// included. Their windows are long (an hour, a day) and start with the
// limiter or the key, so that no boundary falls inside a test, and a
// bucket refills less than a token in a test of a few seconds.
var kinds = []kind{
	{name: "gcra", generous: atomiclimit.GCRA(atomiclimit.PerDay(100_000), 100_000), quota: 100_000,
		strict: atomiclimit.GCRA(atomiclimit.PerHour(strictQuota), strictQuota), bucket: true},
	{name: "fixed", generous: atomiclimit.FixedWindow(100_000, time.Hour), quota: 100_000,
		strict: atomiclimit.FixedWindow(strictQuota, time.Hour)},
	{name: "anchored", generous: atomiclimit.AnchoredWindow(100_000, time.Hour), quota: 100_000,
		strict: atomiclimit.AnchoredWindow(strictQuota, time.Hour)},
	{name: "counter", generous: atomiclimit.SlidingCounter(100_000, time.Hour), quota: 100_000,
		strict: atomiclimit.SlidingCounter(strictQuota, time.Hour)},
	{name: "rolling", generous: atomiclimit.Rolling(100_000, 24*time.Hour, time.Hour, 0), quota: 100_000,
		strict: atomiclimit.Rolling(strictQuota, 24*time.Hour, time.Hour, 0)},
	{name: "log", generous: atomiclimit.SlidingLog(20_000, time.Hour), quota: 20_000,
		strict: atomiclimit.SlidingLog(strictQuota, time.Hour)},
	{name: "bands", generous: atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerDay(100_000), 100_000), atomiclimit.FixedWindow(100_000, time.Hour)), quota: 100_000,
		strict: atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerDay(100_000), 100_000), atomiclimit.FixedWindow(strictQuota, time.Hour)), bucket: true},
}

// givesBack reports whether a kind's admissions can be given back: all
// but the log and bands, which a stack asks last (one of them at most).
func (k kind) givesBack() bool { return k.name != "log" && k.name != "bands" }

// kindPairs returns every pair of kinds a stack can hold, the generous
// policy first (so that the strict one's denials give back the generous
// one's admissions): every kind before every other, the log and bands
// with any kind that gives back.
func kindPairs() [][2]kind {
	var ps [][2]kind
	for _, a := range kinds {
		for _, b := range kinds {
			if a.givesBack() || b.givesBack() {
				ps = append(ps, [2]kind{a, b})
			}
		}
	}
	return ps
}

// pairName names a pair for a subtest.
func pairName(p [2]kind) string { return fmt.Sprintf("first=%s/then=%s", p[0].name, p[1].name) }

// keyedOf returns an in-process limiter of rule on the monotonic clock,
// with no sweeper: the give-backs see real time pass between an admission
// and its give-back.
func keyedOf[K comparable](t testing.TB, rule atomiclimit.Rule) *atomiclimit.Keyed[K] {
	t.Helper()
	k, err := atomiclimit.NewKeyedRule[K](rule, atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// charged returns what the policy of a kind with quota holds against key:
// its quota less what it has left.
func charged[K comparable](lim atomiclimit.KeyedLimiter[K], key K, quota int) int {
	d, _ := lim.Peek(context.Background(), key, 0)
	return quota - d.Remaining
}

// checkCharged fails t unless a policy of kind k was charged exactly what
// was served (a window), or at most one token more (a bucket).
func checkCharged(t testing.TB, what string, k kind, charged, served int) {
	t.Helper()
	switch {
	case charged < served:
		t.Errorf("%s (%s): charged %d for %d served: quota created", what, k.name, charged, served)
	case k.bucket && charged > served+1:
		t.Errorf("%s (%s): charged %d for %d served: more than one token lost", what, k.name, charged, served)
	case !k.bucket && charged != served:
		t.Errorf("%s (%s): charged %d for %d served", what, k.name, charged, served)
	}
}

// hammer runs f on workers goroutines, released together, each calling it
// calls times, and returns how many calls returned true.
func hammer(workers, calls int, f func(worker, call int) bool) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	total := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			n := 0
			for c := range calls {
				if f(w, c) {
					n++
				}
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return total
}

// peekDecision is a Keyed limiter's Peek decision alone.
func peekDecision[K comparable](k *atomiclimit.Keyed[K], key K, n int) atomiclimit.Decision {
	d, _ := k.Peek(context.Background(), key, n)
	return d
}
