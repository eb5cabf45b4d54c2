package redislimit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// Issue 28, "a fallback's decision is the fallback's": every decision
// FallbackTo's limiter makes (Take, Peek, Allow; Leased's Take, from a
// refill and above a lease; with the breaker open) carries an error that
// wraps atomiclimit.ErrFallback and still the cause (ErrUnavailable or
// ErrRejected), so that a door takes the decision as the policy's and
// hears the outage. FailOpen's and FailClosed's decisions do not wrap it.
// The Hook hears Error (with ErrFallback) and then Allowed or Denied, with
// SourceFallback.
func TestIssue28FallbackErrors(t *testing.T) {
	ctx := context.Background()
	for _, pname := range policyNames {
		t.Run("policy="+pname, func(t *testing.T) {
			p := newPolicy(t, pname) // FallbackTo's limiter: burst 2, one an hour
			isFallback := pname == "fallback"
			check := func(what string, err error, cause error) {
				t.Helper()
				assert.ErrorIs(t, err, cause, what)
				assert.Equal(t, isFallback, errorIs(err, atomiclimit.ErrFallback), "%s: %v wraps ErrFallback", what, err)
				assert.True(t, strings.HasPrefix(err.Error(), "redislimit: "), "%s: %q", what, err)
			}

			h := newRecHook()
			l, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage), redislimit.WithHook("p", h.hook()))
			require.NoError(t, err)
			_, _, err = l.Take(ctx, "k", 1)
			check("Take", err, redislimit.ErrUnavailable)
			_, err = l.Peek(ctx, "k", 1)
			check("Peek", err, redislimit.ErrUnavailable)
			check("Allow", l.AllowResult(ctx, "k").Err, redislimit.ErrUnavailable)
			if isFallback {
				// The local limiter is empty now: its denial, with its wait.
				d, _, err := l.Take(ctx, "k", 1)
				check("Take, denied", err, redislimit.ErrUnavailable)
				assert.False(t, d.Allowed)
				assert.Greater(t, d.RetryAfter, 59*time.Minute, "the local limiter's wait")
				assert.Zero(t, peekLocal(p.local, "k", 0).Remaining)
				assert.Equal(t, 2, h.count(redislimit.SourceFallback, "allowed"))
				assert.Equal(t, 1, h.count(redislimit.SourceFallback, "denied"))
				assert.Equal(t, 4, h.count(redislimit.SourceFallback, "error"), "Take, Peek, Allow, Take")
				h.mu.Lock()
				for _, err := range h.errs {
					assert.ErrorIs(t, err, atomiclimit.ErrFallback)
					assert.ErrorIs(t, err, redislimit.ErrUnavailable)
				}
				h.mu.Unlock()
			}

			// A rejection: FallbackTo's limiter decides too.
			rej, err := redislimit.New(&fakeServer{err: replyErr("NOPERM no permissions")}, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage))
			require.NoError(t, err)
			_, _, err = rej.Take(ctx, "r", 1)
			check("Take, rejected", err, redislimit.ErrRejected)
			_, err = rej.Peek(ctx, "r", 1)
			check("Peek, rejected", err, redislimit.ErrRejected)

			// The breaker open: every call skips Redis, and the fallback's
			// error is made once.
			brk, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage), redislimit.WithBreaker(1, time.Hour))
			require.NoError(t, err)
			_, _, err = brk.Take(ctx, "b", 1) // opens it
			check("Take, the breaker's first outage", err, redislimit.ErrUnavailable)
			_, _, err = brk.Take(ctx, "b", 1)
			check("Take, the breaker open", err, redislimit.ErrCircuitOpen)
			_, err = brk.Peek(ctx, "b", 1)
			check("Peek, the breaker open", err, redislimit.ErrCircuitOpen)
			if isFallback {
				closed, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 2, redislimit.WithBreaker(1, time.Hour))
				require.NoError(t, err)
				_, _, _ = closed.Take(ctx, "b", 1) // opens it
				assert.Equal(t,
					testing.AllocsPerRun(100, func() { _, _ = closed.Peek(ctx, "b", 1) }),
					testing.AllocsPerRun(100, func() { _, _ = brk.Peek(ctx, "b", 1) }),
					"the fallback's error with the breaker open is made once: it allocates nothing FailClosed's does not")
			}

			// Leased: a refill, and a request above the largest lease.
			ll, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 2, redislimit.WithOutage(p.outage))
			require.NoError(t, err)
			ls, err := redislimit.NewLeased(ll, 1, time.Second)
			require.NoError(t, err)
			_, _, err = ls.Take(ctx, "l", 1)
			check("Leased.Take, a refill", err, redislimit.ErrUnavailable)
			_, _, err = ls.Take(ctx, "l", 2)
			check("Leased.Take, above a lease", err, redislimit.ErrUnavailable)
		})
	}
}

// Issue 28: a full local limiter that refuses a new key (WithMaxKeys,
// RejectNew) is a capacity refusal, not the policy's denial: the error
// wraps atomiclimit.ErrTooManyKeys beside ErrFallback and the outage, so
// that a door answers it as it answers any full limiter.
func TestIssue28FallbackFull(t *testing.T) {
	ctx := context.Background()
	local, err := atomiclimit.NewKeyed[string](gcra.Every(time.Hour), 2, atomiclimit.WithMaxKeys(1, atomiclimit.RejectNew))
	require.NoError(t, err)
	t.Cleanup(local.Close)
	l, err := redislimit.New(&noServer{}, gcra.Every(time.Hour), 2, redislimit.WithOutage(redislimit.FallbackTo(local)))
	require.NoError(t, err)
	_, _, err = l.Take(ctx, "first", 1)
	require.ErrorIs(t, err, atomiclimit.ErrFallback)
	assert.NotErrorIs(t, err, atomiclimit.ErrTooManyKeys)
	d, _, err := l.Take(ctx, "second", 1)
	assert.False(t, d.Allowed)
	assert.ErrorIs(t, err, atomiclimit.ErrTooManyKeys)
	assert.ErrorIs(t, err, atomiclimit.ErrFallback)
	assert.ErrorIs(t, err, redislimit.ErrUnavailable)
}

func errorIs(err, target error) bool { return errors.Is(err, target) }
