package redislimit_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/redislimit"
)

// BenchmarkBlackHole: the latency of one decision while Redis is a black
// hole (a listener that accepts connections and never answers), serially,
// with WithTimeout(50ms) and FailClosed, without a breaker and with
// WithBreaker(5, time.Second). Without it, every decision waits out the
// timeout; with it, the first five do, then one probe a second, and every
// other decision is the Outage policy's at once. Compare with
//
//	go test ./ -run='^$' -bench=BlackHole -count=8 > blackhole.txt
//	benchstat -col /breaker blackhole.txt
func BenchmarkBlackHole(b *testing.B) {
	hole := newBlackHole(b)
	for _, brk := range []string{"off", "on"} {
		b.Run("breaker="+brk, func(b *testing.B) {
			rdb := redis.NewClient(&redis.Options{Addr: hole.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1, DialTimeout: time.Second})
			defer rdb.Close()
			opts := []redislimit.Option{redislimit.WithTimeout(50 * time.Millisecond)}
			if brk == "on" {
				opts = append(opts, redislimit.WithBreaker(5, time.Second))
			}
			l, err := redislimit.New(rdb, gcra.Per(100, time.Second), 10, opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			runTimed(b, 1, func(int) bool { return allowN(l, ctx, "k", 1) }, false)
		})
	}
}

// newBlackHole returns a loopback listener that accepts every connection
// and never reads or answers; it closes them all when the benchmark ends.
func newBlackHole(tb testing.TB) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln
}
