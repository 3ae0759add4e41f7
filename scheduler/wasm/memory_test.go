package wasm

import (
	"bytes"
	"testing"
)

// A memory grown past its capacity keeps its contents and shows zeros
// where it grew, within its capacity as past it; it never passes its
// maximum nor shrinks; its capacity doubles, so growing a page at a time
// copies it rarely.
func TestHeapMemoryGrows(t *testing.T) {
	const page = 1 << 16
	m := heapMemories.Allocate(page, 64*page)
	buf := m.Reallocate(page)
	if len(buf) != page {
		t.Fatalf("first allocation is %d bytes", len(buf))
	}
	copies := 0
	for pages := 2; pages <= 64; pages++ {
		// The guest writes all it has, then grows by a page.
		for i := range buf {
			buf[i] = byte(pages)
		}
		before := &buf[0]
		grown := m.Reallocate(uint64(pages * page))
		if len(grown) != pages*page {
			t.Fatalf("grown to %d bytes, want %d", len(grown), pages*page)
		}
		if &grown[0] != before {
			copies++
		}
		if !bytes.Equal(grown[:len(buf)], bytes.Repeat([]byte{byte(pages)}, len(buf))) {
			t.Fatalf("at %d pages the old contents changed", pages)
		}
		if !bytes.Equal(grown[len(buf):], make([]byte, page)) {
			t.Fatalf("at %d pages the new page is not zero", pages)
		}
		buf = grown
	}
	if copies > 7 {
		t.Fatalf("growing a page at a time to 64 pages copied the memory %d times", copies)
	}
	if m.Reallocate(65*page) != nil {
		t.Fatal("grew past the maximum")
	}
	if m.Reallocate(32*page) != nil {
		t.Fatal("shrank")
	}
	m.Free()
}
