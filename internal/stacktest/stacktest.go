// Package stacktest checks, for the tests of the doors, the promise of
// stacked policies under contention: a request several policies must admit
// is all or nothing, and a policy is charged only for the requests that were
// served. It holds one generous and one strict rule of every kind, and the
// check of what a policy was charged against what was served.
package stacktest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
)

// A Kind is one kind of policy, as a generous rule (that admits every
// request of a test) and a strict one (that denies all but a few).
type Kind struct {
	Name string
	// Generous admits far more than a test sends; Quota is its quota (its
	// burst for GCRA, its count for the windows).
	Generous atomiclimit.Rule
	Quota    int
	// Strict admits Strict per hour at most.
	Strict atomiclimit.Rule
	// Bucket: a GCRA bucket, whose give-back may be stricter than exact by
	// the time between an admission and its give-back (a fraction of a
	// token here); the windows give back exactly.
	Bucket bool
}

// StrictQuota is the most any Strict rule admits in a test.
const StrictQuota = 5

// Kinds are the kinds of policy: every rule of package atomiclimit, bands
// included. Their windows are long (an hour, a day) and start with the
// limiter or the key, so that no boundary falls inside a test, and a
// bucket refills less than a token in a test of a few seconds.
var Kinds = []Kind{
	{Name: "gcra", Generous: atomiclimit.GCRA(atomiclimit.PerDay(100_000), 100_000), Quota: 100_000,
		Strict: atomiclimit.GCRA(atomiclimit.PerHour(StrictQuota), StrictQuota), Bucket: true},
	{Name: "fixed", Generous: atomiclimit.FixedWindow(100_000, time.Hour), Quota: 100_000,
		Strict: atomiclimit.FixedWindow(StrictQuota, time.Hour)},
	{Name: "anchored", Generous: atomiclimit.AnchoredWindow(100_000, time.Hour), Quota: 100_000,
		Strict: atomiclimit.AnchoredWindow(StrictQuota, time.Hour)},
	{Name: "counter", Generous: atomiclimit.SlidingCounter(100_000, time.Hour), Quota: 100_000,
		Strict: atomiclimit.SlidingCounter(StrictQuota, time.Hour)},
	{Name: "rolling", Generous: atomiclimit.Rolling(100_000, 24*time.Hour, time.Hour, 0), Quota: 100_000,
		Strict: atomiclimit.Rolling(StrictQuota, 24*time.Hour, time.Hour, 0)},
	{Name: "log", Generous: atomiclimit.SlidingLog(20_000, time.Hour), Quota: 20_000,
		Strict: atomiclimit.SlidingLog(StrictQuota, time.Hour)},
	{Name: "bands", Generous: atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerDay(100_000), 100_000), atomiclimit.FixedWindow(100_000, time.Hour)), Quota: 100_000,
		Strict: atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.PerDay(100_000), 100_000), atomiclimit.FixedWindow(StrictQuota, time.Hour)), Bucket: true},
}

// GivesBack reports whether a kind's admissions can be given back: all but
// the log and bands, which a stack asks last (one of them at most).
func (k Kind) GivesBack() bool { return k.Name != "log" && k.Name != "bands" }

// Pairs returns every pair of kinds a stack can hold, the generous policy
// first (so that the strict one's denials give back the generous one's
// admissions): every kind before every other, the log and bands with any
// kind that gives back.
func Pairs() [][2]Kind {
	var ps [][2]Kind
	for _, a := range Kinds {
		for _, b := range Kinds {
			if a.GivesBack() || b.GivesBack() {
				ps = append(ps, [2]Kind{a, b})
			}
		}
	}
	return ps
}

// Keyed returns an in-process limiter of rule on the monotonic clock, with
// no sweeper: the give-backs see real time pass between an admission and
// its give-back.
func Keyed[K comparable](t testing.TB, rule atomiclimit.Rule) *atomiclimit.Keyed[K] {
	t.Helper()
	k, err := atomiclimit.NewKeyedRule[K](rule, atomiclimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// Charged returns what the policy of a kind with quota holds against key:
// its quota less what it has left.
func Charged[K comparable](lim atomiclimit.KeyedLimiter[K], key K, quota int) int {
	return quota - remaining(lim, key)
}

func remaining[K comparable](lim atomiclimit.KeyedLimiter[K], key K) int {
	d, _ := lim.Peek(context.Background(), key, 0)
	return d.Remaining
}

// Check fails t unless a policy of kind k was charged exactly what was
// served (a window), or at most one token more (a bucket).
func Check(t testing.TB, what string, k Kind, charged, served int) {
	t.Helper()
	switch {
	case charged < served:
		t.Errorf("%s (%s): charged %d for %d served: quota created", what, k.Name, charged, served)
	case k.Bucket && charged > served+1:
		t.Errorf("%s (%s): charged %d for %d served: more than one token lost", what, k.Name, charged, served)
	case !k.Bucket && charged != served:
		t.Errorf("%s (%s): charged %d for %d served", what, k.Name, charged, served)
	}
}

// Hammer runs f on workers goroutines, released together, each calling it
// calls times, and returns how many calls returned true.
func Hammer(workers, calls int, f func(worker, call int) bool) int {
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

// Name names a pair for a subtest.
func Name(p [2]Kind) string { return fmt.Sprintf("first=%s/then=%s", p[0].Name, p[1].Name) }

// Decide is a Keyed limiter's Take decision alone, for tests that need no
// receipt.
func Decide[K comparable](k *atomiclimit.Keyed[K], key K, n int) atomiclimit.Decision {
	d, _, _ := k.Take(context.Background(), key, n)
	return d
}

// DecideN is a Keyed limiter's TakeN decision alone.
func DecideN[K comparable](k *atomiclimit.Keyed[K], key K, now time.Time, n int) atomiclimit.Decision {
	d, _, _ := k.TakeN(key, now, n)
	return d
}

// Peek is a Keyed limiter's Peek decision alone.
func Peek[K comparable](k *atomiclimit.Keyed[K], key K, n int) atomiclimit.Decision {
	d, _ := k.Peek(context.Background(), key, n)
	return d
}
