package redislimit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// BenchmarkLeased compares one call per decision (impl=call: Limiter.Allow)
// with leases (impl=leased: Leased.Allow, leases of up to 1024 tokens) on
// one hot key of the same redis-server, in the same run, from 16
// goroutines; every request is admitted (burst 2^30). Compare with
//
//	go test ./ -run='^$' -bench=Leased -cpu=2 -count=5 > lease.txt
//	benchstat -col /impl lease.txt
func BenchmarkLeased(b *testing.B) {
	s := sharedServer(b)
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr(), PoolSize: 64, MaxRetries: -1})
	defer rdb.Close()
	const g = 16
	for _, impl := range []string{"call", "leased"} {
		b.Run(fmt.Sprintf("impl=%s/goroutines=%d", impl, g), func(b *testing.B) {
			l, err := redislimit.New(rdb, gcra.Every(time.Microsecond), 1<<30, redislimit.WithKeyPrefix(fmt.Sprintf("bench:lease:%s:%d:", impl, prefixSeq.Add(1))))
			if err != nil {
				b.Fatal(err)
			}
			allow := func(int) bool { return l.Allow(ctx, "hot") }
			if impl == "leased" {
				ls, err := redislimit.NewLeased(l, 1024, 100*time.Millisecond)
				if err != nil {
					b.Fatal(err)
				}
				allow = func(int) bool { return ls.Allow(ctx, "hot") }
			}
			allow(0) // load the script
			runTimed(b, g, allow, true)
		})
	}
}
