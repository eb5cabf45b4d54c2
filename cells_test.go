package atomiclimit

import (
	"testing"
	"unsafe"
)

// TestFloorsApart: the floors, which retirements write, are at least a cache
// line away from the fields decisions read, whatever the alignment.
func TestFloorsApart(t *testing.T) {
	var g cells
	lastRead := unsafe.Offsetof(g.tiers) + unsafe.Sizeof(g.tiers)
	if d := unsafe.Offsetof(g.floors) - lastRead; d < cacheLine {
		t.Errorf("floors are %d bytes after the read fields, want ≥ %d", d, cacheLine)
	}
}
