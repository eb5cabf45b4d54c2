package algo

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Raise only ever raises, and concurrent raises end at the largest value.
func TestRaise(t *testing.T) {
	var f atomic.Uint64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range uint64(1000) {
				Raise(&f, i*16+uint64(g))
			}
		}()
	}
	wg.Wait()
	if got := f.Load(); got != 999*16+15 {
		t.Fatalf("floor %d, want %d", got, 999*16+15)
	}
	var s atomic.Int64
	Raise(&s, 5)
	Raise(&s, 3)
	if s.Load() != 5 {
		t.Fatalf("floor moved back to %d", s.Load())
	}
}
