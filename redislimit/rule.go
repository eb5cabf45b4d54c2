package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/window"
)

// The errors of NewRule, besides New's and the in-process constructors'.
var (
	// errUnsupported: a rule that NewRule does not decide in Redis.
	// FixedWindow: its windows start when one limiter is created, an
	// instant the processes of a fleet do not share; FixedWindowUTC places
	// them on UTC boundaries that every process agrees on. Also
	// WithOverLimitCache with a rule other than GCRA: the cache bounds a
	// TAT.
	errUnsupported = &configError{msg: "redislimit: not decided in redis", also: errors.ErrUnsupported}
	// errResolution: a window, a slice or a UTC offset that is not a whole
	// number of microseconds, the resolution of Redis TIME and of the stored
	// state. It is rejected rather than rounded to another limit. (GCRA's
	// interval, which the rate only implies, is rounded up instead: see the
	// package doc.) Also an AnchoredWindow of more than 2^51 − 1 per
	// window, whose anchors' resolution (above 2^49 ns) the script cannot
	// round exactly in Lua's doubles.
	errResolution = configErr("window or offset not exact in microseconds")
)

// NewRule returns a Limiter keyed by strings that holds every key to rule:
// NewKeyedRule[string](client, rule, opts...).
func NewRule(client redis.Scripter, rule atomiclimit.Rule, opts ...Option) (*Limiter[string], error) {
	return NewKeyedRule[string](client, rule, opts...)
}

// NewKeyedRule returns a Limiter keyed by K that holds every key to rule,
// deciding in Redis through client, with the decisions, every field of
// them, that an in-process limiter of rule makes
// (atomiclimit.NewKeyedRule[K](rule)) at the instants Redis TIME reports
// (see the package doc):
//
//   - GCRA: NewKeyed's limiter (NewKeyed[K](client, limit, burst, opts...)).
//   - FixedWindowUTC: the windows start at the same UTC boundaries in every
//     process. (FixedWindow is rejected: ErrConfig and errors.ErrUnsupported.)
//   - SlidingCounter: its fixed windows start at 1970-01-01T00:00:00Z +
//     k·period, which every process agrees on; an in-process counter whose
//     limiter starts on such a boundary decides the same.
//   - SlidingLog: exact, N expiries per key (8·(N + 1) bytes of state).
//   - Rolling: its slices start at 1970-01-01T00:00:00Z + k·slice, as the
//     counter's windows do.
//   - AnchoredWindow: each window opens at its first admission, its anchor
//     rounded up to the in-process resolution g (window.AnchoredParams) on
//     a grid from 1970-01-01T00:00:00Z; an in-process limiter whose epoch
//     is on that grid decides the same.
//   - Bands of these, decided at once in one call on one Redis key: all
//     or nothing, in one Cluster slot whatever the key.
//
// Take returns a receipt for a rule of one fixed, sliding counter, rolling or
// anchored band (the window or slice the admission was counted in; the
// anchored window's anchor and count), and Refund gives it back as in
// process; the log's and bands' receipts are 0, as in process
// (Quota().Refunds()). Quota is the in-process Quota. WithOverLimitCache
// applies to GCRA only (ErrConfig and errors.ErrUnsupported). A window,
// slice or offset must be a whole number of µs (ErrConfig). FixedWindow is
// rejected (ErrConfig and errors.ErrUnsupported). Keys become Redis keys as
// NewKeyed's do.
//
// Every error wraps ErrConfig: rule's own, as atomiclimit.NewKeyedRule
// reports them (and wraps them: ErrInvalidRule, ErrInvalidLimit, …); a rule
// not decided in Redis (errors.ErrUnsupported too), a window not whole in
// µs; and NewKeyed's. NewKeyedRule makes no call to Redis.
func NewKeyedRule[K comparable](client redis.Scripter, rule atomiclimit.Rule, opts ...Option) (*Limiter[K], error) {
	if client == nil {
		return nil, errNilClient
	}
	// First the rule as the in-process limiters validate it: the same rule
	// is rejected with the same errors.
	k, err := atomiclimit.NewKeyedRule[string](rule, atomiclimit.WithSweepInterval(0))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	k.Close()
	sp := specOf(rule)
	if sp.kind == specBands && len(sp.bands) == 1 {
		sp = sp.bands[0] // one band is that band, as in process
	}
	if sp.kind == specGCRA {
		return NewKeyed[K](client, sp.limit, sp.burst, opts...)
	}
	specs := []spec{sp}
	if sp.kind == specBands {
		specs = sp.bands
	}
	r := &ruleRemote{bands: make([]band, len(specs)), replies: 2}
	maxN := math.MaxInt
	for i, s := range specs {
		b := &r.bands[i]
		if err := b.init(s); err != nil {
			if len(specs) > 1 {
				return nil, &bandError{fmt.Sprintf("band %d (%v)", i, s), err}
			}
			return nil, &bandError{s.String(), err}
		}
		r.args = append(r.args, b.args[:]...)
		r.replies += b.replies
		maxN = min(maxN, b.maxN())
	}
	r.refunds = len(specs) == 1 && r.bands[0].kind != bandLog

	// The options as NewKeyed applies them, every one, by NewKeyed itself: a
	// GCRA limiter whose algorithm is then replaced by the rule's.
	l, err := NewKeyed[K](client, gcra.Every(time.Second), 1, opts...)
	if err != nil {
		return nil, err
	}
	if l.cache != nil {
		return nil, fmt.Errorf("%w: WithOverLimitCache bounds a GCRA state, and %v is not one", errUnsupported, rule)
	}
	l.params, l.limit, l.argT, l.argSpan = gcra.Params{}, gcra.Limit{}, nil, nil
	l.remote, l.rule, l.maxN = r, &rule, maxN
	l.quota = describe(r.bands, rule)
	l.hint = time.Second
	if l.quota.Limit > 0 {
		l.hint = min(l.quota.Window/time.Duration(l.quota.Limit), time.Second)
	}
	return l, nil
}

// maxBands is the most bands a rule has: Bands refuses more
// (TestMaxBands holds the two together).
const maxBands = 8

// A bandError is the error of the band where of a rule: err, which may be
// one of this package's kinds of ErrConfig or another package's (window's,
// gcra's), said after the band, with the package named once:
// "redislimit: band 1 (counter 5/1.5µs): window or offset not a whole …".
type bandError struct {
	where string
	err   error
}

func (e *bandError) Error() string {
	return "redislimit: " + e.where + ": " + strings.TrimPrefix(e.err.Error(), "redislimit: ")
}

func (e *bandError) Unwrap() error { return e.err }

// Is makes a band's error an ErrConfig, whatever it wraps.
func (e *bandError) Is(target error) bool { return target == ErrConfig }

// describe is the in-process Quota of a rule (rule.Quota()), but with a
// GCRA band's T rounded up to whole µs as this package decides it: its one
// band's, or for bands the tightest band's (the least Limit per Window),
// idle after the longest band is.
func describe(bands []band, rule atomiclimit.Rule) atomiclimit.Quota {
	q := bands[0].quota
	idle := q.IdleAfter
	for _, b := range bands[1:] {
		idle = max(idle, b.quota.IdleAfter)
		if float64(b.quota.Limit)*float64(q.Window) < float64(q.Limit)*float64(b.quota.Window) {
			q = b.quota
		}
	}
	in := rule.Quota() // its kind, its description, whether it gives back
	in.Limit, in.Window, in.IdleAfter = q.Limit, q.Window, idle
	return in
}

// init builds the band of s, which the in-process constructors have
// validated, for Redis.
func (b *band) init(s spec) error {
	us := func(d time.Duration) string { return strconv.FormatInt(int64(d/time.Microsecond), 10) }
	b.quota = s.rule.Quota()
	switch s.kind {
	case specGCRA:
		p, err := gcra.NewParams(s.limit, s.burst)
		if err != nil {
			return err
		}
		b.kind, b.replies, b.words = bandGCRA, 1, 1
		if p.Burst() == 0 {
			// DenyAll: every n ≥ 1 is denied and nothing is stored.
			b.g, b.args = p, [5]any{"g", "1", "0", "0", "0"}
		} else {
			// The rounding rule of New: T up to whole microseconds; a rate
			// above one per µs is rejected, not rounded to another limit.
			if p.Interval() < time.Microsecond {
				return fmt.Errorf("%w: %v", errRateTooHigh, s.limit)
			}
			t := (p.Interval() + time.Microsecond - 1) / time.Microsecond * time.Microsecond
			if b.g, err = gcra.NewParams(gcra.Every(t), s.burst); err != nil {
				return fmt.Errorf("interval rounded up to %v: %w", t, err)
			}
			b.args = [5]any{"g", us(t), us(b.g.Span()), strconv.Itoa(b.g.Burst()), "0"}
			b.quota = atomiclimit.GCRA(gcra.Every(t), s.burst).Quota() // T as rounded
		}
	case specFixed, specCounter:
		if !s.utc && s.kind == specFixed {
			return fmt.Errorf("%w: FixedWindow's windows start when one limiter is created, which the processes of a fleet do not share; FixedWindowUTC(%d, %v, 0) is its fleet form, with windows on UTC boundaries that every process agrees on", errUnsupported, s.n, s.period)
		}
		if s.period%time.Microsecond != 0 || s.offset%time.Microsecond != 0 {
			return fmt.Errorf("%w: window %v, offset %v", errResolution, s.period, s.offset)
		}
		b.w = int64(s.period / time.Microsecond)
		// G: the boundary at or before the Unix epoch (offset mod W, less a
		// window unless 0), so that the index of every time ≥ 0 is ≥ 0.
		if off := (int64(s.offset/time.Microsecond)%b.w + b.w) % b.w; off > 0 {
			b.grid = off - b.w
		}
		b.maxIdx = uint64(gcra.MaxNow)/uint64(s.period) + 1
		if s.kind == specFixed {
			p, err := window.NewFixedParams(s.n, s.period, 0)
			if err != nil {
				return err
			}
			b.kind, b.fixed, b.shift, b.replies, b.words = bandFixed, p, p.CountBits(), 2, 2
			b.args = [5]any{"f", us(s.period), strconv.FormatInt(b.grid, 10), strconv.Itoa(s.n), "0"}
		} else {
			p, err := window.NewCounterParams(s.n, s.period, 0)
			if err != nil {
				return err
			}
			b.kind, b.counter, b.shift, b.replies, b.words = bandCounter, p, p.CountBits(), 3, 3
			b.args = [5]any{"c", us(s.period), strconv.FormatInt(b.grid, 10), strconv.Itoa(s.n), "0"}
		}
	case specLog:
		if s.period%time.Microsecond != 0 {
			return fmt.Errorf("%w: window %v", errResolution, s.period)
		}
		if _, err := window.NewLogParams(s.n, s.period); err != nil {
			return err
		}
		b.kind, b.n, b.w, b.wNs, b.replies, b.words = bandLog, s.n, int64(s.period/time.Microsecond), int64(s.period), 4, s.n+1
		b.args = [5]any{"l", us(s.period), strconv.Itoa(s.n), "0", "0"}
	case specAnchored:
		if s.period%time.Microsecond != 0 {
			return fmt.Errorf("%w: window %v", errResolution, s.period)
		}
		p, err := window.NewAnchoredParams(s.n, s.period)
		if err != nil {
			return err
		}
		if g := p.Resolution(); g > maxAnchorResolution {
			return fmt.Errorf("%w: %d per window needs anchors in units of %v, beyond the %v whose rounding the script computes exactly", errResolution, s.n, g, maxAnchorResolution)
		}
		b.kind, b.anchored, b.shift, b.replies, b.words = bandAnchored, p, p.CountBits(), 3, 3
		b.w, b.wNs, b.res = int64(s.period/time.Microsecond), int64(s.period), int64(p.Resolution())
		b.args = [5]any{"a", us(s.period), strconv.Itoa(s.n), strconv.FormatInt(b.res, 10), "0"}
	case specRolling:
		if s.slice%time.Microsecond != 0 {
			return fmt.Errorf("%w: slice %v", errResolution, s.slice)
		}
		p, err := window.NewRollingParams(s.n, s.period, s.slice, s.perSlice, 0)
		if err != nil {
			return err
		}
		k := p.Words() - 1
		b.kind, b.rolling, b.n, b.w = bandRolling, p, k, int64(s.slice/time.Microsecond)
		b.shift = uint(bits.Len64(uint64(s.n))) // RollingParams' count width
		b.maxIdx = uint64(gcra.MaxNow)/uint64(s.slice) + 1
		b.replies, b.words = 2+2*k, 2+2*k
		capN := s.n
		if s.perSlice > 0 {
			capN = s.perSlice
		}
		b.args = [5]any{"r", us(s.slice), strconv.Itoa(k), strconv.Itoa(s.n), strconv.Itoa(capN)}
	default:
		return fmt.Errorf("%w: %v", errUnsupported, s)
	}
	return nil
}

// maxN is the most one request can take from the band's state, as in
// process: the burst, the window's count, 1 for the log.
func (b *band) maxN() int {
	switch b.kind {
	case bandGCRA:
		return b.g.Burst()
	case bandFixed:
		return b.fixed.Limit()
	case bandCounter:
		return b.counter.Limit()
	case bandAnchored:
		return b.anchored.Limit()
	case bandRolling:
		if c := b.rolling.PerSlice(); c > 0 {
			return min(c, b.rolling.Limit())
		}
		return b.rolling.Limit()
	}
	return 1
}

// maxAnchorResolution is the coarsest anchor resolution g of an anchored
// window the rules script rounds to exactly: it computes now·1000 mod g as
// 8·(125·(now mod g/8) mod g/8), whose products stay below 2^53 while
// 125·g/8 does.
const maxAnchorResolution = time.Duration(1) << 49

// ruleRemote is NewRule's algorithm: ruleLua on the bands' words, and
// ruleRefundLua for a rule of one window band (fixed, counter, rolling).
// Immutable.
type ruleRemote struct {
	bands   []band
	args    []any // the bands' script arguments, in order
	replies int   // the reply's length: now, admitted, the bands' values
	refunds bool  // one fixed, counter or rolling band: Take returns receipts
}

func (r *ruleRemote) decide(ctx context.Context, l *core, rkey string, n int, o op, nowMicros int64) (gcra.Decision, receipt, error) {
	args := make([]any, 3, 3+len(r.args))
	args[0], args[1], args[2] = opArgs[o], n, ""
	if nowMicros >= 0 {
		args[2] = strconv.FormatInt(nowMicros, 10)
	}
	args = append(args, r.args...)
	reply, err := l.call(ctx, &ruleScript, []string{rkey}, args...)
	if err != nil {
		return gcra.Decision{}, receipt{}, err
	}
	var buf [2 + 4*maxBands]int64
	var vals []int64
	if r.replies <= len(buf) {
		vals = buf[:r.replies]
	} else {
		vals = make([]int64, r.replies) // a rolling band: two values per slice
	}
	// After a repair the reply ends with what the key held.
	if vs, ok := reply.([]any); ok && len(vs) == r.replies+1 {
		if what, ok := vs[r.replies].(string); ok {
			err = fmt.Errorf("%w: key %q held %s; repaired as the rule's strictest state", ErrCorrupt, rkey, what)
			reply = vs[:r.replies]
		}
	}
	if !ints(reply, vals) {
		return gcra.Decision{}, receipt{}, rejectedReply(&ruleScript, reply)
	}
	var vs [maxBands]view
	at := 2
	for i := range r.bands {
		b := &r.bands[i]
		vs[i] = b.view(vals[0], vals[at:at+b.replies])
		at += b.replies
	}
	d, rc := combine(r.bands, vs[:len(r.bands)], n, o == opPeek)
	if admitted := vals[1] == 1; d.Allowed != admitted {
		// Unreachable unless another writer stored words of another rule
		// of the same length; trust what Redis did. The tests assert that
		// this never happens.
		scriptMismatches.Add(1)
		d.Allowed, rc = admitted, receipt{}
		if admitted {
			d.RetryAfter = 0
		}
	}
	if o != opReceipt || !d.Allowed || !r.refunds {
		return d, receipt{}, err
	}
	return d, rc, err
}

func (r *ruleRemote) refund(ctx context.Context, l *core, rkey string, n int, rc receipt, nowMicros int64) (bool, error) {
	if !r.refunds {
		return false, nil // the log and bands return no receipts
	}
	b := &r.bands[0]
	args := []any{b.args[0], b.maxN(), n, strconv.FormatUint(rc[0]-1, 10), b.words}
	if b.kind == bandAnchored {
		// The anchor's ns and the count after the admission; W and g; in
		// tests, an explicit now.
		args = append(args, strconv.FormatUint(rc[1], 10), strconv.FormatUint(rc[2], 10), b.args[1], b.args[3])
		if nowMicros >= 0 {
			args = append(args, strconv.FormatInt(nowMicros, 10))
		}
	}
	reply, err := l.call(ctx, &ruleRefundScript, []string{rkey}, args...)
	if err != nil {
		return false, err
	}
	v, ok := reply.(int64)
	if !ok {
		return false, rejectedReply(&ruleRefundScript, reply)
	}
	return v == 1, nil
}
