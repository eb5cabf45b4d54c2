package window

import (
	"math"
	"testing"
)

// The packed head says what the count k of admissions says: slot k mod N,
// the slot before it, and the parity of lap ⌊k/N⌋ + 1; it moves forward at
// every admission, from the first turns to the last ones before it wraps.
func TestLogHeadCountsAsK(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 5, 8, 1000, 1 << 10, MaxLogLimit} {
		b := headBits(n)
		check := func(h logHead, k uint64) {
			t.Helper()
			if h.slot(b) != k%n || h.back(b, n) != (k+n-1)%n || h.lap(b) != (k/n+1)<<63 {
				t.Fatalf("N %d, k %d: head %#x has slot %d, back %d, lap %#x; want %d, %d, %#x",
					n, k, uint64(h), h.slot(b), h.back(b, n), h.lap(b), k%n, (k+n-1)%n, (k/n+1)<<63)
			}
		}
		h := logHead(0)
		for k := range 3*n + 2 {
			check(h, k)
			next := h.next(b, n)
			if next <= h {
				t.Fatalf("N %d, k %d: head %#x → %#x does not move forward", n, k, uint64(h), uint64(next))
			}
			h = next
		}
		// The last turns: k near n·2^(64−b), where the turn field is full.
		turns := uint64(math.MaxUint64) >> b
		for q := turns - 2; q < turns; q++ {
			h := logHead(q<<b | (n - 1))
			if next := h.next(b, n); next <= h {
				t.Fatalf("N %d, turn %d: head %#x → %#x does not move forward", n, q, uint64(h), uint64(next))
			}
		}
	}
}
