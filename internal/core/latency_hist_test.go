package core_test

import (
	"math/rand/v2"
	"testing"
)

// TestLatencyBuckets: every value lands in a bucket whose upper edge is at
// least the value and at most 1/32 above it, and buckets are ordered.
func TestLatencyBuckets(t *testing.T) {
	check := func(v uint64) {
		i := latencyBucket(v)
		up := latencyUpper(i)
		if up < v || float64(up-v) > float64(v)/32 {
			t.Fatalf("value %d: bucket %d, upper edge %d", v, i, up)
		}
		if i > 0 && latencyUpper(i-1) >= v {
			t.Fatalf("value %d: bucket %d, but bucket %d reaches %d", v, i, i-1, latencyUpper(i-1))
		}
	}
	for v := range uint64(5000) {
		check(v)
	}
	for range 100000 {
		check(rand.Uint64N(1 << 50))
	}
}
