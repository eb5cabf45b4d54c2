package latency

import (
	"runtime"
	"testing"
)

// Spares are the Ps a tail scenario leaves free: none (every P runs a
// timed goroutine), and one (as a server below saturation has, for the
// collector and a limiter's sweeper).
var Spares = []int{0, 1}

// Workers is how many timed goroutines a scenario with spare free Ps runs:
// one per P, less spare, and at least one.
func Workers(spare int) int { return max(runtime.GOMAXPROCS(0)-spare, 1) }

// SkipNoSpare skips b when spare leaves no P to run on: with a single P,
// spare=1 would run what spare=0 runs.
func SkipNoSpare(b *testing.B, spare int) {
	if spare >= runtime.GOMAXPROCS(0) {
		b.Skip("no P to spare")
	}
}
