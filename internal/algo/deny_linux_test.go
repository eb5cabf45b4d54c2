//go:build linux && !race

package algo_test

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/atomiclimit/atomiclimit/gcra"
	"github.com/atomiclimit/atomiclimit/internal/algo"
	"github.com/atomiclimit/atomiclimit/internal/window"
)

// A denial writes nothing, not even the value a word already holds: every
// kind, alone and in bands, is drained, its words are made read-only (a
// page of their own, mprotect), and denied requests are decided on them
// (Admit, Admits, Decide and Take; now and stale times; n too large and
// negative; a retired state). Any store or CompareAndSwap to a read-only
// page faults, whether it would change the word or not, and the fault is a
// recovered panic (debug.SetPanicOnFault) that fails the test.
func TestDenialsWriteNothing(t *testing.T) {
	rolling := func(t testing.TB) algo.Algorithm {
		p, err := window.NewRollingParams(3, time.Hour, time.Minute, 0, 0)
		require.NoError(t, err)
		return window.RollingAlgorithm(p)
	}
	anchored := func(t testing.TB) algo.Algorithm {
		p, err := window.NewAnchoredParams(3, time.Hour)
		require.NoError(t, err)
		return window.AnchoredAlgorithm(p)
	}
	kinds := map[string]func(testing.TB) []algo.Algorithm{
		"gcra":     func(t testing.TB) []algo.Algorithm { return []algo.Algorithm{gcraBand(t, gcra.Every(time.Hour), 3)} },
		"fixed":    func(t testing.TB) []algo.Algorithm { return []algo.Algorithm{fixedBand(t, 3, time.Hour)} },
		"anchored": func(t testing.TB) []algo.Algorithm { return []algo.Algorithm{anchored(t)} },
		"counter":  func(t testing.TB) []algo.Algorithm { return []algo.Algorithm{counterBand(t, 3, time.Hour)} },
		"log":      func(t testing.TB) []algo.Algorithm { return []algo.Algorithm{logBand(t, 3, time.Hour)} },
		"rolling":  func(t testing.TB) []algo.Algorithm { return []algo.Algorithm{rolling(t)} },
		"bands": func(t testing.TB) []algo.Algorithm {
			return []algo.Algorithm{gcraBand(t, gcra.Every(time.Hour), 5), fixedBand(t, 4, time.Hour), counterBand(t, 3, time.Hour)}
		},
		"bands-wide": func(t testing.TB) []algo.Algorithm {
			return []algo.Algorithm{fixedBand(t, 5, time.Hour), rolling(t), logBand(t, 4, time.Hour)}
		},
		// The band that denies is past the ones a plan holds: its check
		// alone decides, before any band is taken.
		"bands-beyond-plan": func(t testing.TB) []algo.Algorithm {
			return []algo.Algorithm{fixedBand(t, 100, time.Hour), counterBand(t, 100, time.Hour), gcraBand(t, gcra.Every(time.Millisecond), 100),
				fixedBand(t, 90, time.Hour), counterBand(t, 80, time.Hour), fixedBand(t, 3, time.Hour)}
		},
	}
	for name, algs := range kinds {
		t.Run("kind="+name, func(t *testing.T) {
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true)) // this goroutine's
			set, err := algo.NewSet(zeroClock{}, algs(t)...)
			require.NoError(t, err)
			page := readOnlyPage(t)
			words := unsafe.Slice((*atomic.Uint64)(unsafe.Pointer(&page[0])), set.Words())
			st := algo.State{Word: &words[0], Rest: words[1:]}
			floors := make([]atomic.Uint64, set.Len())
			set.Init(st, floors)
			now := int64(30 * time.Minute)
			for set.Admit(st, now, 1) {
			}
			protect(t, page, syscall.PROT_READ)
			defer protect(t, page, syscall.PROT_READ|syscall.PROT_WRITE)
			noWrite := func(what string, f func()) {
				t.Helper()
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s faulted on a read-only state word (a write): %v", what, r)
					}
				}()
				f()
			}
			deny := func(what string, f func() bool) {
				t.Helper()
				noWrite(what, func() {
					if f() {
						t.Errorf("%s was admitted", what)
					}
				})
			}
			for _, at := range []int64{now, now - int64(time.Minute), 0} {
				for _, n := range []int{1, 2, 1000, -1} {
					what := fmt.Sprintf("n %d at %v", n, time.Duration(at))
					deny("Admit "+what, func() bool { return set.Admit(st, at, n) })
					deny("Decide "+what, func() bool { d, _ := set.Decide(st, at, n, false); return d.Allowed })
					deny("Take "+what, func() bool { d, _ := set.Take(st, at, n); return d.Allowed })
					for i := range set.Len() { // a band may admit: it is checked, not taken
						noWrite(fmt.Sprintf("band %d Admits %s", i, what), func() { set.Band(i).Admits(set.Sub(st, i), at, n) })
					}
				}
			}
			// Retired: every request is denied, without a write.
			protect(t, page, syscall.PROT_READ|syscall.PROT_WRITE)
			require.True(t, retire(set, st), "retire the state")
			protect(t, page, syscall.PROT_READ)
			deny("Admit on a retired state", func() bool { return set.Admit(st, now+int64(time.Hour), 1) })
			deny("Decide on a retired state", func() bool { d, _ := set.Decide(st, now+int64(time.Hour), 1, false); return d.Allowed })
		})
	}
}

// The GCRA bucket's own loops (the limiters' fast path), as
// TestDenialsWriteNothing does for the algorithms.
func TestBucketDenialsWriteNothing(t *testing.T) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	p, err := gcra.NewParams(gcra.Every(time.Hour), 3)
	require.NoError(t, err)
	page := readOnlyPage(t)
	b := algo.BucketOf((*atomic.Uint64)(unsafe.Pointer(&page[0])))
	now := int64(30 * time.Minute)
	for b.AllowN(&p, now, 1) {
	}
	protect(t, page, syscall.PROT_READ)
	defer protect(t, page, syscall.PROT_READ|syscall.PROT_WRITE)
	for _, at := range []int64{now, now - int64(time.Minute), 0} {
		for _, n := range []int{1, 2, 1000, -1} {
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("n %d at %v faulted on a read-only bucket (a write): %v", n, time.Duration(at), r)
					}
				}()
				d, _ := b.TakeN(&p, at, n)
				_, _, ok := b.ReserveN(&p, at, n, 0, nil)
				if b.AllowN(&p, at, n) || d.Allowed || ok || b.PeekN(&p, at, n).Allowed {
					t.Errorf("n %d at %v admitted", n, time.Duration(at))
				}
			}()
		}
	}
}

// retire retires st whatever its state: as the sweep does for a state
// idle at a time far enough ahead.
func retire(set *algo.Set, st algo.State) bool {
	floors := make([]atomic.Uint64, set.Len())
	return set.RetireIdle(st, floors, int64(100*time.Hour))
}

// readOnlyPage maps a page of its own, writable until protect says
// otherwise, and unmaps it when the test ends.
func readOnlyPage(t *testing.T) []byte {
	page, err := syscall.Mmap(-1, 0, syscall.Getpagesize(), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Munmap(page) })
	return page
}

func protect(t *testing.T, page []byte, prot int) {
	t.Helper()
	require.NoError(t, syscall.Mprotect(page, prot))
}
