package atomiclimit_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/atomiclimit/atomiclimit"
	"github.com/atomiclimit/atomiclimit/atomicbucket"
	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/timebase"
)

// The benchmarks pair every limiter path with its floor, measured in the
// same run: the least work any limiter on that clock must do.
//
//	path=allow  floor: one clock read + one load + one CompareAndSwap
//	path=deny   floor: one clock read + one load (a denial writes nothing)
//
// clock=monotonic reads time.Since(epoch); clock=coarse reads the cached
// coarse time (one load); clock=fixed passes an explicit time.Time to AllowN
// (the floor then reads no clock at all). Compare with
//
//	go test ./atomicbucket -run='^$' -bench=. -count=10 > new.txt
//	benchstat -col /impl new.txt

var (
	epoch = time.Now()
	sink  atomic.Uint64 // results go here so that no work is optimised away
)

// allowParams admit every call: T = 1ns, and a burst far larger than any b.N.
func allowLimiter(b *testing.B, clock string) *atomiclimit.Limiter {
	return benchLimiter(b, clock, gcra.Every(time.Nanosecond), 1<<30)
}

// denyLimiter has spent its two tokens for the next two hours. (Burst 2,
// not 1: the coarse clock needs (B−1)·T ≥ the coarse tick.)
func denyLimiter(b *testing.B, clock string) *atomiclimit.Limiter {
	lim := benchLimiter(b, clock, gcra.Every(time.Hour), 2)
	if !lim.AllowN(epoch, 2) || lim.AllowN(epoch, 1) {
		b.Fatal("deny limiter not drained")
	}
	return lim
}

func benchLimiter(b *testing.B, clock string, l gcra.Limit, burst int) *atomiclimit.Limiter {
	var opts []atomiclimit.Option
	if clock == "coarse" {
		opts = append(opts, atomiclimit.WithCoarseClock())
	}
	lim, err := atomiclimit.NewRule(atomiclimit.GCRA(l, burst), opts...)
	if err != nil {
		b.Fatal(err)
	}
	return lim
}

// limiterLoop makes n calls on lim, the way users make them: Allow() for the
// clocks the limiter reads itself, AllowN(now, 1) for a fixed time. It
// returns how many were admitted.
func limiterLoop(lim *atomiclimit.Limiter, clock string, next func() bool) int {
	admitted := 0
	if clock == "fixed" {
		now := time.Now()
		for next() {
			if lim.AllowN(now, 1) {
				admitted++
			}
		}
		return admitted
	}
	for next() {
		if lim.Allow() {
			admitted++
		}
	}
	return admitted
}

// floorLoop does the floor's work once per next() on word, written out
// inline (no calls through function values, as in the limiter's loop):
//
//	path=allow        clock read, load, one CompareAndSwap attempt (which
//	                  may fail under contention, and then admits nothing)
//	path=allow-retry  the same, retried until the CompareAndSwap succeeds:
//	                  the least work that records one admission on a shared word
//	path=deny         clock read, load
//
// The coarse clock's read is one load of a shared word that another
// goroutine updates; the fixed clock reads nothing. It returns a sum of what
// it read, which callers publish once: a floor writes no shared memory that
// the limiter does not write.
func floorLoop(word *atomic.Uint64, coarse *timebase.Source, path, clock string, next func() bool) uint64 {
	var acc uint64
	read := func() uint64 { return 1 } // fixed; inlined
	for next() {
		var t uint64
		switch clock {
		case "monotonic":
			t = uint64(time.Since(epoch))
		case "coarse":
			t = uint64(coarse.Now()) // inlined: one load of the shared word
		default:
			t = read()
		}
		switch path {
		case "deny":
			acc += word.Load() + t
		case "allow":
			old := word.Load()
			word.CompareAndSwap(old, max(old, t)+1)
		case "allow-retry":
			for {
				old := word.Load()
				if word.CompareAndSwap(old, max(old, t)+1) {
					break
				}
			}
		}
	}
	return acc
}

var (
	clocks = []string{"monotonic", "coarse", "fixed"}
	paths  = []string{"allow", "deny"}
)

// counter turns b.N into the next() of a serial loop.
func counter(n int) func() bool {
	i := 0
	return func() bool { i++; return i <= n }
}

func BenchmarkSerial(b *testing.B) {
	for _, path := range paths {
		for _, clock := range clocks {
			b.Run(fmt.Sprintf("path=%s/clock=%s/impl=limiter", path, clock), func(b *testing.B) {
				lim := allowLimiter(b, clock)
				want := b.N
				if path == "deny" {
					lim, want = denyLimiter(b, clock), 0
				}
				b.ReportAllocs()
				b.ResetTimer()
				if got := limiterLoop(lim, clock, counter(b.N)); got != want {
					b.Fatalf("admitted %d of %d, want %d", got, b.N, want)
				}
			})
			b.Run(fmt.Sprintf("path=%s/clock=%s/impl=floor", path, clock), func(b *testing.B) {
				var word atomicbucket.PaddedBucket // the floor's word gets a line of its own too
				coarse := startCoarse(b)
				b.ReportAllocs()
				b.ResetTimer()
				sink.Add(floorLoop(wordOf(&word), coarse, path, clock, counter(b.N)))
			})
		}
	}
}

// BenchmarkParallel hits one limiter (one hot key) from every P. For the
// allow path it has two floors: impl=floor (one CompareAndSwap attempt) and
// impl=floor-retry (retried until it succeeds).
func BenchmarkParallel(b *testing.B) {
	for _, path := range paths {
		for _, clock := range clocks {
			b.Run(fmt.Sprintf("path=%s/clock=%s/impl=limiter", path, clock), func(b *testing.B) {
				lim := allowLimiter(b, clock)
				if path == "deny" {
					lim = denyLimiter(b, clock)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) { limiterLoop(lim, clock, pb.Next) })
			})
			floors := [][2]string{{"floor", path}}
			if path == "allow" {
				floors = append(floors, [2]string{"floor-retry", "allow-retry"})
			}
			for _, f := range floors {
				b.Run(fmt.Sprintf("path=%s/clock=%s/impl=%s", path, clock, f[0]), func(b *testing.B) {
					var word atomicbucket.PaddedBucket
					coarse := startCoarse(b)
					b.ReportAllocs()
					b.ResetTimer()
					b.RunParallel(func(pb *testing.PB) {
						sink.Add(floorLoop(wordOf(&word), coarse, f[1], clock, pb.Next))
					})
				})
			}
		}
	}
}

// wordOf returns the bucket's word as a plain atomic for the floors.
func wordOf(b *atomicbucket.PaddedBucket) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(b))
}

// startCoarse returns the process-wide coarse clock, held until the
// benchmark ends: the floor reads it exactly as a coarse limiter does.
func startCoarse(b *testing.B) *timebase.Source {
	src, release := timebase.Coarse()
	b.Cleanup(release)
	return &src
}
