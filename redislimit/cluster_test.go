package redislimit_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// startCluster starts a one-node Redis Cluster: a server in cluster mode
// that owns all 16384 slots. ClusterClient routes through CLUSTER SLOTS and
// the keys' hash slots exactly as on a larger cluster.
func startCluster(t *testing.T) *server {
	s := startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", t.TempDir()+"/nodes.conf")
	c := s.client(t)
	ctx := context.Background()
	require.NoError(t, c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", "0", "16383").Err())
	waitFor(t, "cluster_state:ok", func() bool {
		info, err := c.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	return s
}

func TestCluster(t *testing.T) {
	s := startCluster(t)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.addr()}, MaxRetries: -1})
	defer cc.Close()

	sec, err := redislimit.New(cc, gcra.Per(10, time.Second), 2, redislimit.WithKeyPrefix("rl:sec:"), redislimit.WithHashTag())
	require.NoError(t, err)
	day, err := redislimit.New(cc, gcra.Per(1000, 24*time.Hour), 5, redislimit.WithKeyPrefix("rl:day:"), redislimit.WithHashTag())
	require.NoError(t, err)
	assert.True(t, sec.Allow(ctx, "user:7"))
	assert.True(t, sec.Allow(ctx, "user:7"))
	r := sec.TakeResult(ctx, "user:7", 1)
	assert.Equal(t, redislimit.SourceRedis, r.Source, "%v", r.Err)
	assert.False(t, r.Allowed)
	assert.Equal(t, 4, decision(day, ctx, "user:7", 1).Remaining)

	// The hash tag puts both bands of a key in one slot; without it the
	// prefixes send them to different slots.
	c := s.client(t)
	slot := func(key string) int64 {
		n, err := c.ClusterKeySlot(ctx, key).Result()
		require.NoError(t, err)
		return n
	}
	for _, k := range []string{"user:7", "user:8", "203.0.113.9", "a}b"} {
		assert.Equal(t, slot(sec.Key(k)), slot(day.Key(k)), "key %q", k)
	}
	plainSec, err := redislimit.New(cc, gcra.Per(10, time.Second), 2, redislimit.WithKeyPrefix("rl:sec:"))
	require.NoError(t, err)
	plainDay, err := redislimit.New(cc, gcra.Per(1000, 24*time.Hour), 5, redislimit.WithKeyPrefix("rl:day:"))
	require.NoError(t, err)
	assert.NotEqual(t, slot(plainSec.Key("user:7")), slot(plainDay.Key("user:7")))
	assert.True(t, plainSec.Allow(ctx, "user:7"))
}

func TestRing(t *testing.T) {
	a, b := startServer(t), startServer(t)
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:      map[string]string{"a": a.addr(), "b": b.addr()},
		MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
	})
	defer ring.Close()
	ctx := context.Background()
	l, err := redislimit.New(ring, gcra.Every(time.Hour), 1)
	require.NoError(t, err)
	for i := range 40 {
		k := fmt.Sprint("k", i)
		r := l.TakeResult(ctx, k, 1)
		require.Equal(t, redislimit.SourceRedis, r.Source, "%v", r.Err)
		assert.True(t, r.Allowed)
		assert.False(t, l.Allow(ctx, k))
	}
	for _, s := range []*server{a, b} {
		n, err := s.client(t).DBSize(ctx).Result()
		require.NoError(t, err)
		assert.Positive(t, n, "the ring spreads keys over both shards")
	}
}
