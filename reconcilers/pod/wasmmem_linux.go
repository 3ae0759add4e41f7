package pod

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
)

// reserveFirst bounds the address space one module's memory reserves up
// front; a module that grows past it is moved once to a reservation of
// its maximum. (A variable for tests.)
var reserveFirst uint64 = 1 << 30

// mmapAllocator backs each module's linear memory with its own anonymous
// mapping, outside the Go heap: address space is reserved for the
// memory's maximum (up to reserveFirst) and pages are made accessible as
// the module grows, so memory.grow neither copies nor zeroes (fresh pages
// are zero), and a pod's memory costs the Go collector nothing. Free
// returns it to the kernel at once.
type mmapAllocator struct{}

func (mmapAllocator) Allocate(_, max uint64) experimental.LinearMemory {
	return &mmapMemory{max: max}
}

func memoryAllocator() experimental.MemoryAllocator { return mmapAllocator{} }

type mmapMemory struct {
	image     *imageAllocator // the initial contents, nil for zeros
	max       uint64
	reserved  []byte // the whole mapping
	committed uint64 // bytes readable and writable at its start
}

func pageRound(n uint64) uint64 {
	p := uint64(syscall.Getpagesize())
	return (n + p - 1) / p * p
}

func (m *mmapMemory) reserve(size uint64) bool {
	b, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return false
	}
	m.reserved = b
	return true
}

// Reallocate implements experimental.LinearMemory.
func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size == 0 && m.reserved == nil {
		return []byte{}
	}
	if size > m.max {
		return nil
	}
	if m.reserved == nil {
		if !m.reserve(pageRound(min(max(m.max, size), reserveFirst))) {
			return nil
		}
		if m.image != nil && m.image.size > 0 {
			// The module's initial memory, copy-on-write: pages it only
			// reads are the page cache's, shared by every instance. (The
			// host checked that the image fits the memory's minimum.)
			if m.image.size > pageRound(size) || m.image.size > uint64(len(m.reserved)) {
				m.Free()
				return nil
			}
			if err := m.image.mapInto(m.reserved[:m.image.size]); err != nil {
				m.Free()
				return nil
			}
			m.committed = m.image.size
		}
	}
	if size > uint64(len(m.reserved)) {
		// Past the first reservation: move to one of the maximum.
		old, committed := m.reserved, m.committed
		if !m.reserve(pageRound(m.max)) {
			m.reserved = old
			return nil
		}
		if err := syscall.Mprotect(m.reserved[:committed], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			_ = syscall.Munmap(m.reserved)
			m.reserved = old
			return nil
		}
		copy(m.reserved, old[:committed])
		_ = syscall.Munmap(old)
	}
	if want := pageRound(size); want > m.committed {
		if err := syscall.Mprotect(m.reserved[m.committed:want], syscall.PROT_READ|syscall.PROT_WRITE); err != nil {
			return nil
		}
		m.committed = want
	}
	return m.reserved[:size:size]
}

// Free implements experimental.LinearMemory.
func (m *mmapMemory) Free() {
	if m.reserved != nil {
		_ = syscall.Munmap(m.reserved)
		m.reserved, m.committed = nil, 0
	}
}

// imageAllocator backs memories that begin as a module's data segments
// left them (splitData's image): the image is a file, unlinked, mapped
// privately at the start of each memory, so an instance copies nothing
// at start and shares the pages it never writes with every other.
type imageAllocator struct {
	f    *os.File
	size uint64 // the image's length, whole pages

	// mu keeps Close from closing the file under a memory mapping it: an
	// agent that stops closes its images while pods may still be starting.
	mu     sync.RWMutex
	closed bool
}

// newImageAllocator writes image to an unlinked file in dir.
func newImageAllocator(dir string, image []byte) (*imageAllocator, error) {
	f, err := os.CreateTemp(dir, ".memory-image-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name())
	size := pageRound(uint64(len(image)))
	padded := append(image, make([]byte, size-uint64(len(image)))...)
	if _, err := f.Write(padded); err != nil {
		f.Close()
		return nil, err
	}
	return &imageAllocator{f: f, size: size}, nil
}

// Allocate implements experimental.MemoryAllocator.
func (a *imageAllocator) Allocate(_, max uint64) experimental.LinearMemory {
	return &mmapMemory{image: a, max: max}
}

// Close releases the image (memories mapping it keep their pages).
func (a *imageAllocator) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	return a.f.Close()
}

// mapInto maps the image over b, unless the allocator is closed.
func (a *imageAllocator) mapInto(b []byte) error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return os.ErrClosed
	}
	return mapFixed(b, a.f.Fd())
}

// mapFixed maps fd privately, readable and writable, over b (which lies
// in a mapping of this package's).
func mapFixed(b []byte, fd uintptr) error {
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	r, _, errno := syscall.Syscall6(syscall.SYS_MMAP, addr, uintptr(len(b)),
		syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_FIXED, fd, 0)
	switch {
	case errno != 0:
		return errno
	case r != addr:
		return errors.New("mapped elsewhere")
	}
	return nil
}
