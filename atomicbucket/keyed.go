package atomicbucket

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v3"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/keyed"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
	"github.com/atomiclimit/atomiclimit/shardmap"
)

// A Keyed limiter holds one GCRA bucket per key (user, API key, client IP),
// created on a key's first request and removed once the key is idle. Every
// key has the semantics of a Limiter of its tier's limit. It is safe for
// concurrent use.
//
// The hot path for a key already present is one lock-free map lookup, one
// clock read, two pointer loads (the key's tier and its parameters), one load
// of the bucket and, for an admission, one CompareAndSwap. It allocates
// nothing. A new key costs one insertion (a lock on one MapOf bucket and two
// small allocations).
//
// # Idle keys and exact eviction
//
// A key is idle when its TAT ≤ now: its bucket is full, so forgetting it
// changes no later decision. The background sweeper (WithSweepInterval), Sweep,
// and a full limiter making room remove idle keys in three steps:
//
//  1. first raise the floor to the cell's TAT: every cell created from now
//     on starts with TAT = floor, so a key that is removed and comes back is
//     never treated as fuller than it was, whatever time its requests carry
//     (a request stamped before the floor is decided as at the floor:
//     stricter, never looser);
//  2. then retire the cell: CompareAndSwap its TAT from the idle value to
//     gcra.Retired, which every decision denies without storing;
//  3. then delete the map entry if it still holds that cell.
//
// An admission racing with the removal either stores first, so the retiring
// CompareAndSwap fails and the key stays, or fails its own CompareAndSwap,
// finds the cell retired, removes it from the map if it is still there, and
// decides again on a fresh cell. Nothing admitted is lost or counted twice.
type Keyed[K comparable] struct {
	m     *shardmap.Map[K, *cell] // st.Map: the hot path's lookup
	st    *keyed.Store[K, *cell]
	cells *gcraCells // the floor, and how to retire a cell
	src   timebase.Source
	def   *Tier // the default tier: SetLimit changes it

	hook     Hook // nil: none (WithHook)
	hookName string

	tierFunc  atomic.Pointer[func(K) *Tier] // chooses a new key's tier; nil: def
	overrides *xsync.MapOf[K, *Tier]        // SetKeyLimit's per-key tiers
	setMu     sync.Mutex                    // serialises SetKeyLimit and ClearKeyLimit
}

// cell is one key's state: its bucket and its tier. 16 bytes.
type cell struct {
	Bucket
	tier atomic.Pointer[Tier]
}

// params returns the parameters the cell's next decision uses.
func (c *cell) params() *gcra.Params { return c.tier.Load().params.Load() }

// ErrTooManyKeys is returned by the error-returning calls of a Keyed limiter
// (Reserve, Wait) for a new key that a full limiter with RejectNew refuses.
var ErrTooManyKeys = errors.New("atomicbucket: too many keys")

// ErrInvalidMaxKeys is returned by NewKeyed for a negative key bound or an
// unknown FullPolicy.
var ErrInvalidMaxKeys = errors.New("atomicbucket: invalid key bound")

// NewKeyed returns a Keyed limiter whose keys get limit and burst unless a
// tier says otherwise. It takes the clock options of New and WithMaxKeys,
// WithSweepInterval and WithShards. Unless WithSweepInterval(0) is given, it
// starts a background sweeper; Close stops it, and so does the garbage
// collector once the limiter is unreachable.
func NewKeyed[K comparable](limit gcra.Limit, burst int, opts ...Option) (*Keyed[K], error) {
	cfg := config{keyed: keyed.DefaultConfig()}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if !cfg.keyed.Valid() {
		return nil, fmt.Errorf("%w: WithMaxKeys(%d, %v)", ErrInvalidMaxKeys, cfg.keyed.MaxKeys, cfg.keyed.Full)
	}
	k := &Keyed[K]{overrides: xsync.NewMapOf[K, *Tier](), cells: &gcraCells{}}
	k.src = newSource(&cfg, k)
	def, err := newTier(k.src, limit, burst)
	if err != nil {
		return nil, err
	}
	k.def = def
	k.st = keyed.New[K, *cell](cfg.keyed, k.src, k.cells)
	k.m = k.st.Map
	k.hook, k.hookName = cfg.hook, cfg.keyed.HookName
	keyed.Start(k, k.st)
	return k, nil
}

// Allow reports whether key may have one event now, and consumes a token if
// so. Allow is shorthand for AllowN(key, clock.Now(), 1).
func (k *Keyed[K]) Allow(key K) bool {
	now := k.src.Now()
	ok := k.allow(key, now, 1)
	if k.hook != nil {
		k.report(key, now, 1, ok)
	}
	return ok
}

// AllowN reports whether key may have n events at now, and consumes n tokens
// if so. n = 0 is admitted and consumes nothing (it creates no key); n < 0
// and n > burst are denied.
func (k *Keyed[K]) AllowN(key K, now time.Time, n int) bool {
	t := k.src.At(now)
	ok := k.allow(key, t, n)
	if k.hook != nil {
		k.report(key, t, n, ok)
	}
	return ok
}

// report passes a boolean decision to the hook; a denial's RetryAfter is
// read back with a peek.
func (k *Keyed[K]) report(key K, now int64, n int, ok bool) {
	if ok {
		k.hook.Allowed(k.hookName, n)
		return
	}
	k.hook.Denied(k.hookName, n, k.peek(key, now, n).RetryAfter)
}

// reportDecision passes a decision to the hook.
func (k *Keyed[K]) reportDecision(n int, d gcra.Decision) gcra.Decision {
	if d.Allowed {
		k.hook.Allowed(k.hookName, n)
	} else {
		k.hook.Denied(k.hookName, n, d.RetryAfter)
	}
	return d
}

func (k *Keyed[K]) allow(key K, now int64, n int) bool {
	if c, ok := k.m.Load(key); ok {
		// Bucket.AllowN by hand, so that its first attempt inlines here.
		p := c.params()
		if p.IsUnlimited() {
			return n >= 0 // writes nothing
		}
		ok, settled := c.tryAllowN(p, now, n)
		if !settled {
			ok = c.allowContended(p, now, n)
		}
		// A retired cell denies everything: only a denial needs the check.
		if ok || !c.IsRetired() {
			return ok
		}
	}
	return k.allowSlow(key, now, n)
}

// allowSlow is allow for a key that is absent or whose cell was retired.
func (k *Keyed[K]) allowSlow(key K, now int64, n int) bool {
	if n == 0 {
		return true // a peek needs no cell: create no key for it
	}
	for {
		c := k.cellFor(key, now)
		if c == nil {
			return k.refused(key, n).Allowed // full
		}
		if c.AllowN(c.params(), now, n) {
			return true
		}
		if !c.IsRetired() {
			return false
		}
	}
}

// Decide is Allow for n tokens with the whole decision. Decide is shorthand
// for DecideAt(key, clock.Now(), n). A new key refused by a full limiter gets
// Allowed false, Remaining 0 and, as RetryAfter, its tier's B·T: by then every
// key that has stopped is idle and can be removed (Never for DenyAll). A key
// whose tier is Unlimited is admitted even then: it needs no state.
func (k *Keyed[K]) Decide(key K, n int) gcra.Decision {
	d := k.decide(key, k.src.Now(), n)
	if k.hook != nil {
		return k.reportDecision(n, d)
	}
	return d
}

// DecideAt is Decide at the given time.
func (k *Keyed[K]) DecideAt(key K, now time.Time, n int) gcra.Decision {
	d := k.decide(key, k.src.At(now), n)
	if k.hook != nil {
		return k.reportDecision(n, d)
	}
	return d
}

func (k *Keyed[K]) decide(key K, now int64, n int) gcra.Decision {
	if n == 0 {
		return k.peek(key, now, 0) // admitted, stores nothing, creates no key
	}
	for {
		c := k.cellFor(key, now)
		if c == nil {
			return k.refused(key, n)
		}
		d := c.DecideN(c.params(), now, n)
		if d.Allowed || !c.IsRetired() {
			return d
		}
	}
}

// refused decides a request for a new key that the full limiter has no room
// for, and counts it. An Unlimited key needs no state and is admitted; any
// other is denied with RetryAfter B·T (Never for DenyAll).
func (k *Keyed[K]) refused(key K, n int) gcra.Decision {
	p := k.tierFor(key).params.Load()
	if p.IsUnlimited() && n >= 0 {
		return gcra.Decision{Allowed: true, Remaining: math.MaxInt}
	}
	k.st.Refused()
	if p.Burst() == 0 {
		return gcra.Decision{RetryAfter: gcra.Never, TokenAfter: gcra.Never}
	}
	return gcra.Decision{RetryAfter: p.Span()}
}

// Peek returns the decision Decide(key, n) would make now, consuming nothing
// and creating no key. Peek is shorthand for PeekAt(key, clock.Now(), n).
// For a key the limiter does not hold, it answers as for a new key; if the
// limiter is full and finds no room, the Decide that follows refuses it.
func (k *Keyed[K]) Peek(key K, n int) gcra.Decision { return k.peek(key, k.src.Now(), n) }

// PeekAt is Peek at the given time.
func (k *Keyed[K]) PeekAt(key K, now time.Time, n int) gcra.Decision {
	return k.peek(key, k.src.At(now), n)
}

func (k *Keyed[K]) peek(key K, now int64, n int) gcra.Decision {
	tat, p := k.current(key)
	_, d := p.Decide(tat, now, n)
	return d
}

// Tokens returns the number of tokens key has now. Tokens is shorthand for
// TokensAt(key, clock.Now()).
func (k *Keyed[K]) Tokens(key K) int { return k.tokens(key, k.src.Now()) }

// TokensAt returns the number of tokens key has at now: what a request at
// that instant could take.
func (k *Keyed[K]) TokensAt(key K, now time.Time) int { return k.tokens(key, k.src.At(now)) }

func (k *Keyed[K]) tokens(key K, now int64) int {
	tat, p := k.current(key)
	return p.State(tat, now).Remaining
}

// current returns key's state and parameters without creating the key: those
// of its live cell, or those a new cell would start with (the floor, and the
// tier tierFor chooses).
func (k *Keyed[K]) current(key K) (tat int64, p *gcra.Params) {
	if c, ok := k.m.Load(key); ok {
		if tat := c.TAT(); !gcra.IsRetired(tat) {
			return tat, c.params()
		}
	}
	return k.cells.floor.Load(), k.tierFor(key).params.Load()
}

// cellFor returns key's live cell, creating it if needed, or nil if the
// limiter is full and refuses the key. It never returns a retired cell.
func (k *Keyed[K]) cellFor(key K, now int64) *cell {
	if c, ok := k.m.Load(key); ok && !c.IsRetired() {
		return c
	}
	// A new key. Its tier is chosen here, outside any lock: the tier function
	// is the user's code, and a panic in it must not leave a map bucket locked
	// or a key slot counted. Under the lock, newCell prefers an override set
	// since (SetKeyLimit stores the override before it updates a cell).
	byFunc := k.tierByFunc(key)
	c, ok := k.st.Cell(key, now, func() *cell { return k.newCell(key, byFunc) })
	if !ok {
		return nil
	}
	return c
}

// newCell runs under the lock of key's map bucket, once per insertion; it
// runs none of the user's code.
func (k *Keyed[K]) newCell(key K, byFunc *Tier) *cell {
	c := &cell{}
	// The floor: at least the TAT of any cell a sweeper retired as idle. Read
	// here, after the removal of such a cell for this key (which took the same
	// bucket lock), so the sweeper's raise of the floor is visible.
	c.tat.Store(uint64(k.cells.floor.Load()))
	if t, ok := k.overrides.Load(key); ok {
		byFunc = t
	}
	c.tier.Store(byFunc)
	return c
}

// tierFor returns the tier a new cell for key gets: its own limit from
// SetKeyLimit, else the tier function's choice, else the default.
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

// SetLimit changes the default tier's limit and burst: every key on the
// default tier, present or future, is decided under it from its next decision
// on. It returns the same errors as New and changes nothing on error.
func (k *Keyed[K]) SetLimit(limit gcra.Limit, burst int) error {
	return k.def.SetLimit(limit, burst)
}

// Params returns the default tier's parameters.
func (k *Keyed[K]) Params() *gcra.Params { return k.def.params.Load() }

// NewTier returns a tier for this limiter's keys (see SetTierFunc). It
// returns the same errors as New.
func (k *Keyed[K]) NewTier(limit gcra.Limit, burst int) (*Tier, error) {
	return newTier(k.src, limit, burst)
}

// SetTierFunc makes f choose the tier of each key created from now on (nil,
// or f returning nil: the default tier). Keys already present keep their
// tier. f must be quick, safe for concurrent use and give the same tier for
// the same key: it runs, outside any lock, when a request finds no cell for
// its key, and for Peek, Tokens and ClearKeyLimit of a key. A panic in f
// reaches the caller and leaves the limiter as it was.
func (k *Keyed[K]) SetTierFunc(f func(K) *Tier) {
	if f == nil {
		k.tierFunc.Store(nil)
		return
	}
	k.tierFunc.Store(&f)
}

// SetKeyLimit gives key its own limit and burst, whether or not the key is
// present (it inserts no key); it survives the key's removal while idle. It returns the same
// errors as New and changes nothing on error.
func (k *Keyed[K]) SetKeyLimit(key K, limit gcra.Limit, burst int) error {
	t, err := newTier(k.src, limit, burst)
	if err != nil {
		return err
	}
	k.setMu.Lock()
	defer k.setMu.Unlock()
	// First record the override, so that a cell created from now on reads
	// it; then update the cell that may already exist. A cell created
	// between the two steps read the override already.
	k.overrides.Store(key, t)
	k.retier(key, t)
	return nil
}

// ClearKeyLimit removes key's own limit: the key returns to the tier the tier
// function (or the default) chooses.
func (k *Keyed[K]) ClearKeyLimit(key K) {
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
	k.m.Update(key, func(c *cell) { c.tier.Store(t) })
}

// Len returns the number of keys held.
func (k *Keyed[K]) Len() int { return k.m.Len() }

// String describes the default tier, e.g. "100/1s burst 10".
func (k *Keyed[K]) String() string { return paramsString(k.def.params.Load()) }

func paramsString(p *gcra.Params) string {
	return fmt.Sprintf("%v burst %d", p.Limit(), p.Burst())
}

// Sweep removes every key that is idle now and returns how many it retired.
// Sweep is shorthand for SweepAt(clock.Now()).
func (k *Keyed[K]) Sweep() int { return k.st.Sweep(k.src.Now()) }

// SweepAt removes every key idle at now (TAT ≤ now), one shard at a time,
// and returns how many it removed. It takes no global lock: decisions on
// other keys, and on the same keys, go on meanwhile.
//
// Keys created after a sweep start at the floor, the largest TAT the
// limiter has removed, so that a request stamped before that TAT is never
// decided on a fuller bucket than the one removed. It returns how many cells
// it retired.
func (k *Keyed[K]) SweepAt(now time.Time) int { return k.st.Sweep(k.src.At(now)) }

// Close stops the background sweeper and waits until it has stopped. The
// limiter keeps working; idle keys are then removed only by Sweep and when
// the limiter is full. Close is idempotent.
func (k *Keyed[K]) Close() { k.st.Close() }

// KeyedStats counts what a Keyed limiter has done since it was created.
type KeyedStats = keyed.Stats

// Stats returns the limiter's counters.
func (k *Keyed[K]) Stats() KeyedStats { return k.st.Stats() }
