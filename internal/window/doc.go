// Package window has the window algorithms: fixed window (with interval
// refill and UTC-aligned periods), sliding-window counter and exact sliding
// log. Each has pure decision functions on its state (FixedParams,
// CounterParams, LogParams: no atomics, no clock, table- and fuzz-tested
// against plain reference models), an atomic cell (FixedCell, CounterCell,
// LogRing) and a single-key limiter with atomicbucket's vocabulary (Fixed,
// Counter, Log: Allow, AllowN, Decide, DecideAt, Peek, PeekAt; WithClock,
// WithCoarseClock), and keyed forms that hold one cell per key on a shared
// sharded map with exact idle eviction (Keyed, from NewKeyedFixed and
// NewKeyedCounter, and KeyedLog). Decisions are gcra.Decision values, so the window
// limiters report Remaining, RetryAfter, ResetAfter and TokenAfter as the
// GCRA ones do. Several limits on one key: package bands.
//
// # Choosing
//
//	algorithm     heap per key      most admitted in any     burst                          keyed ns/decision, medians
//	              (1M keys)         rolling window of W                                     serial / hot key / 1M keys
//	GCRA          74 B              B + W/T                  B at once, then the rate       99 / 82 / 359
//	Fixed         66 B              2N (N per window,        the whole quota at each        104 / 82 / 367
//	                                N each side of a         boundary, nothing carried
//	                                boundary)                over (interval refill)
//	Counter       66 B              2N − 1 (N per fixed      up to N at once after an idle  114 / 92 / 442 (1)
//	                                window)                  window, less after a busy one
//	Log (N = 16)  218 B: 8·N + 32   N, exactly               up to N at once after W idle   104 / 78 / 525 (1)
//	              + the map's
//	3 bands       114 B             each band's own bound    the tightest band's            231 / 246 / 641
//
// GCRA is atomicbucket.Keyed, 3 bands is bands.Keyed with GCRA, fixed and
// counter bands. Memory is the heap a limiter holds per key with 1,000,000
// string keys, the keys' own bytes excluded (the map's entry and table share
// is about 58 B of every figure); the cost is Allow on the monotonic clock
// with GOMAXPROCS 2: one goroutine on one key, both on one key, and both
// spread uniformly over a million keys. (1) On one key the counter (2^21 per
// hour) and the log (16 per ms) deny most calls, a load and no write: 63%
// and 0.2% of the serial calls were admitted. Every path allocates nothing.
// Measured on a shared, noisy 2-vCPU VM (Intel Xeon 2.8 GHz, Go 1.26; spread
// ±9–48% between runs), with
//
//	go test -c -o window.test ./window
//	for i in 1 2 3 4 5 6; do ./window.test -test.run='^$' -test.bench=KeyedAlgo -test.benchtime=300ms; done > algo.txt
//	./window.test -test.run='^$' -test.bench=KeyedMemory -test.benchtime=1x -test.count=3
//	benchstat -col /algo algo.txt
//
// The single-key limiters cost less, with no map lookup; serial Allow, an
// explicit time / the monotonic clock, -count=5 medians from
// go test ./window -run='^$' -bench=. on the same kind of VM: fixed 14 / 41 ns,
// counter 33 / 64 ns, log 21 / 45 ns. A denial writes nothing on any of
// them, keyed or not.
//
// # Time
//
// Times are nanoseconds since the limiter's epoch on the monotonic clock by
// default (internal/timebase, shared with atomicbucket), so wall-clock steps
// change nothing, except where AlignUTC asks for wall-clock boundaries (see
// Align.Start for how they are derived from the monotonic base). A stale or
// backward now, from a caller preempted between reading the clock and
// deciding, can only make a decision stricter, and no state ever moves back
// in time.
//
// # Limits on counts
//
// The fixed window and the counter pack a window index beside their counts
// in one 64-bit word; the constructors reject a limit whose index could wrap
// within the 73 years the time base covers (ErrOverflow). Fixed: N < 2^32
// for windows of 1 s or more. Counter (two counts): N < 2^16 per second,
// < 2^19 per minute, < 2^22 per hour, < 2^24 per day. Log: N ≤ MaxLogLimit.
//
// # Not here
//
// Calendar months (periods of varying length)
// are not provided by AlignUTC. The log admits one event per call.
package window
