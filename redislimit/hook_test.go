package redislimit_test

import (
	"context"
	"github.com/atomiclimit/atomiclimit"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// recHook records every event, by source and kind ("allowed", "denied",
// "error"), with the errors in order.
type recHook struct {
	mu     sync.Mutex
	events map[recKey]int
	tokens map[recKey]int
	errs   []error
	policy string
}

type recKey struct {
	src  redislimit.Source
	kind string
}

func newRecHook() *recHook {
	return &recHook{events: map[recKey]int{}, tokens: map[recKey]int{}}
}

func (h *recHook) add(policy string, src redislimit.Source, kind string, n int, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.policy = policy
	h.events[recKey{src, kind}]++
	h.tokens[recKey{src, kind}] += n
	if err != nil {
		h.errs = append(h.errs, err)
	}
}

func (h *recHook) Allowed(policy string, src redislimit.Source, n int) {
	h.add(policy, src, "allowed", n, nil)
}

func (h *recHook) Denied(policy string, src redislimit.Source, n int, _ time.Duration) {
	h.add(policy, src, "denied", n, nil)
}

func (h *recHook) Error(policy string, src redislimit.Source, err error) {
	h.add(policy, src, "error", 0, err)
}

// hook is h as a Limiter's Hook, every event heard.
func (h *recHook) hook() *redislimit.Hook {
	return &redislimit.Hook{Allowed: h.Allowed, Denied: h.Denied, Error: h.Error}
}

func (h *recHook) count(src redislimit.Source, kind string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.events[recKey{src, kind}]
}

// total is the number of events of every source and kind.
func (h *recHook) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.events {
		n += c
	}
	return n
}

func (h *recHook) lastErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) == 0 {
		return nil
	}
	return h.errs[len(h.errs)-1]
}

// TestHookDecisions: each decision that takes reports one Allowed or
// Denied with its source; errors come first; peeks report only errors.
func TestHookDecisions(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	h := newRecHook()
	l, err := redislimit.New(c, gcra.Every(time.Hour), 2, redislimit.WithKeyPrefix(uniq(t)),
		redislimit.WithOverLimitCache(10), redislimit.WithHook("per-user", h.hook()))
	require.NoError(t, err)
	var clock fakeClock
	l.SetLocalClock(clock.now)

	require.True(t, allowN(l, ctx, "k", 2))
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "allowed"))
	assert.Equal(t, 2, h.tokens[recKey{redislimit.SourceRedis, "allowed"}], "n is reported")
	assert.Equal(t, "per-user", h.policy)
	_, _, err = l.Take(ctx, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, 1, h.count(redislimit.SourceRedis, "denied"))
	require.False(t, l.Allow(ctx, "k")) // the cache answers: Allow's fast path still reports
	require.Equal(t, redislimit.SourceCache, l.TakeResult(ctx, "k", 1).Source)
	assert.Equal(t, 2, h.count(redislimit.SourceCache, "denied"))
	require.Equal(t, redislimit.SourceCache, l.PeekResult(ctx, "k", 1).Source)
	_, err = l.Peek(ctx, "other", 1)
	require.NoError(t, err)
	assert.Equal(t, 4, h.total(), "peeks report nothing")
	assert.Equal(t, 0, h.count(redislimit.SourceRedis, "error"))

	// Static limits report with SourceStatic.
	hs := newRecHook()
	unlimited, err := redislimit.New(c, gcra.Unlimited, 1, redislimit.WithHook("free", hs.hook()))
	require.NoError(t, err)
	require.True(t, unlimited.Allow(ctx, "k"))
	assert.Equal(t, 1, hs.count(redislimit.SourceStatic, "allowed"))

	// A caller who gave up is an Error alone.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	r := l.TakeResult(cancelled, "other", 1)
	require.Equal(t, redislimit.SourceCaller, r.Source)
	assert.Equal(t, 1, h.count(redislimit.SourceCaller, "error"))
	assert.Equal(t, 5, h.total(), "and no decision")
	assert.ErrorIs(t, h.lastErr(), context.Canceled)
}

// TestHookOutage: an outage reports Error then the policy's decision, with
// the policy's source; Refund and Reset report their errors as fail-closed.
func TestHookOutage(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	s.kill()
	ctx := context.Background()
	for _, pname := range policyNames {
		p := newPolicy(t, pname)
		h := newRecHook()
		l, err := redislimit.New(c, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage), redislimit.WithHook("p", h.hook()))
		require.NoError(t, err)
		r := l.TakeResult(ctx, "k", 1)
		require.Equal(t, p.source, r.Source)
		assert.Equal(t, 1, h.count(p.source, "error"), pname)
		kind := "denied"
		if r.Allowed {
			kind = "allowed"
		}
		assert.Equal(t, 1, h.count(p.source, kind), pname)
		assert.ErrorIs(t, h.lastErr(), redislimit.ErrUnavailable)

		_, err = l.Refund(ctx, "k", 1, atomiclimit.RemoteReceipt([3]uint64{12345}))
		require.ErrorIs(t, err, redislimit.ErrUnavailable)
		require.ErrorIs(t, l.Reset(ctx, "k"), redislimit.ErrUnavailable)
		assert.Equal(t, 2, h.count(redislimit.SourceFailClosed, "error")-btoi(pname == "fail-closed"), pname)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestHookUnsetCostsNothing: without a hook, and with one that does not
// allocate, a cache hit allocates nothing.
func TestHookUnsetCostsNothing(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	for _, hooked := range []bool{false, true} {
		opts := []redislimit.Option{redislimit.WithKeyPrefix(uniq(t)), redislimit.WithOverLimitCache(10)}
		if hooked {
			opts = append(opts, redislimit.WithHook("p", nopHook()))
		}
		l, err := redislimit.New(s.client(t), gcra.Every(time.Hour), 1, opts...)
		require.NoError(t, err)
		var clock fakeClock
		l.SetLocalClock(clock.now)
		require.True(t, l.Allow(ctx, "k"))
		require.False(t, l.Allow(ctx, "k"))
		allocs := testing.AllocsPerRun(1000, func() {
			if l.TakeResult(ctx, "k", 1).Source != redislimit.SourceCache || l.Allow(ctx, "k") {
				panic("not a cache denial")
			}
		})
		assert.Zero(t, allocs, "hooked=%v", hooked)
	}
}

// nopHook hears every event and does nothing with it; it does not
// allocate.
func nopHook() *redislimit.Hook {
	return &redislimit.Hook{
		Allowed: func(string, redislimit.Source, int) {},
		Denied:  func(string, redislimit.Source, int, time.Duration) {},
		Error:   func(string, redislimit.Source, error) {},
	}
}

// TestHookNilFields: a nil field is an event nobody hears, the others are
// heard as usual; New copies the Hook, so a field set later is not heard;
// a Hook with no field set, and a nil one, are no hook.
func TestHookNilFields(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	var denied, errs int
	h := &redislimit.Hook{Denied: func(_ string, src redislimit.Source, n int, retry time.Duration) {
		denied++
		assert.Equal(t, redislimit.SourceRedis, src)
		assert.Equal(t, 1, n)
		assert.Positive(t, retry)
	}}
	l, err := redislimit.New(c, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithHook("p", h))
	require.NoError(t, err)
	require.True(t, l.Hooked())
	h.Error = func(string, redislimit.Source, error) { errs++ } // after New: not heard
	require.True(t, l.Allow(ctx, "k"))                          // Allowed is nil: not heard
	require.False(t, l.Allow(ctx, "k"))
	_, _, err = l.Take(ctx, "k", 1)
	require.NoError(t, err)
	assert.Equal(t, 2, denied)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = l.Take(cancelled, "k", 1)
	require.ErrorIs(t, err, context.Canceled)
	_, err = l.Refund(cancelled, "k", 1, atomiclimit.RemoteReceipt([3]uint64{1}))
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, l.Reset(cancelled, "k"), context.Canceled)
	assert.Zero(t, errs, "the Error set after New is not heard")
	assert.Equal(t, 2, denied)

	for _, none := range []*redislimit.Hook{nil, {}} {
		l, err := redislimit.New(c, gcra.Every(time.Hour), 1, redislimit.WithKeyPrefix(uniq(t)), redislimit.WithHook("p", none))
		require.NoError(t, err)
		assert.False(t, l.Hooked(), "no hook: one branch per decision")
		require.True(t, l.Allow(ctx, "k"))
		require.False(t, l.Allow(ctx, "k"))
		_, _, err = l.Take(cancelled, "k", 1)
		require.ErrorIs(t, err, context.Canceled)
	}
}
