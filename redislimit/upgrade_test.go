package redislimit_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// TestUpgradeFromRedisgcra: what a process of the former module, redisgcra,
// does with the one value this module writes that it does not know, a TAT
// with a give-back epoch ("TAT:E", written once a give-back has moved
// other admissions), as the package doc ("Upgrading from redisgcra") says:
// a redisgcra with ErrCorrupt but no epoch repairs it to the empty bucket
// (the strictest state) and denies; one from before ErrCorrupt reads it as
// an absent key, a full bucket, and admits. Either writes a bare TAT, which
// this module reads as a state of epoch 0.
func TestUpgradeFromRedisgcra(t *testing.T) {
	s := sharedServer(t)
	c := s.client(t)
	ctx := context.Background()
	t0 := serverNow(t, c)
	const h = int64(time.Hour / time.Microsecond)
	l, err := redislimit.New(c, gcra.Every(time.Hour), 3, redislimit.WithKeyPrefix(uniq(t)))
	require.NoError(t, err)
	// A and B at t0, A given back: B's admission moves, and the key gets
	// the epoch t0.
	epochValue := func(key string) {
		t.Helper()
		_, a := l.TakeAt(ctx, key, 1, t0)
		_, _ = l.TakeAt(ctx, key, 1, t0)
		ok, err := l.RefundAt(ctx, key, 1, a, t0)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, fmt.Sprintf("%d:%d", t0+h, t0), stored(t, c, l.Key(key)))
	}
	old := func(file, key string) any {
		t.Helper()
		src, err := os.ReadFile("testdata/" + file)
		require.NoError(t, err)
		// T, B·T, n, op '1' (take), now: as redisgcra called it.
		reply, err := c.Eval(ctx, string(src), []string{l.Key(key)}, strconv.FormatInt(h, 10), strconv.FormatInt(3*h, 10), 1, "1", strconv.FormatInt(t0, 10)).Result()
		require.NoError(t, err)
		return reply
	}

	epochValue("repaired")
	reply := old("redisgcra-decide-before-epoch.lua", "repaired")
	assert.Equal(t, []any{int64(2 * 3 * h), int64(0), fmt.Sprintf("%q", fmt.Sprintf("%d:%d", t0+h, t0))}, reply,
		"denied on the empty bucket, and the value reported as corrupt")
	assert.Equal(t, strconv.FormatInt(t0+3*h, 10), stored(t, c, l.Key("repaired")), "the empty bucket, no epoch")
	d := l.DecideAt(ctx, "repaired", 1, false, t0)
	require.NoError(t, d.Err)
	assert.Equal(t, gcra.Decision{RetryAfter: time.Hour, ResetAfter: 3 * time.Hour, TokenAfter: time.Hour}, d.Decision,
		"this module reads the repair as a state: the strictest")

	epochValue("admitted")
	reply = old("redisgcra-decide-before-repair.lua", "admitted")
	assert.Equal(t, int64(1), reply, "admitted on a full bucket")
	assert.Equal(t, strconv.FormatInt(t0+h, 10), stored(t, c, l.Key("admitted")),
		"one admission where there were two: the key lost B's")
	d = l.DecideAt(ctx, "admitted", 2, false, t0)
	require.NoError(t, d.Err)
	assert.True(t, d.Allowed, "two more at t0: four held at once, one more than the burst")
}
