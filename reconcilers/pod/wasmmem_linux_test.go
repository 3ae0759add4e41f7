package pod

import "testing"

// Memory backed by a mapping grows in place, and moves once, keeping its
// contents, when it outgrows its first reservation.
func TestMappedMemoryGrowsAndMoves(t *testing.T) {
	defer func(v uint64) { reserveFirst = v }(reserveFirst)
	reserveFirst = 64 << 10
	m := memoryAllocator().Allocate(0, 1<<20)
	defer m.Free()
	b := m.Reallocate(wasmPage)
	if len(b) != wasmPage || b[0] != 0 {
		t.Fatalf("first: %d bytes", len(b))
	}
	b[0], b[wasmPage-1] = 1, 2
	b = m.Reallocate(3 * wasmPage) // past the 64 KiB reservation
	if len(b) != 3*wasmPage || b[0] != 1 || b[wasmPage-1] != 2 || b[3*wasmPage-1] != 0 {
		t.Fatalf("after moving: %d bytes, %d %d", len(b), b[0], b[wasmPage-1])
	}
	b[3*wasmPage-1] = 3
	if m.Reallocate(2<<20) != nil {
		t.Fatal("grew past its maximum")
	}
}
