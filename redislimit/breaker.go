package redislimit

import "sync/atomic"

// A breaker keeps a Limiter's calls from Redis during an outage
// (WithBreaker). It is closed (every call goes to Redis) until threshold
// outages in a row, counted in the order the calls end, with no answer from
// Redis between them; then it is open for window: every call fails at once
// with ErrCircuitOpen, and the Outage policy decides. The first call after
// the window is the probe, the only one that goes to Redis: an answer
// (a reply, or a rejection) closes the breaker, an outage opens it for
// another window, and a probe whose caller gave up lets the next call probe.
// Rejections never count: Redis answered.
//
// Times are the Limiter's local clock (ns, monotonic). The closed path is
// one atomic load before the call and two after it, with no store unless
// the state changes, so a healthy Limiter's calls share the cache line.
type breaker struct {
	threshold int64
	window    int64 // ns

	// openUntil is 0 while closed, else the local time the window ends.
	// Local times are ≥ 0 and window ≥ 1ns, so an open breaker's is > 0.
	openUntil atomic.Int64
	// fails counts the outages since the last answer from Redis.
	fails atomic.Int64
	// probing is held by the probe in flight, if any.
	probing atomic.Bool
}

// allow reports whether a call may go to Redis now, and whether it is the
// probe (which must then report its outcome: answered, failed or abandon).
func (b *breaker) allow(c *core) (probe, ok bool) {
	until := b.openUntil.Load()
	if until == 0 {
		return false, true // closed
	}
	if c.localNow() < until {
		return false, false // open: skip Redis
	}
	// The window has passed: one call probes, the others still skip.
	if !b.probing.CompareAndSwap(false, true) {
		return false, false
	}
	if b.openUntil.Load() == 0 { // closed meanwhile (another call's answer)
		b.probing.Store(false)
		return false, true
	}
	return true, true
}

// answered records an answer from Redis: it closes the breaker.
func (b *breaker) answered(probe bool) {
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if b.openUntil.Load() != 0 {
		b.openUntil.Store(0)
	}
	if probe {
		b.probing.Store(false) // first closed, then the probe slot is free
	}
}

// failed records an outage. A failed probe opens the breaker for another
// window; threshold outages in a row open a closed one.
func (b *breaker) failed(c *core, probe bool) {
	if probe {
		// First the new window, then the slot: no second probe in this one.
		b.openUntil.Store(c.localNow() + b.window)
		b.probing.Store(false)
		return
	}
	if b.fails.Add(1) >= b.threshold {
		b.openUntil.CompareAndSwap(0, c.localNow()+b.window)
	}
}

// abandon gives the probe slot back without a verdict (the probe's caller
// gave up): the next call probes.
func (b *breaker) abandon() { b.probing.Store(false) }
