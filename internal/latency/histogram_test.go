package latency

import (
	"math/rand/v2"
	"testing"
)

// TestLatencyBuckets: every value lands in a bucket whose upper edge is at
// least the value and at most 1/32 above it, and buckets are ordered.
func TestLatencyBuckets(t *testing.T) {
	check := func(v uint64) {
		i := bucket(v)
		up := upper(i)
		if up < v || float64(up-v) > float64(v)/32 {
			t.Fatalf("value %d: bucket %d, upper edge %d", v, i, up)
		}
		if i > 0 && upper(i-1) >= v {
			t.Fatalf("value %d: bucket %d, but bucket %d reaches %d", v, i, i-1, upper(i-1))
		}
	}
	for v := range uint64(5000) {
		check(v)
	}
	for range 100000 {
		check(rand.Uint64N(1 << 50))
	}
}
