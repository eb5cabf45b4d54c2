package atomiclimit

import (
	"sync/atomic"
	"time"
)

// A ManualClock is a Clock that moves only when told, for tests and
// simulations: give it to a limiter with WithClock, and a day of traffic
// through the limiter, or through the middleware above it, runs in
// microseconds. Its zero value reads the Unix epoch, midnight UTC on
// 1970-01-01 (a Thursday); Advance moves it. It is safe for concurrent use.
type ManualClock struct {
	ns atomic.Int64 // time since the Unix epoch
}

// Now returns the clock's time, in UTC.
func (c *ManualClock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock d forward (back, for d < 0: a limiter decides a
// backward time as at its latest, never looser; but a give-back, Refund or
// Reservation.Cancel, needs a reading no earlier than the decisions since
// its admission, and may be generous after the clock went back).
func (c *ManualClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
