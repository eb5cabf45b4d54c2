package redislimit_test

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// BenchmarkRedisOverhead: the Redis door's own cost beside its round trip.
// On one client and one redis-server, over the same 1000 keys:
//
//   - op=take: Limiter.Take, the whole decision;
//   - op=evalsha: the EVALSHA that Take sends, raw on the same client: the
//     same script, key and arguments, the same reply, and nothing else
//     (no key prefixing, no argument boxing of ours, no reply parsing, no
//     decision, no breaker or timeout);
//   - op=ping: a PING, the smallest round trip, for scale;
//   - op=take-canned: Take on a client that answers every EVALSHA at once
//     with the reply Redis gave (canned): the door's own cost without the
//     round trip, measured directly (on a busy machine take − evalsha is a
//     small difference of two large, noisy figures);
//   - op=evalsha-canned: that client's EVALSHA alone (building the
//     *redis.Cmd), the part of take-canned that is not the door's;
//   - op=take-prefix and op=take-prefix-canned: take and take-canned on a
//     Limiter keyed by netip.Prefix (httplimit's client address), over
//     1000 IPv6 /64s.
//
// take − evalsha is the door's overhead, and take-canned − evalsha-canned
// the same measured without a round trip; evalsha − ping is the script's
// work in Redis and the larger request. Serially (goroutines=1: latency)
// and, against the server, from 8·GOMAXPROCS goroutines (throughput), on
// the admit path and the deny path (drained keys).
//
//	REDISLIMIT_REQUIRE_SERVER=1 go test ./ -run='^$' -bench=RedisOverhead -count=6 > overhead.txt
//	benchstat -col /op overhead.txt
func BenchmarkRedisOverhead(b *testing.B) {
	s := sharedServer(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), PoolSize: 64, MaxRetries: -1})
	defer rdb.Close()
	for _, path := range []string{"allow", "deny"} {
		limit, burst := gcra.Every(time.Microsecond), 1<<30 // admits everything
		if path == "deny" {
			limit, burst = gcra.Every(time.Hour), 1
		}
		l, err := redislimit.New(rdb, limit, burst, redislimit.WithKeyPrefix("bench:overhead:"+path+":"))
		if err != nil {
			b.Fatal(err)
		}
		keys := benchKeyNames("")
		rkeys := make([][]string, len(keys))
		for i, k := range keys {
			rkeys[i] = []string{l.Key(k)}
		}
		args := l.DecideArgs(1)
		ops := []struct {
			name string
			op   func(i int) bool
		}{
			{"take", func(i int) bool {
				d, _, err := l.Take(ctx, keys[i%benchKeys], 1)
				if err != nil {
					panic(err)
				}
				return d.Allowed
			}},
			{"evalsha", func(i int) bool {
				v, err := rdb.EvalSha(ctx, redislimit.DecideSHA, rkeys[i%benchKeys], args...).Result()
				if err != nil {
					panic(err)
				}
				_, denied := v.(int64) // opReceipt: a denial is one integer, an admission a list
				return !denied
			}},
			{"ping", func(int) bool {
				if err := rdb.Ping(ctx).Err(); err != nil {
					panic(err)
				}
				return path == "allow"
			}},
		}
		for _, k := range keys { // load the script, create the keys, drain them for deny
			if _, _, err := l.Take(ctx, k, 1); err != nil {
				b.Fatal(err)
			}
		}
		// The canned client answers with what Redis answered Take.
		reply, err := rdb.EvalSha(ctx, redislimit.DecideSHA, rkeys[0], args...).Result()
		if err != nil {
			b.Fatal(err)
		}
		canned := cannedScripter{reply}
		lc, err := redislimit.New(canned, limit, burst, redislimit.WithKeyPrefix("bench:overhead:"+path+":"))
		if err != nil {
			b.Fatal(err)
		}
		ops = append(ops, []struct {
			name string
			op   func(i int) bool
		}{
			{"take-canned", func(i int) bool {
				d, _, err := lc.Take(ctx, keys[i%benchKeys], 1)
				if err != nil {
					panic(err)
				}
				return d.Allowed
			}},
			{"evalsha-canned", func(i int) bool {
				v, err := canned.EvalSha(ctx, redislimit.DecideSHA, rkeys[i%benchKeys], args...).Result()
				if err != nil {
					panic(err)
				}
				_, denied := v.(int64)
				return !denied
			}},
		}...)
		// The same, keyed by netip.Prefix (httplimit's client address): the
		// key's text is written into the Redis key, which Take builds anyway.
		prefixes := make([]netip.Prefix, len(keys))
		for i := range prefixes {
			prefixes[i] = netip.PrefixFrom(netip.AddrFrom16([16]byte{0: 0x20, 1: 0x01, 2: 0x0d, 3: 0xb8, 6: byte(i >> 8), 7: byte(i)}), 64)
		}
		lp, err := redislimit.NewKeyed[netip.Prefix](rdb, limit, burst, redislimit.WithKeyPrefix("bench:overhead:"+path+":"))
		if err != nil {
			b.Fatal(err)
		}
		lpc, err := redislimit.NewKeyed[netip.Prefix](canned, limit, burst, redislimit.WithKeyPrefix("bench:overhead:"+path+":"))
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range prefixes {
			if _, _, err := lp.Take(ctx, p, 1); err != nil {
				b.Fatal(err)
			}
		}
		takePrefix := func(l *redislimit.Limiter[netip.Prefix]) func(i int) bool {
			return func(i int) bool {
				d, _, err := l.Take(ctx, prefixes[i%benchKeys], 1)
				if err != nil {
					panic(err)
				}
				return d.Allowed
			}
		}
		ops = append(ops, []struct {
			name string
			op   func(i int) bool
		}{
			{"take-prefix", takePrefix(lp)},
			{"take-prefix-canned", takePrefix(lpc)},
		}...)
		for _, g := range []int{1, 8 * runtime.GOMAXPROCS(0)} {
			for _, o := range ops {
				if g > 1 && strings.HasSuffix(o.name, "-canned") {
					continue // no round trip to overlap
				}
				b.Run(fmt.Sprintf("path=%s/goroutines=%d/op=%s", path, g, o.name), func(b *testing.B) {
					runTimed(b, g, o.op, path == "allow")
				})
			}
		}
	}
}

// cannedScripter answers every script call at once with reply.
type cannedScripter struct{ reply any }

func (c cannedScripter) Eval(context.Context, string, []string, ...any) *redis.Cmd {
	return redis.NewCmdResult(c.reply, nil)
}

func (c cannedScripter) EvalSha(context.Context, string, []string, ...any) *redis.Cmd {
	return redis.NewCmdResult(c.reply, nil)
}

func (c cannedScripter) EvalRO(context.Context, string, []string, ...any) *redis.Cmd {
	return redis.NewCmdResult(c.reply, nil)
}

func (c cannedScripter) EvalShaRO(context.Context, string, []string, ...any) *redis.Cmd {
	return redis.NewCmdResult(c.reply, nil)
}

func (c cannedScripter) ScriptExists(_ context.Context, hashes ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceResult(make([]bool, len(hashes)), nil)
}

func (c cannedScripter) ScriptLoad(context.Context, string) *redis.StringCmd {
	return redis.NewStringResult(redislimit.DecideSHA, nil)
}
