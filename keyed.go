package atomiclimit

import (
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/keyed"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/shardmap"
)

// A Keyed limiter holds one state per key (user, API key, client IP) under
// one rule, any algorithm or several bands: created on a key's first request
// and removed once the key is idle. Every key has the semantics of a Limiter
// of its tier's rule, except that a request stamped before the time of a
// state the limiter removed is decided as at that time (stricter, never
// looser; see "Idle keys and exact eviction"). It is safe for concurrent use.
// Its methods follow the package's grammar (Allow, Take, Peek, Refund,
// Reserve, Wait, and their …N forms).
//
// The hot path for a key already present is one hash of the key, one
// lock-free map lookup, one clock read, the rule's decision on the key's
// state and, for an admission, one CompareAndSwap per band. It allocates
// nothing. A GCRA rule takes a path of its own, inlined: one load and one
// CompareAndSwap on the key's 8-byte bucket. A new key costs one insertion:
// a lock on one MapOf bucket and one small allocation (the map's entry).
//
// # Memory
//
// What a server pays to hold a key is paid again by its garbage collector
// at every cycle: each heap object and pointer a key holds is marked. So a
// Keyed limiter keeps no copy of a key and no object of its own per key:
//
//   - The map holds the key's 64-bit hash (hash/maphash.Comparable, seeded
//     at random per limiter), not the key: a per-request string is garbage
//     once the request is done. Two keys share a state only if their hashes
//     collide: for n keys held at once the chance that any two do is at most
//     n²/2^65 (3·10^-8 for a million keys), and the seed keeps keys from
//     being chosen to collide.
//   - A key's state (16 bytes: its word and the index of its tier; a rule
//     wider than one word adds its words) is carved from slabs of 4 KiB
//     that hold no pointer, so the collector never scans them. A slab is
//     freed as any object once none of its cells is held (a slab outlives
//     its keys by at most the longest-lived of them), and a cell is never
//     handed out twice: a request still holding a removed key's cell meets
//     its retired state, never another key's.
//
// A key thus costs one heap object, the map's entry (16 bytes and its slot
// in the MapOf's table), about 66 bytes in all for GCRA; bench/NOTES.md has
// the figures beside the other Go limiters'. The MapOf's entries and table
// are most of what a collection of a million keys costs: about as much as
// an xsync MapOf[uint64, uint64] of as many entries.
//
// # Idle keys and exact eviction
//
// A key is idle when no later decision could tell its state from a fresh
// one: a full bucket (TAT ≤ now), a window whose counts have left every
// decision, a log whose latest admission has left the window. The
// background sweeper (WithSweepInterval), Sweep, and a full limiter making
// room remove idle keys in three steps:
//
//  1. first raise the floors to what the state reports (for GCRA its TAT):
//     every state created from now on starts there, so a key that is
//     removed and comes back is never treated as fuller than it was,
//     whatever time its requests carry (a request stamped before the floor
//     is decided as at the floor: stricter, never looser);
//  2. then retire the state: one CompareAndSwap from the idle value the
//     first step read to a retired value, on which every decision is a
//     denial that writes nothing;
//  3. then delete the map entry if it still holds that state.
//
// An admission racing with the removal either stores first, so the retiring
// CompareAndSwap fails and the key stays, or fails its own CompareAndSwap,
// finds the state retired, removes it from the map if it is still there, and
// decides again on a fresh state. Nothing admitted is lost or counted twice.
// Eviction runs on the limiter's own clock: a request or a SweepAt stamped
// in the future removes nothing that is not idle now.
type Keyed[K comparable] struct {
	m     *shardmap.Map[uint64, *cell] // st.Map, keyed by hash: the hot path's lookup
	st    *keyed.Store[uint64, *cell]
	seed  maphash.Seed // hash's: random per limiter
	cells *cells       // the floors, and how to retire a state
	src   timebase.Source
	def   *Tier // the default tier: SetRule changes it
	fast  bool  // the rule is one GCRA band: the inlined path

	hook     *Hook // nil: none (WithHook)
	hookName string

	tierFunc  atomic.Pointer[func(K) *Tier] // chooses a new key's tier; nil: def
	tiered    atomic.Bool                   // a key may be off the default tier: set before that can happen
	overrides *xsync.MapOf[K, *Tier]        // SetKeyRule's per-key tiers
	setMu     sync.Mutex                    // serialises SetKeyRule and ClearKeyRule
}

// ruleOf is cells.rule(c) for the hot path. While no key can be off the default
// tier (tiered unset), it is the default tier's rule, read without touching
// c: a hot key's cell shares its line between its tier pointer and its word,
// and the admissions of other cores keep taking that line away, so reading
// the tier there first would fetch the line once more per decision under
// contention. A decision that reads tiered unset is ordered before the
// SetTierFunc or SetKeyRule that sets it, so the default rule is the one it
// would have read from c.
func (k *Keyed[K]) ruleOf(c *cell) *rule {
	if !k.tiered.Load() {
		return k.def.cur.Load()
	}
	return k.cells.rule(c)
}

// hash is key's seeded hash, what the map holds for it: no copy of the key
// is kept (see "Memory" in the Keyed doc).
func (k *Keyed[K]) hash(key K) uint64 { return maphash.Comparable(k.seed, key) }

// NewKeyed returns a Keyed limiter whose keys get spec unless a tier says
// otherwise. Unless WithSweepInterval(0) is given, it starts a background
// sweeper; Close stops it, and so does the garbage collector once the
// limiter is unreachable.
func NewKeyedRule[K comparable](spec Rule, opts ...Option) (*Keyed[K], error) {
	cfg := config{keyed: keyed.DefaultConfig()}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if !cfg.keyed.Valid() {
		return nil, fmt.Errorf("%w: WithMaxKeys(%d, %v): a negative bound or an unknown policy", ErrOption, cfg.keyed.MaxKeys, cfg.keyed.Full)
	}
	if !cfg.keyed.ShardsValid() {
		return nil, fmt.Errorf("%w: WithShards(%d): must be in [0, %d]", ErrOption, cfg.keyed.Shards, keyed.MaxShards)
	}
	k := &Keyed[K]{overrides: xsync.NewMapOf[K, *Tier](), seed: maphash.MakeSeed()}
	k.src = newSource(&cfg, k)
	k.cells = &cells{src: k.src}
	def, err := newTier(k.src, k.src.Now(), nil, spec, &k.cells.reach)
	if err != nil {
		return nil, err
	}
	k.cells.register(def)
	first := def.cur.Load()
	def.def = first
	k.def, k.fast = def, first.gcra
	k.cells.words, k.cells.bands, k.cells.gcra = first.set.Words(), first.set.Len(), first.gcra
	k.st = keyed.NewHashed[*cell](cfg.keyed, k.src, k.cells)
	k.m = k.st.Map
	k.hook, k.hookName = cfg.hook, cfg.keyed.HookName
	keyed.Start(k, k.st)
	return k, nil
}

// Allow reports whether key may have one event now, and takes it if so.
// Allow is shorthand for AllowN(key, clock.Now(), 1).
func (k *Keyed[K]) Allow(key K) bool {
	now := k.src.Now()
	if k.hook != nil {
		return k.allowReported(key, now, 1, k.src.IsCoarse())
	}
	ok := k.allow(key, now, 1)
	if !ok && k.src.IsCoarse() {
		ok = k.allowFresh(key, now, 1)
	}
	return ok
}

// allowFresh decides again, at a fresh reading, a request the coarse clock's
// reading now denied (see timebase.Source.Refresh): a lagging ticker costs
// a denial one precise clock read, and no admissions.
func (k *Keyed[K]) allowFresh(key K, now int64, n int) bool {
	if t, later := k.src.Recheck(now); later {
		return k.allow(key, t, n)
	}
	return false
}

// AllowN reports whether key may have n events at now, and takes them if
// so. n = 0 is admitted and takes nothing; n < 0, and n larger than the rule
// can ever admit, are denied and insert no key.
func (k *Keyed[K]) AllowN(key K, now time.Time, n int) bool {
	t := k.cells.stamp(now)
	if k.hook != nil {
		return k.allowReported(key, t, n, false)
	}
	return k.allow(key, t, n)
}

// allowReported is allow for a limiter with a hook: decided as Take
// decides, it knows a full limiter's refusal from a denial by the key's
// state at the moment it decides (a look at the key afterwards could find
// it inserted by another request meanwhile), and reports the decision.
// fresh: a coarse reading's denial is decided again at a fresh one.
func (k *Keyed[K]) allowReported(key K, now int64, n int, fresh bool) bool {
	d, _, full := k.take(key, now, n)
	if !d.Allowed && fresh {
		if t, later := k.src.Recheck(now); later {
			d, _, full = k.take(key, t, n)
		}
	}
	k.reportDecision(n, d, full)
	return d.Allowed
}

// reportDecision passes a decision to the hook; full says it is a refusal
// of a new key by a full limiter.
func (k *Keyed[K]) reportDecision(n int, d gcra.Decision, full bool) {
	h := k.hook
	switch {
	case d.Allowed:
		if h.Allowed != nil {
			h.Allowed(k.hookName, n)
		}
	case full:
		if h.Overloaded != nil {
			h.Overloaded(k.hookName, n)
		}
	default:
		if h.Denied != nil {
			h.Denied(k.hookName, n, d.RetryAfter)
		}
	}
}

func (k *Keyed[K]) allow(key K, now int64, n int) bool {
	if c, ok := k.m.Load(k.hash(key)); ok {
		var ok bool
		if k.fast {
			// The bucket's first attempt inlines here (TestFastPathInlines).
			p := &k.ruleOf(c).g
			if p.IsUnlimited() {
				return n >= 0 // writes nothing
			}
			var settled bool
			if ok, settled = c.bucket().TryAllowN(p, now, n); !settled {
				ok = c.bucket().AllowN(p, now, n)
			}
		} else if r := k.ruleOf(c); r.word != nil {
			// One word: the one CompareAndSwap loop on the cell's word.
			_, ok = algo.AdmitWordAt(&c.word, r.word, r.grid.At(now), n)
		} else if r.one != nil {
			_, ok = r.one.Admit(k.cells.state(c), now, n)
		} else {
			ok = r.set.Admit(k.cells.state(c), now, n)
		}
		// A retired state denies everything, and a state idle far ahead
		// may be one to forget: only a denial needs the check.
		if ok || !k.cells.suspect(c, k.ruleOf(c), now) {
			return ok
		}
	}
	return k.allowSlow(key, now, n)
}

// settled reports whether a denial at now on c stands: c is live and not
// one to forget. Otherwise c is retired (by forget, if it was far), and the
// caller decides again on the key's new cell.
func (k *Keyed[K]) settled(c *cell, r *rule, now int64) bool {
	if !k.cells.suspect(c, r, now) {
		return true
	}
	if k.cells.IsRetired(c) {
		return false
	}
	if k.cells.forget(c, now) {
		k.st.Forgot()
		return false
	}
	return true
}

// allowSlow is allow for a key that is absent or whose state was retired.
func (k *Keyed[K]) allowSlow(key K, now int64, n int) bool {
	for {
		c, d, _ := k.cellFor(key, now, n)
		if c == nil {
			return d.Allowed // refused, or a request no state could admit
		}
		r := k.cells.rule(c)
		if r.set.Admit(k.cells.state(c), now, n) {
			return true
		}
		if k.settled(c, r, now) {
			return false
		}
	}
}

func (k *Keyed[K]) peek(key K, now int64, n int) gcra.Decision {
	if c, ok := k.m.Load(k.hash(key)); ok {
		r := k.cells.rule(c)
		d, _ := r.set.Decide(k.cells.state(c), now, n, true)
		if d.Allowed || k.settled(c, r, now) {
			return d
		}
		// Retired, or forgotten: a new key.
	}
	// A new key: decide on the state a new cell would start with, the
	// floor. A one-word rule decides on the floor's value itself; a rule
	// wider than one word, on a fresh state that is then dropped (an
	// allocation of its words).
	r := k.tierFor(key).cur.Load()
	switch {
	case r.gcra:
		_, d := r.g.Decide(int64(k.cells.floors[0].Load()), now, n)
		return d
	case r.word != nil:
		_, d := r.word.Decide(k.cells.floors[0].Load(), now, n)
		return d
	}
	var w atomic.Uint64
	var rest []atomic.Uint64
	if k.cells.words > 1 {
		rest = make([]atomic.Uint64, k.cells.words-1)
	}
	s := algo.State{Word: &w, Rest: rest}
	r.set.Init(s, k.cells.floors[:])
	d, _ := r.set.Decide(s, now, n, true)
	return d
}

// cellFor returns key's live cell, creating it if needed. It returns nil,
// and the decision to return instead, when the limiter is full and refuses
// the key (full is then true), or when the request is one no state could
// admit (n < 0, or n above what the key's rule ever admits): such a request
// inserts no key. It never returns a retired cell.
func (k *Keyed[K]) cellFor(key K, now int64, n int) (c *cell, d gcra.Decision, full bool) {
	h := k.hash(key)
	if c, ok := k.m.Load(h); ok && !k.cells.IsRetired(c) {
		return c, gcra.Decision{}, false
	}
	// A new key. Its tier is chosen here, outside any lock: the tier function
	// is the user's code, and a panic in it must not leave a map bucket locked
	// or a key slot counted. Under the lock, newCell prefers an override set
	// since (SetKeyRule stores the override before it updates a cell).
	byFunc := k.tierByFunc(key)
	if n <= 0 || n > k.tierFor(key).cur.Load().maxN {
		// n = 0 is an admitted peek, and n < 0 or n above the rule's most is
		// denied whatever the state: the decision a new state would give,
		// stored nowhere, and no key created for it.
		return nil, k.peek(key, now, n), false
	}
	c, ok := k.st.Cell(h, now, func() *cell { return k.newCell(key, byFunc) })
	if !ok {
		d = k.refused(key, now, n)
		return nil, d, !d.Allowed
	}
	return c, gcra.Decision{}, false
}

// newCell runs under the lock of key's map bucket, once per insertion; it
// runs none of the user's code.
func (k *Keyed[K]) newCell(key K, byFunc *Tier) *cell {
	t := byFunc
	if o, ok := k.overrides.Load(key); ok {
		t = o
	}
	c := k.cells.alloc()
	// The floors: at least what every state a sweeper retired as idle
	// reported. Read here, after the removal of such a state for this key
	// (which took the same bucket lock), so the sweeper's raise is visible.
	t.cur.Load().set.Init(k.cells.state(c), k.cells.floors[:])
	c.tier.Store(t.id)
	return c
}

// refused decides a request at now for a new key that the full limiter has
// no room for, and counts it. An Unlimited key needs no state and is
// admitted; any other is denied with RetryAfter and TokenAfter the time
// until the limiter can take it (see Take), gcra.Never for DenyAll.
func (k *Keyed[K]) refused(key K, now int64, n int) gcra.Decision {
	r := k.tierFor(key).cur.Load()
	if r.gcra && r.g.IsUnlimited() && n >= 0 {
		return gcra.Decision{Allowed: true, Remaining: math.MaxInt}
	}
	k.st.Refused()
	if r.maxN == 0 {
		return gcra.Decision{RetryAfter: gcra.Never, TokenAfter: gcra.Never}
	}
	wait := time.Duration(r.idleAfter())
	if at, ok := k.st.RoomAt(); ok && at-now < int64(wait) {
		wait = time.Duration(max(at-now, 0))
	}
	return gcra.Decision{RetryAfter: wait, TokenAfter: wait}
}

// tierFor returns the tier a new cell for key gets: its own rule from
// SetKeyRule, else the tier function's choice, else the default.
func (k *Keyed[K]) tierFor(key K) *Tier {
	if t, ok := k.overrides.Load(key); ok {
		return t
	}
	return k.tierByFunc(key)
}

// tierByFunc is the tier function's choice for key, or the default.
func (k *Keyed[K]) tierByFunc(key K) *Tier {
	if f := k.tierFunc.Load(); f != nil {
		if t := (*f)(key); t != nil {
			return t
		}
	}
	return k.def
}

// SetRule changes the default tier's rule: every key on the default tier,
// present or future, is decided under it from its next decision on. The
// rule must be compatible with the limiter's first (the same algorithm and
// window: ErrIncompatible). It changes nothing on error.
func (k *Keyed[K]) SetRule(spec Rule) error { return k.def.SetRule(spec) }

// Quota describes the rule key is held to: its own (SetKeyRule), its
// tier's, or the default.
func (k *Keyed[K]) Quota(key K) Quota {
	if !k.tiered.Load() {
		return k.def.cur.Load().quota() // every key is on the default tier: no lookup
	}
	if c, ok := k.m.Load(k.hash(key)); ok {
		return k.cells.rule(c).quota()
	}
	return k.tierFor(key).cur.Load().quota()
}

// NewTier returns a tier for this limiter's keys (see SetTierFunc). Its rule
// must be compatible with the limiter's (ErrIncompatible).
func (k *Keyed[K]) NewTier(spec Rule) (*Tier, error) {
	t, err := newTier(k.src, k.def.start, k.def.def, spec, &k.cells.reach)
	if err == nil {
		k.cells.register(t)
	}
	return t, err
}

// SetTierFunc makes f choose the tier of each key created from now on (nil,
// or f returning nil: the default tier). Keys already present keep their
// tier. f must be quick, safe for concurrent use and give the same tier for
// the same key: it runs, outside any lock, when a request finds no cell for
// its key, and for Peek, Quota and ClearKeyRule of a key. A panic in f
// reaches the caller and leaves the limiter as it was.
func (k *Keyed[K]) SetTierFunc(f func(K) *Tier) {
	if f == nil {
		k.tierFunc.Store(nil)
		return
	}
	k.tiered.Store(true) // first the flag, then the function that may use it
	k.tierFunc.Store(&f)
}

// SetKeyRule gives key its own rule, whether or not the key is present (it
// inserts no key); it survives the key's removal while idle. The rule must
// be compatible with the limiter's (ErrIncompatible). It changes nothing on
// error.
func (k *Keyed[K]) SetKeyRule(key K, spec Rule) error {
	k.setMu.Lock()
	defer k.setMu.Unlock()
	if t, ok := k.overrides.Load(key); ok {
		return t.SetRule(spec) // the key's own tier already: its rule changes
	}
	t, err := newTier(k.src, k.def.start, k.def.def, spec, &k.cells.reach)
	if err != nil {
		return err
	}
	k.cells.register(t)
	// First the flag (Quota then looks keys up); then record the override,
	// so that a cell created from now on reads it; then update the cell
	// that may already exist. A cell created between the two steps read the
	// override already.
	k.tiered.Store(true)
	k.overrides.Store(key, t)
	k.retier(key, t)
	return nil
}

// ClearKeyRule removes key's own rule: the key returns to the tier the tier
// function (or the default) chooses.
func (k *Keyed[K]) ClearKeyRule(key K) {
	k.setMu.Lock()
	defer k.setMu.Unlock()
	k.overrides.Delete(key)
	k.retier(key, k.tierByFunc(key))
}

// retier points key's cell, if the limiter holds one, at t. Requires setMu.
//
// It updates the cell under the lock of the key's map bucket. A creation of
// the key holds that lock from the moment it reads the overrides until it
// inserts, so either it ran first and the update finds its cell, or it runs
// after and reads the override change that the caller made before retier.
func (k *Keyed[K]) retier(key K, t *Tier) {
	k.m.Update(k.hash(key), func(c *cell) { c.tier.Store(t.id) })
}

// Sweep removes every key that is idle now and returns how many it retired.
// Sweep is shorthand for SweepAt(clock.Now()).
func (k *Keyed[K]) Sweep() int { return k.st.Sweep(k.src.Now()) }

// SweepAt removes every key idle at now, one shard at a time, and returns
// how many it retired. It takes no global lock: decisions on other keys, and
// on the same keys, go on meanwhile. A now ahead of the limiter's clock
// counts as the clock's now: nothing that is active now is removed.
func (k *Keyed[K]) SweepAt(now time.Time) int { return k.st.Sweep(k.src.At(now)) }

// Close stops the background sweeper and waits until it has stopped. The
// limiter keeps working; idle keys are then removed only by Sweep and when
// the limiter is full. Close is idempotent.
func (k *Keyed[K]) Close() { k.st.Close() }

// Stats counts what a Keyed limiter has done since it was created.
type Stats struct {
	Keys          int    // keys held now
	Created       uint64 // states created for new keys
	Evicted       uint64 // idle keys removed (sweeps, and room made when full)
	EvictedActive uint64 // keys removed before they were idle (EvictStalest)
	Rejected      uint64 // requests for new keys refused because the limiter was full
}

// Stats returns the limiter's counters.
func (k *Keyed[K]) Stats() Stats { return Stats(k.st.Stats()) }
