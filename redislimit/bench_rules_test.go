package redislimit_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// BenchmarkRedisRule: one decision of each rule NewRule decides, on the
// same redis-server in one run, as BenchmarkRedis measures New's: serially
// and from 8·GOMAXPROCS goroutines, on the admit path (limits that 1000
// keys visited in turn never reach) and the deny path (drained keys).
//
//	go test ./ -run='^$' -bench=RedisRule -count=5 > rules.txt
//	benchstat -col /rule rules.txt
func BenchmarkRedisRule(b *testing.B) {
	s := sharedServer(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), PoolSize: 64, MaxRetries: -1})
	defer rdb.Close()
	hour := time.Hour
	rules := []struct {
		name        string
		allow, deny atomiclimit.Rule
	}{
		{"gcra", atomiclimit.GCRA(atomiclimit.Every(time.Microsecond), 1<<20), atomiclimit.GCRA(atomiclimit.Every(hour), 1)},
		{"fixed", atomiclimit.FixedWindowUTC(1000, time.Second, 0), atomiclimit.FixedWindowUTC(1, hour, 0)},
		{"counter", atomiclimit.SlidingCounter(1000, time.Second), atomiclimit.SlidingCounter(1, hour)},
		{"log-100", atomiclimit.SlidingLog(100, time.Millisecond), atomiclimit.SlidingLog(1, hour)},
		{"rolling-24", atomiclimit.Rolling(1000, 24*time.Millisecond, time.Millisecond, 0), atomiclimit.Rolling(1, 24*hour, hour, 0)},
		{"bands-3", atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(time.Microsecond), 1000), atomiclimit.FixedWindowUTC(1000, time.Second, 0), atomiclimit.SlidingLog(100, time.Millisecond)),
			atomiclimit.Bands(atomiclimit.GCRA(atomiclimit.Every(hour), 1), atomiclimit.FixedWindowUTC(1, hour, 0), atomiclimit.SlidingLog(1, hour))},
	}
	for _, path := range []string{"allow", "deny"} {
		for _, g := range []int{1, 8 * runtime.GOMAXPROCS(0)} {
			for _, r := range rules {
				b.Run(fmt.Sprintf("rule=%s/path=%s/goroutines=%d", r.name, path, g), func(b *testing.B) {
					rule := r.allow
					if path == "deny" {
						rule = r.deny
					}
					l, err := redislimit.NewRule(rdb, rule, redislimit.WithKeyPrefix(fmt.Sprintf("bench:rule:%s:%s:%d:", r.name, path, g)))
					if err != nil {
						b.Fatal(err)
					}
					d := func(key string) bool {
						d, _, err := l.Take(ctx, key, 1)
						if err != nil {
							panic(err)
						}
						return d.Allowed
					}
					keys := benchKeyNames("")
					for _, k := range keys { // load the script, create and drain the keys
						d(k)
					}
					runTimed(b, g, func(i int) bool { return d(keys[i%benchKeys]) }, path == "allow")
				})
			}
		}
	}
}
