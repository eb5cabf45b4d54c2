package gcra

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// A Limit is a sustained rate: how many events may happen per period.
// Build one with Per, Every or Rate (the root package adds PerSecond,
// PerMinute, PerHour and PerDay),
// or use one of the named values Unlimited and DenyAll.
//
// The zero Limit is invalid: NewParams rejects it with ErrInvalidLimit, so a
// forgotten field never silently means "no limit" or "deny everything".
type Limit struct {
	kind   limitKind
	events int64         // kindPer: events per period (validated > 0)
	period time.Duration // kindPer: the period (validated > 0)
	perSec float64       // kindRate: events per second (validated finite, > 0)
}

type limitKind uint8

const (
	kindInvalid limitKind = iota // the zero Limit
	kindPer                      // events per period, exact integers
	kindRate                     // events per second, a float (x/time/rate style)
	kindUnlimited
	kindDenyAll
)

var (
	// Unlimited admits every request of any size n ≥ 1; the buckets write no
	// state for it.
	Unlimited = Limit{kind: kindUnlimited}
	// DenyAll admits nothing; every decision reports RetryAfter == Never.
	DenyAll = Limit{kind: kindDenyAll}
)

// Per returns the limit of n events per period.
func Per(n int, period time.Duration) Limit {
	return Limit{kind: kindPer, events: int64(n), period: period}
}

// Every returns the limit of one event every d, as x/time/rate's Every does.
func Every(d time.Duration) Limit { return Per(1, d) }

// Rate returns the limit of perSecond events per second, the unit of
// x/time/rate's Limit. NaN, infinities and values ≤ 0 are rejected by
// NewParams; use Unlimited for x/time/rate's Inf.
func Rate(perSecond float64) Limit { return Limit{kind: kindRate, perSec: perSecond} }

// interval returns the emission interval T in nanoseconds, rounded up so that
// the limiter never admits faster than the limit, or an error.
// Unlimited has interval 0; DenyAll is reported by the caller.
func (l Limit) interval() (int64, error) {
	switch l.kind {
	case kindPer:
		if l.events <= 0 {
			return 0, fmt.Errorf("%w: %d events per period", ErrInvalidLimit, l.events)
		}
		if l.period <= 0 {
			return 0, fmt.Errorf("%w: period %v", ErrInvalidLimit, l.period)
		}
		if int64(l.period) < l.events {
			return 0, fmt.Errorf("%w: %v", ErrRateTooHigh, l)
		}
		// ceil(period/events) without overflow: period ≥ events ≥ 1.
		t := int64(l.period) / l.events
		if int64(l.period)%l.events != 0 {
			t++
		}
		return t, nil
	case kindRate:
		r := l.perSec
		if math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
			return 0, fmt.Errorf("%w: %v events/s (use gcra.Unlimited or gcra.DenyAll)", ErrInvalidLimit, r)
		}
		t := math.Ceil(1e9 / r)
		if t < 1 || r > 1e9 {
			return 0, fmt.Errorf("%w: %v", ErrRateTooHigh, l)
		}
		if t > float64(maxSpan) {
			return 0, fmt.Errorf("%w: interval of %v events/s exceeds %v", ErrOverflow, r, time.Duration(maxSpan))
		}
		return int64(t), nil
	case kindUnlimited:
		return 0, nil
	case kindDenyAll:
		return 0, nil
	}
	return 0, fmt.Errorf("%w: zero Limit (use gcra.Per, gcra.Unlimited, gcra.DenyAll, ...)", ErrInvalidLimit)
}

// String returns the limit as the user stated it, e.g. "100/s", "20/min",
// "5/2s", "10000/d", "2.5/s".
func (l Limit) String() string {
	switch l.kind {
	case kindPer:
		return fmt.Sprintf("%d/%s", l.events, unit(l.period))
	case kindRate:
		return fmt.Sprintf("%v/s", l.perSec)
	case kindUnlimited:
		return "unlimited"
	case kindDenyAll:
		return "deny-all"
	}
	return "invalid"
}

// unit writes a period: "ms", "s", "min", "h" or "d" for one of them, else the
// duration without its zero parts ("2s", "15m", "1h30m", "250ms").
func unit(d time.Duration) string {
	switch d {
	case time.Second:
		return "s"
	case time.Minute:
		return "min"
	case time.Hour:
		return "h"
	case 24 * time.Hour:
		return "d"
	case time.Millisecond:
		return "ms"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
