package gcra

import (
	"fmt"
	"math"
	"time"
)

const (
	// MaxSpan bounds burst × interval, the time a drained bucket takes to
	// refill: 2^61 ns, about 73 years. With times clamped to MaxNow and waits
	// to MaxWait, a stored TAT is at most MaxNow + MaxSpan + MaxWait, and the
	// next one formed from it at most that + MaxSpan < 2^63: no overflow.
	MaxSpan = time.Duration(maxSpan)
	// MaxNow is the largest time, in nanoseconds since a limiter's epoch, that
	// the arithmetic accepts (2^61 ns, about 73 years). Nanos clamps to it.
	MaxNow = time.Duration(maxNow)
	// MaxWait bounds how far in the future a reservation may be due: 2^60 ns,
	// about 36 years. Reserve treats a larger maxWait as MaxWait, so that
	// unbounded reservations cannot push TAT past 2^63 and wrap around.
	MaxWait = time.Duration(maxWait)
	// Never is the RetryAfter of a request that can never be admitted: n < 0,
	// n > burst, or n ≥ 1 under DenyAll. It equals x/time/rate's InfDuration.
	Never = time.Duration(math.MaxInt64)
)

const (
	maxSpan = int64(1) << 61
	maxNow  = int64(1) << 61
	maxWait = int64(1) << 60
)

// Params is a validated (Limit, burst) pair in the integer form the decision
// functions use. It is immutable and safe to share between goroutines and
// between any number of buckets.
//
// The emission interval T is the limit's period divided by its count, in
// nanoseconds, rounded up: the limiter never admits faster than configured,
// and the relative error is at most 1/T (≤ 0.1% for rates up to 10^6/s,
// ≤ 0.0001% up to 1000/s).
//
// The zero Params is an unconstructed limit and denies every request, as
// DenyAll does: its burst is 0, so every n ≥ 1 fails the n ≤ B test. Only
// the span marks Unlimited, so a zero interval alone never means "admit".
type Params struct {
	interval int64 // T in ns; 0 for Unlimited and the zero Params
	burst    int64 // B ≥ 1; 0 for DenyAll and the zero Params; math.MaxInt for Unlimited
	span     int64 // B·T ≤ maxSpan: how far TAT may run ahead of now; MaxInt64 only for Unlimited
	limit    Limit
}

// NewParams validates limit and burst. Burst is the capacity: the number of
// events a full bucket admits at one instant. It has no "+1" convention;
// Burst 1 means no burst at all. Burst is ignored for Unlimited and DenyAll.
//
// Errors wrap ErrInvalidLimit, ErrRateTooHigh, ErrInvalidBurst or ErrOverflow.
func NewParams(limit Limit, burst int) (Params, error) {
	t, err := limit.interval()
	if err != nil {
		return Params{}, err
	}
	switch limit.kind {
	case kindUnlimited:
		// T = 0 and an unbounded span: the general formula admits every n ≥ 1,
		// even from a state left in debt by an earlier, finite limit.
		return Params{interval: 0, burst: math.MaxInt, span: math.MaxInt64, limit: limit}, nil
	case kindDenyAll:
		// burst 0 makes every n fail the n ≤ B test: the general path denies.
		return Params{interval: 1, burst: 0, span: 0, limit: limit}, nil
	}
	if burst < 1 {
		return Params{}, fmt.Errorf("%w: %d (must be at least 1; 1 means no burst)", ErrInvalidBurst, burst)
	}
	if int64(burst) > maxSpan/t {
		return Params{}, fmt.Errorf("%w: burst %d × interval %v exceeds %v", ErrOverflow, burst, time.Duration(t), MaxSpan)
	}
	return Params{interval: t, burst: int64(burst), span: int64(burst) * t, limit: limit}, nil
}

// Limit returns the limit as given to NewParams.
func (p *Params) Limit() Limit { return p.limit }

// Interval returns the emission interval T: the time one token takes to
// refill. It is 0 for Unlimited (and the zero Params).
func (p *Params) Interval() time.Duration { return time.Duration(p.interval) }

// Burst returns the capacity B: 0 for DenyAll and the zero Params,
// math.MaxInt for Unlimited.
func (p *Params) Burst() int { return int(p.burst) }

// Span returns B·T, the time a drained bucket takes to become full
// (math.MaxInt64 for Unlimited).
func (p *Params) Span() time.Duration { return time.Duration(p.span) }

// IsUnlimited reports whether p admits everything. Only Unlimited has the
// span math.MaxInt64 (every finite span is at most MaxSpan); the zero Params,
// whose interval is also 0, is not Unlimited but denies everything.
func (p *Params) IsUnlimited() bool { return p.span == math.MaxInt64 }

// Nanos converts d, a time since a limiter's epoch, to the nanoseconds the
// decision functions take, clamped to [0, MaxNow]. Clamping only ever makes
// decisions stricter: a time before the epoch counts as the epoch, when every
// bucket is full, and no refill is credited for the clamped stretch.
func Nanos(d time.Duration) int64 {
	return min(max(int64(d), 0), maxNow)
}
