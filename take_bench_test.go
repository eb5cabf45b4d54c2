package atomiclimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/gcra"
)

// BenchmarkKeyedTake compares the contract's Take (a decision with a
// receipt, what every door calls once per policy) with Decide and Allow on
// one key already held, admitted every time (T = 1ns, B = 100).
//
//	go test . -run='^$' -bench='KeyedTake' -count=10
func BenchmarkKeyedTake(b *testing.B) {
	ctx := context.Background()
	k, err := atomiclimit.NewKeyedRule[string](atomiclimit.GCRA(gcra.Per(1_000_000_000, time.Second), 100), atomiclimit.WithSweepInterval(0))
	if err != nil {
		b.Fatal(err)
	}
	k.Allow("key")
	b.Run("op=allow", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			k.Allow("key")
		}
	})
	b.Run("op=decide", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			decide(k, "key", 1)
		}
	})
	b.Run("op=take", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			k.Take(ctx, "key", 1)
		}
	})
}
