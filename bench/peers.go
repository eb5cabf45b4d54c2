package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/juju/ratelimit"
	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// keysCount is the number of pre-built keys of the keyed scenarios; the
// main program passes its -keys to the benchmarks' process in
// ATOMICLIMIT_BENCH_KEYS.
var keysCount = 1_000_000

func init() {
	if v, err := strconv.Atoi(os.Getenv("ATOMICLIMIT_BENCH_KEYS")); err == nil && v > 0 {
		keysCount = v
	}
}

// A setting is the limit every implementation is given in one scenario: n
// events per period with a burst (bucket capacity) of burst.
type setting struct {
	n      int
	period time.Duration
	burst  int
}

var (
	// admitAll admits every call of a benchmark: a billion per second, with
	// a burst far above any run's calls per key.
	admitAll = setting{n: 1_000_000_000, period: time.Second, burst: 1 << 30}
	// denyAfterOne admits one call per hour: drained by one call, then every
	// call is denied.
	denyAfterOne = setting{n: 1, period: time.Hour, burst: 1}
	// mostlyDeny is a million per second with a burst of 1000 (1 ms of
	// traffic): every core offers more than that, so most calls are denied.
	mostlyDeny = setting{n: 1_000_000, period: time.Second, burst: 1000}
	// mostlyAdmit is 10^8 per second with a burst of 1000: more than a few
	// cores offer, so most calls are admitted.
	mostlyAdmit = setting{n: 100_000_000, period: time.Second, burst: 1000}
)

func (s setting) perSecond() float64 { return float64(s.n) / s.period.Seconds() }

// A hotScenario is one key offered from every core: the benchmark named
// bench and the latency harness run it.
type hotScenario struct {
	bench string // the benchmark's name, less "Benchmark" and impl=…
	what  string
	s     setting
	// drain: the first call (before timing) spends the only token.
	drain bool
}

// hotScenarios go from every call admitted to every call denied.
var hotScenarios = []hotScenario{
	{bench: "HotKey", what: "every call admitted", s: admitAll},
	{bench: "Contended/rate=1e8/burst=1000", what: "mostly admissions", s: mostlyAdmit},
	{bench: "Contended/rate=1e6/burst=1000", what: "mostly denials", s: mostlyDeny},
	{bench: "Deny", what: "every call denied", s: denyAfterOne, drain: true},
}

// runs says whether p takes part: it needs a single-key form; a pacer
// cannot take the deny path (it would block for an hour); the floor, which
// admits every call, runs where most calls are admitted.
func (h hotScenario) runs(p peer) bool {
	switch {
	case p.single == nil:
		return false
	case p.paces:
		return !h.drain
	case p.name == "floor":
		return h.s == admitAll || h.s == mostlyAdmit
	}
	return true
}

// scales says whether the scenario is one of those run at every core count
// of the -cpu list: every call admitted and every call denied, the two ends
// (hotScaledPattern names their benchmarks).
func (h hotScenario) scales() bool { return h.s == admitAll || h.drain }

// start returns p's limiter for the scenario, drained where it says so.
func (h hotScenario) start(p peer) (single, error) {
	l := p.single(h.s)
	if h.drain && !l.allow() {
		return nil, fmt.Errorf("%s: the first call was denied", p.name)
	}
	return l, nil
}

// single is a limiter for one key.
type single interface{ allow() bool }

// keyed is a limiter with a bucket per key.
type keyed interface {
	allow(key string) bool
	close()
}

// A peer is one implementation under comparison. Its constructors are nil
// for the forms it does not have.
type peer struct {
	name   string
	note   string // how it is configured to do the same work
	single func(setting) single
	keyed  func(setting) keyed
	// paces: its single-key call blocks until the limit lets it through
	// (uber's Take) instead of denying: it never denies, and it would block
	// for an hour in the deny scenario.
	paces bool
}

// id is the peer's name in benchmark names: no slash, so that benchstat
// reads impl=… as one key=value pair.
func (p peer) id() string { return strings.ReplaceAll(p.name, "/", "-") }

// peerName returns the implementation's name for an impl=… value of a
// benchmark name: a peer's or a door's id, or (in older raw output) its name.
func peerName(impl string) string {
	for _, p := range peers {
		if p.id() == impl {
			return p.name
		}
	}
	for _, d := range httpDoors {
		if d.id == impl {
			return d.name
		}
	}
	for _, d := range grpcDoors {
		if d.id == impl {
			return d.name
		}
	}
	for _, st := range heldStores() {
		if st.id == impl {
			return st.name
		}
	}
	return impl
}

// peers lists every implementation, ours first, then the floors.
var peers = []peer{
	{
		name:   "atomiclimit",
		note:   "`atomiclimit.Limiter` / `Keyed[string]` (GCRA, one atomic word per key), default monotonic clock, idle-key sweeper on",
		single: func(s setting) single { return ourSingle{must(atomiclimit.New(ourLimit(s), s.burst))} },
		keyed: func(s setting) keyed {
			return ourKeyed{must(atomiclimit.NewKeyed[string](ourLimit(s), s.burst))}
		},
	},
	{
		name:   "x/time/rate",
		note:   "`rate.NewLimiter(n/period, burst)`, `Allow()`; keyed: one limiter per key in a `sync.Map` (Load, then LoadOrStore on a miss), never evicted",
		single: func(s setting) single { return xrate{rate.NewLimiter(rate.Limit(s.perSecond()), s.burst)} },
		keyed:  func(s setting) keyed { return &xrateMap{s: s} },
	},
	{
		name: "uber/ratelimit",
		note: "tuned to match: `ratelimit.New(n/s, WithSlack(min(burst−1, 2^20)))`, `Take()`: a pacer that blocks until its slot instead of denying (allowed/op is always 1, and where the limit is below what the cores offer, ns/op is the pace); not run on the deny path, where it would block for an hour; no keyed form",
		single: func(s setting) single {
			return uberPacer{uber.New(int(s.perSecond()), uber.WithSlack(min(s.burst-1, 1<<20)))}
		},
		paces: true,
	},
	{
		name: "uber-default",
		note: "uber/ratelimit as users run it: `ratelimit.New(n/s)`, its default slack of 10 (at most 10 intervals of unused time banked), `Take()`",
		single: func(s setting) single {
			return uberPacer{uber.New(int(s.perSecond()))}
		},
		paces: true,
	},
	{
		name:   "throttled",
		note:   "`throttled/v2` GCRA with `memstore` (a map under a mutex, no eviction at maxKeys 0), `MaxBurst = burst−1` (its burst counts beyond the first)",
		single: func(s setting) single { return oneKey{throttledKeyed(s)} },
		keyed:  func(s setting) keyed { return throttledKeyed(s) },
	},
	{
		name:   "go-limiter",
		note:   "`sethvargo/go-limiter` `memorystore` with `Tokens = burst` per `Interval = burst·period/n`: it refills all tokens at each interval (a fixed window), sweeper every 6 h. Its refill is min(ticks·interval/tokens, tokens), a whole refill only when interval/tokens ≥ tokens (ns), that is tokens ≤ 10^9/rate: the admit-all scenarios therefore use a 1 h interval, in which it never refills and its 2^30 initial tokens admit every call, and at 10^8/s it gets `Tokens = 10` per 100 ns, the same rate with the largest burst it refills in full. (A user who writes the natural `Tokens = 10^6, Interval = 1 s` gets 1,000 tokens a second after the first second.)",
		single: func(s setting) single { return oneKey{newGoLimiter(s)} },
		keyed:  func(s setting) keyed { return newGoLimiter(s) },
	},
	{
		name:   "ulule",
		note:   "`ulule/limiter/v3` `memory` store, `Rate{Period: burst·period/n, Limit: burst}` (a fixed-window counter)",
		single: func(s setting) single { return oneKey{newUlule(s)} },
		keyed:  func(s setting) keyed { return newUlule(s) },
	},
	{
		name:   "juju/ratelimit",
		note:   "`ratelimit.NewBucketWithRate(n/s, burst)`, `TakeAvailable(1)`; keyed: one bucket per key in a `sync.Map`",
		single: func(s setting) single { return juju{ratelimit.NewBucketWithRate(s.perSecond(), int64(s.burst))} },
		keyed:  func(s setting) keyed { return &jujuMap{s: s} },
	},
	{
		name:   floorName,
		note:   "not a limiter: the least work any limiter must do. Single: one monotonic clock read, one load and one CAS. Keyed: the same on the key's own cell, found with no map: the benchmarks' keys end in their number (`user-0000042`), which indexes cells made in advance. It reads the key as a hash would, but probes no table and allocates nothing for a new key, so it is below every keyed limiter by construction (a map of any design, xsync's `MapOf` included, is not: one unsharded `MapOf` with a CAS was slower than atomiclimit at a million uniform keys and on insertion). Not in the heap-per-key table, where the least is one 8-byte word per key",
		single: func(setting) single { return &floorOne{} },
		keyed:  func(setting) keyed { return newFloorKeyed() },
	},
}

// oneKey is the single-key form of a keyed-only peer: always the same key.
type oneKey struct{ k keyed }

func (o oneKey) allow() bool { return o.k.allow("k") }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func ourLimit(s setting) gcra.Limit { return gcra.Per(s.n, s.period) }

type ourSingle struct{ l *atomiclimit.Limiter }

func (o ourSingle) allow() bool { return o.l.Allow() }

type ourKeyed struct{ k *atomiclimit.Keyed[string] }

func (o ourKeyed) allow(key string) bool { return o.k.Allow(key) }
func (o ourKeyed) close()                { o.k.Close() }

type xrate struct{ l *rate.Limiter }

func (x xrate) allow() bool { return x.l.Allow() }

type xrateMap struct {
	s setting
	m sync.Map
}

func (x *xrateMap) allow(key string) bool {
	v, ok := x.m.Load(key)
	if !ok {
		v, _ = x.m.LoadOrStore(key, rate.NewLimiter(rate.Limit(x.s.perSecond()), x.s.burst))
	}
	return v.(*rate.Limiter).Allow()
}
func (x *xrateMap) close() {}

type uberPacer struct{ l uber.Limiter }

func (u uberPacer) allow() bool { u.l.Take(); return true }

type throttledLimiter struct {
	l *throttled.GCRARateLimiterCtx
}

func throttledKeyed(s setting) *throttledLimiter {
	st := must(memstore.NewCtx(0))
	q := throttled.RateQuota{MaxRate: throttled.PerDuration(s.n, s.period), MaxBurst: s.burst - 1}
	return &throttledLimiter{must(throttled.NewGCRARateLimiterCtx(st, q))}
}

func (t *throttledLimiter) allow(key string) bool {
	limited, _, err := t.l.RateLimitCtx(context.Background(), key, 1)
	return err == nil && !limited
}
func (t *throttledLimiter) close() {}

type goLimiter struct{ s limiter.Store }

func newGoLimiter(s setting) *goLimiter { return &goLimiter{newGoLimiterStore(s)} }

// newGoLimiterStore returns a go-limiter memorystore that holds each key to
// s, as closely as its refill allows.
func newGoLimiterStore(s setting) limiter.Store {
	// burst tokens per the time burst tokens take at the limit's rate.
	tokens := uint64(s.burst)
	interval := time.Duration(float64(s.burst) / s.perSecond() * float64(time.Second))
	// go-limiter v0.7.1 refills min(ticks·interval/tokens, tokens) tokens
	// after ticks intervals: only when interval/tokens ≥ tokens (in ns), that
	// is tokens ≤ 10^9/rate, is that a whole refill.
	if float64(interval)/float64(tokens) < float64(tokens) {
		if s == admitAll {
			// 2^30 tokens per ~1 s would refill about one token per
			// second and deny most calls; with a 1 h interval it never
			// refills during a run and its 2^30 initial tokens admit every
			// call.
			interval = time.Hour
		} else {
			// The same rate with the largest burst it refills in full.
			tokens = max(1, uint64(1e9/s.perSecond()))
			interval = time.Duration(float64(tokens) / s.perSecond() * float64(time.Second))
		}
	}
	return must(memorystore.New(&memorystore.Config{Tokens: tokens, Interval: max(interval, time.Nanosecond)}))
}

func (g *goLimiter) allow(key string) bool {
	_, _, _, ok, err := g.s.Take(context.Background(), key)
	return err == nil && ok
}
func (g *goLimiter) close() { g.s.Close(context.Background()) }

type ululeLimiter struct{ l *ulule.Limiter }

func newUlule(s setting) *ululeLimiter {
	period := time.Duration(float64(s.burst) / s.perSecond() * float64(time.Second))
	return &ululeLimiter{ulule.New(ululemem.NewStore(), ulule.Rate{Period: max(period, time.Nanosecond), Limit: int64(s.burst)})}
}

func (u *ululeLimiter) allow(key string) bool {
	c, err := u.l.Get(context.Background(), key)
	return err == nil && !c.Reached
}
func (u *ululeLimiter) close() {}

type juju struct{ b *ratelimit.Bucket }

func (j juju) allow() bool { return j.b.TakeAvailable(1) == 1 }

type jujuMap struct {
	s setting
	m sync.Map
}

func (j *jujuMap) allow(key string) bool {
	v, ok := j.m.Load(key)
	if !ok {
		v, _ = j.m.LoadOrStore(key, ratelimit.NewBucketWithRate(j.s.perSecond(), int64(j.s.burst)))
	}
	return v.(*ratelimit.Bucket).TakeAvailable(1) == 1
}
func (j *jujuMap) close() {}

var floorEpoch = time.Now()

// floorOne is one clock read, one load and one CAS: what any single-key
// limiter that admits must do at least.
type floorOne struct{ v atomic.Uint64 }

func (f *floorOne) allow() bool {
	now := uint64(time.Since(floorEpoch))
	old := f.v.Load()
	return f.v.CompareAndSwap(old, max(old, now)+1)
}

// floorKeyed is floorOne on the key's own cell, found with no map: the
// number the key's name ends in (the benchmarks name their keys
// user-0000042, new-0000042, churn-0000042) indexes a slice of cells made
// in advance, two per pre-built key (the churn benchmark names up to 1.8
// times keysCount). It reads the key's bytes, as any hash must, and nothing
// else a map would: a lower bound of finding a key, not a way to.
type floorKeyed struct{ cells []atomic.Uint64 }

func newFloorKeyed() *floorKeyed { return &floorKeyed{cells: make([]atomic.Uint64, 2*keysCount)} }

func (f *floorKeyed) allow(key string) bool {
	n := 0
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= '0' && c <= '9' {
			n = n*10 + int(c-'0')
		}
	}
	if n >= len(f.cells) {
		n %= len(f.cells)
	}
	v := &f.cells[n]
	now := uint64(time.Since(floorEpoch))
	old := v.Load()
	return v.CompareAndSwap(old, max(old, now)+1)
}
func (f *floorKeyed) close() {}
