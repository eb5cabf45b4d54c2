// Package gcra is the arithmetic of the Generic Cell Rate Algorithm: limits,
// validated parameters, and pure decision functions over a bucket's state.
// It has no atomics, no clock and no maps; every limiter in this module
// decides through it, so its tables and fuzz tests cover them all.
//
// # The model
//
// A limit of Rate events per Period gives the emission interval
// T = Period / Rate, in nanoseconds rounded up. Burst B ≥ 1 is the capacity:
// a full bucket admits B events at one instant, and it refills one token
// every T. The whole state of a bucket is its theoretical arrival time TAT,
// in nanoseconds on a monotonic time base private to the limiter. TAT ≤ now
// means the bucket is full, so the state 0 is a full bucket.
//
// A request for n tokens at now:
//
//	base     = max(TAT, now)
//	newTAT   = base + n·T
//	allowed  ⇔  1 ≤ n ≤ B  and  newTAT − now ≤ B·T
//
// An allowed request stores newTAT; a denied one stores nothing. Because base
// is never below TAT, a stale or backward now can only make a decision
// stricter, and no decision moves TAT backwards (only a refund does, and
// never below now). Over any interval of length d, a bucket admits at most
// B + d/T tokens, counting a reservation's tokens at the time they are due.
//
// # Mapping other libraries' parameters
//
//	library                    their parameters                 ours
//	golang.org/x/time/rate     NewLimiter(r, b)                 Rate(float64(r)), burst b
//	                           NewLimiter(rate.Every(d), b)     Every(d), burst b
//	                           rate.Inf                         Unlimited
//	                           burst 0 (finite r)               DenyAll
//	go.uber.org/ratelimit      New(r, WithSlack(s)) + Take()    Per(r, time.Second), burst s+1, and Wait
//	                           WithoutSlack                     burst 1
//	throttled/v2               RateQuota{PerSec(r), MaxBurst k} Per(r, time.Second), burst k+1
//	go-redis/redis_rate        Limit{Rate r, Burst b, Period p} Per(r, p), burst b
//	redis-cell                 CL.THROTTLE key k r p            Per(r, p·1s), burst k+1
//
// throttled and redis-cell count the burst beyond the first request
// (max_burst + 1 requests pass at once); this package counts all of them, so
// Burst 1 means "no burst".
//
// # Precision
//
// T is an integer number of nanoseconds rounded up, so the limiter never
// admits faster than configured and its rate is low by a relative error of at
// most 1/T: at most 0.1% for rates up to 10^6/s. Rates faster than one event
// per nanosecond are rejected (ErrRateTooHigh) rather than silently rounded
// to a different limit, and so are bursts with B·T > MaxSpan (ErrOverflow).
package gcra
