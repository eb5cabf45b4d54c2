package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/internal/latency"
)

// The tail-latency scenarios (issue #17): every single decision is timed,
// and each reports p50, p99, p99.9, p99.99 (ns) and the longest (µs), for us
// and every keyed peer in one run, beside the runtime's own longest waits
// over the run (sched-max-µs: a goroutine runnable but not running;
// stw-max-µs: a stop-the-world pause; faults/op: the process's page faults;
// see internal/latency) and how many decisions took over 20 µs. impl=noop
// times an empty call in the same loop, and impl=busy a call that computes
// for 200 ns touching no memory (about 300 ns with its clock reads: a
// decision's length): what the machine itself adds to any call, and to one
// that long. spare=0 runs a goroutine on every P; spare=1 leaves one P
// free, as a server below saturation does, for the runtime's work (the
// collector, our sweeper). They
// ignore b.N: run them with -benchtime=1x (the main program does not run
// them):
//
//	go test -run='^$' -bench='Growth|Churn' -benchtime=1x -count=3 -cpu=2 > tail.txt
//
// tailSetting is 10 per second with a burst of 1: a key is idle 100 ms after
// its last admission.
var tailSetting = setting{n: 10, period: time.Second, burst: 1}

// tailPeers is every keyed peer, after impl=noop and impl=busy.
func tailPeers() []peer {
	ps := []peer{
		{name: "noop", keyed: func(setting) keyed { return noopKeyed{} }},
		{name: "busy", keyed: func(setting) keyed { return busyKeyed{} }},
	}
	for _, p := range peers {
		if p.keyed != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

type noopKeyed struct{}

//go:noinline
func (noopKeyed) allow(string) bool { return true }
func (noopKeyed) close()            {}

type busyKeyed struct{}

func (busyKeyed) allow(string) bool {
	latency.Busy(200 * time.Nanosecond)
	return true
}
func (busyKeyed) close() {}

// BenchmarkGrowth drives each limiter from empty to keysCount keys from
// every P: each key is new once, and each call for a new key is followed by
// one for an older key.
func BenchmarkGrowth(b *testing.B) {
	buildKeys()
	for _, spare := range latency.Spares {
		for _, p := range tailPeers() {
			b.Run(fmt.Sprintf("keys=%d/spare=%d/impl=%s", keysCount, spare, p.id()), func(b *testing.B) {
				latency.SkipNoSpare(b, spare)
				var h latency.Histogram
				for range b.N {
					k := p.keyed(tailSetting)
					workers := latency.Workers(spare)
					latency.Timed(&h, workers, func(w int, hw *latency.Histogram) {
						for i := w; i < keysCount; i += workers {
							for _, key := range [2]string{newKeyNames[i], newKeyNames[i/2]} {
								t0 := time.Now()
								k.allow(key)
								hw.Add(time.Since(t0))
							}
						}
					})
					k.close()
				}
				h.Report(b)
			})
		}
	}
}

// churnSetting is 1 per 2 s with a burst of 2: a key asked more often than
// every 2 s never goes idle (each admission adds 2 s, up to 4 s ahead of the
// clock), and one no longer asked is idle 4 s after, at most.
var churnSetting = setting{n: 1, period: 2 * time.Second, burst: 2}

// BenchmarkChurn holds keysCount live keys, of which 10% are replaced per
// second: the live keys are a window of the key space that slides by
// keysCount/10 keys a second. Each worker walks the window in laps, so that
// every live key is asked once a lap (well under 2 s: none goes idle), and
// a key that left the window is idle 2–4 s later. Ours sweeps one pass a
// second (WithSweepInterval), holds about 1.3M keys, and evicts none in the
// first seconds, then the keysCount/10 a second that leave; each peer
// evicts as it is configured (see the peers' notes: none does within a
// run, and their maps grow to 1.8M keys). 8 s per run, after a fill that
// is not timed.
func BenchmarkChurn(b *testing.B) {
	const run = 8 * time.Second
	buildKeys()
	perSecond := keysCount / 10
	names := make([]string, keysCount+perSecond*int(run/time.Second)+1)
	for i := range names {
		names[i] = fmt.Sprintf("churn-%07d", i)
	}
	for _, spare := range latency.Spares {
		for _, p := range tailPeers() {
			b.Run(fmt.Sprintf("keys=%d/spare=%d/impl=%s", keysCount, spare, p.id()), func(b *testing.B) {
				latency.SkipNoSpare(b, spare)
				var h latency.Histogram
				for range b.N {
					var k keyed
					if p.name == "atomiclimit" {
						k = ourKeyed{must(atomiclimit.NewKeyed[string](ourLimit(churnSetting), churnSetting.burst,
							atomiclimit.WithSweepInterval(time.Second)))}
					} else {
						k = p.keyed(churnSetting)
					}
					for _, key := range names[:keysCount] {
						k.allow(key)
					}
					workers := latency.Workers(spare)
					start := time.Now()
					latency.Timed(&h, workers, func(w int, hw *latency.Histogram) {
						latency.Window(start, run, keysCount, perSecond, w, workers, func(j int) {
							t0 := time.Now()
							k.allow(names[j])
							hw.Add(time.Since(t0))
						})
					})
					k.close()
				}
				h.Report(b)
			})
		}
	}
}
