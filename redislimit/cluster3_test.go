package redislimit_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// startCluster3 starts a Redis Cluster of three masters on loopback, each
// owning a third of the 16384 slots, and returns them once every node
// reports the cluster ok and knows all three. Each node's cluster bus gets
// a free port of its own (--cluster-port), not port + 10000.
func startCluster3(t *testing.T) []*server {
	t.Helper()
	ranges := [3][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	nodes := make([]*server, 3)
	var bus [3]int
	for i := range nodes {
		bus[i] = freePort(t)
		nodes[i] = startServer(t, "--cluster-enabled", "yes",
			"--cluster-config-file", t.TempDir()+"/nodes.conf",
			"--cluster-port", strconv.Itoa(bus[i]))
	}
	ctx := context.Background()
	for i, s := range nodes {
		c := s.client(t)
		require.NoError(t, c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", ranges[i][0], ranges[i][1]).Err())
		if i > 0 { // MEET names the first node's bus port: it is not port + 10000
			require.NoError(t, c.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", nodes[0].port, bus[0]).Err())
		}
	}
	// Readiness of the cluster (gossip), not synchronisation of the code
	// under test.
	for _, s := range nodes {
		c := s.client(t)
		waitFor(t, "a 3-master cluster", func() bool {
			info, err := c.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3") {
				return false
			}
			shards, err := c.ClusterShards(ctx).Result()
			return err == nil && len(shards) == 3
		})
	}
	return nodes
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestVectorsCluster runs every decision vector, GCRA's and every rule's,
// through a 3-master Redis Cluster, with and without hash tags: the same
// decisions as in process, the keys spread over the three masters, and
// each key (every band of a rule) whole on one node.
func TestVectorsCluster(t *testing.T) {
	nodes := startCluster3(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].addr()}, MaxRetries: -1})
	defer cc.Close()
	before := redislimit.ScriptMismatches()
	runGCRAVectors(t, cc, "")
	for _, v := range allRuleVectors() {
		runRuleVector(t, cc, v, "")
		runRuleVector(t, cc, v, "tagged:", redislimit.WithHashTag())
	}
	assert.Equal(t, before, redislimit.ScriptMismatches(), "script and in-process disagreed on Allowed")

	ctx := context.Background()
	for i, s := range nodes {
		n, err := s.client(t).DBSize(ctx).Result()
		require.NoError(t, err)
		assert.Positive(t, n, "node %d holds some of the keys", i)
	}

	// Bands under one hash tag with other limiters of the same key: every
	// key of a user in one slot, so that a script could take them all.
	bands, err := redislimit.NewRule(cc, atomiclimit.Bands(
		atomiclimit.FixedWindowUTC(10, 60e9, 0), atomiclimit.SlidingLog(3, 1e9)),
		redislimit.WithKeyPrefix("rl:bands:"), redislimit.WithHashTag())
	require.NoError(t, err)
	day, err := redislimit.NewRule(cc, atomiclimit.SlidingCounter(1000, 24*3600e9), redislimit.WithKeyPrefix("rl:day:"), redislimit.WithHashTag())
	require.NoError(t, err)
	for i := range 20 {
		user := fmt.Sprint("user:", i)
		assert.True(t, bands.Allow(ctx, user))
		assert.True(t, day.Allow(ctx, user))
		a, err := cc.ClusterKeySlot(ctx, bands.Key(user)).Result()
		require.NoError(t, err)
		b, err := cc.ClusterKeySlot(ctx, day.Key(user)).Result()
		require.NoError(t, err)
		assert.Equal(t, a, b, user)
	}
}
