package wasm

import "github.com/tetratelabs/wazero/experimental"

// heapMemory backs a guest's linear memory in the Go heap, as wazero's own
// memories are, but doubles its capacity (up to the memory's maximum)
// when the guest grows past it. A Go-compiled guest grows its memory a
// few pages at a time as its heap grows (decoding every node for the
// first time, say), and wazero's own memory grows by appending, which
// copies the whole memory each time the capacity runs out, about every
// quarter of its size: a guest's first minutes copied some five times its
// final size. Doubling copies at most its size once more.
//
// The guest only ever sees memory[:size]: what lies past it was zeroed
// when allocated and is never written, so a later Reallocate within the
// capacity shows zeros, as a new page must. Old buffers stay valid (the
// Go heap frees them when nothing holds them), as with wazero's own
// memory. Shared memories, whose address must not change, need the
// threads feature, which the runtime does not enable.
type heapMemory struct {
	buf []byte
	max uint64
}

// heapMemories is the experimental.MemoryAllocator of heapMemory.
var heapMemories experimental.MemoryAllocator = experimental.MemoryAllocatorFunc(func(capacity, max uint64) experimental.LinearMemory {
	return &heapMemory{buf: make([]byte, 0, min(capacity, max)), max: max}
})

// Reallocate implements experimental.LinearMemory.
func (m *heapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		if size < uint64(len(m.buf)) {
			// wazero never shrinks a memory; refuse rather than hand
			// back written bytes as new ones later.
			return nil
		}
		m.buf = m.buf[:size]
		return m.buf
	}
	grown := make([]byte, size, max(size, min(2*uint64(cap(m.buf)), m.max)))
	copy(grown, m.buf)
	m.buf = grown
	return grown
}

// Free implements experimental.LinearMemory.
func (m *heapMemory) Free() { m.buf = nil }
