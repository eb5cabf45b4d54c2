package latency

import "time"

// Busy keeps the calling goroutine computing for d, reading the clock and
// touching no other memory: a call as long as a decision, with none of its
// work. Timed like a decision, what it measures beyond d is what the machine
// (the hypervisor, the kernel, the scheduler) takes from any call that
// long, and the longer a call, the likelier an interruption lands in it,
// which an empty call hides.
//
//go:noinline
func Busy(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}
