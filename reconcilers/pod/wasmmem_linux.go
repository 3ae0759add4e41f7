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
type mmapAllocator struct{ pool *memoryPool }

func (a *mmapAllocator) Allocate(_, max uint64) experimental.LinearMemory {
	return &mmapMemory{max: max, pool: a.pool}
}

func memoryAllocator() experimental.MemoryAllocator { return &mmapAllocator{pool: &memoryPool{}} }

// Close unmaps the mappings the allocator kept; memories in use keep
// theirs.
func (a *mmapAllocator) Close() error {
	a.pool.close()
	return nil
}

type mmapMemory struct {
	image     *imageAllocator // the initial contents, nil for zeros
	pool      *memoryPool     // where a released first reservation goes
	max       uint64
	reserved  []byte // the whole mapping
	committed uint64 // bytes readable and writable at its start
	moved     bool   // reserved is a second reservation (no image mapped)
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
		first := pageRound(min(max(m.max, size), reserveFirst))
		if m.image != nil && m.image.size > pageRound(size) {
			return nil // the host checked that the image fits the memory's minimum
		}
		if r, committed, ok := m.pool.get(first); ok {
			// A released instance's mapping, reset to how a new one
			// starts (memoryPool.put).
			m.reserved, m.committed = r, committed
		} else if !m.reserve(first) {
			return nil
		} else if m.image != nil && m.image.size > 0 {
			// The module's initial memory, copy-on-write: pages it only
			// reads are the page cache's, shared by every instance.
			// (Unmapped, not pooled, when it fails: a pooled mapping
			// holds the image.)
			if m.image.size > uint64(len(m.reserved)) || m.image.mapInto(m.reserved[:m.image.size]) != nil {
				_ = syscall.Munmap(m.reserved)
				m.reserved = nil
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
		m.moved = true
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
		if m.moved || !m.pool.put(m.reserved, m.committed) {
			_ = syscall.Munmap(m.reserved)
		}
		m.reserved, m.committed = nil, 0
	}
}

// poolSize bounds the released mappings a pool keeps: enough for the
// modules that start while others end on a busy node, few enough that
// an idle node holds little address space.
const poolSize = 64

// warmSize (a variable for tests) bounds the kept mappings whose pages stay resident (wiped in
// place, see memoryPool); the others hold no memory.
var warmSize = 16

// memoryPool keeps released first reservations of one allocator's
// memories, reset, for its next instances: a pod start then makes no
// mapping and a pod's end removes none. Mapping and unmapping change the
// process's address space under a lock every page fault of every other
// running module waits for, and unmapping tears down page tables a
// reused mapping keeps.
//
// A mapping is reset in one of two ways, each leaving it as a new
// mapping reads (the image, then zeros), so that an instance never sees
// what an earlier one wrote:
//
//   - wiped in place (warm, up to warmSize kept): the kernel's page map
//     (/proc/self/pagemap) names each page the instance made present or
//     that was swapped out; such a page past the image is cleared, one
//     of the image that is no longer the image file's (written, so a
//     private copy) is copied over from the image file (a shared,
//     read-only mapping of it), and a page never touched is left as it
//     is (it reads as zeros, or the image). Pages stay resident, so the
//     next instance does not fault them in again (about 150 faults, most
//     of a Go guest's, each costing more than clearing a page), and the
//     wipe changes no mapping (no system call but the page map's read);
//   - dropped (cold): madvise(MADV_DONTNEED) over everything committed
//     frees every page the instance touched. Used past warmSize, and
//     whenever the page map cannot be read or did not read as expected
//     when this process first tried it (pagemapUsable).
//
// Safe for concurrent use.
type memoryPool struct {
	mu      sync.Mutex
	warm    []pooled // wiped in place, pages resident
	cold    []pooled // dropped, no memory
	warming int      // wipes in progress, each to be kept warm
	closed  bool
	// image is the bytes at the start of each mapping mapped from the
	// allocator's image file; fileFlag says the page map told that
	// file's pages from private copies when the image was made.
	image    uint64
	fileFlag bool
	// pristine maps the image file shared and read-only, for wipes to
	// copy from; imageMu keeps close from unmapping it under a wipe.
	imageMu  sync.RWMutex
	pristine []byte
}

type pooled struct {
	reserved  []byte
	committed uint64
}

// get takes a reset mapping of size bytes, if one is kept, a warm one
// first.
func (p *memoryPool) get(size uint64) ([]byte, uint64, bool) {
	if p == nil {
		return nil, 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, list := range []*[]pooled{&p.warm, &p.cold} {
		l := *list
		for i := len(l) - 1; i >= 0; i-- {
			if f := l[i]; uint64(len(f.reserved)) == size {
				*list = append(l[:i], l[i+1:]...)
				return f.reserved, f.committed, true
			}
		}
	}
	return nil, 0, false
}

// put resets a released mapping and keeps it; false when it was not
// kept (the pool is full or closed, or the reset failed): the caller
// unmaps it.
func (p *memoryPool) put(reserved []byte, committed uint64) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	full := p.closed || len(p.warm)+len(p.cold) >= poolSize
	// A wipe in place takes its place among the warm ones before it
	// starts, so that concurrent releases keep at most warmSize.
	slot := !full && len(p.warm)+p.warming < warmSize && pagemapUsable()
	if slot {
		p.warming++
	}
	p.mu.Unlock()
	if full {
		return false
	}
	warm := slot && p.wipe(reserved[:committed])
	reset := warm || committed == 0 || syscall.Madvise(reserved[:committed], syscall.MADV_DONTNEED) == nil
	p.mu.Lock()
	defer p.mu.Unlock()
	if slot {
		p.warming--
	}
	if !reset || p.closed || len(p.warm)+len(p.cold) >= poolSize {
		return false
	}
	if warm {
		p.warm = append(p.warm, pooled{reserved, committed})
	} else {
		p.cold = append(p.cold, pooled{reserved, committed})
	}
	return true
}

// wipe wipes b in place, if the pool's image allows it (wipeInPlace).
func (p *memoryPool) wipe(b []byte) bool {
	p.imageMu.RLock()
	defer p.imageMu.RUnlock()
	if p.image > 0 && (!p.fileFlag || uint64(len(p.pristine)) != p.image) {
		return false
	}
	return wipeInPlace(b, p.pristine) == nil
}

// close unmaps the kept mappings and keeps no more.
func (p *memoryPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, f := range append(p.warm, p.cold...) {
		_ = syscall.Munmap(f.reserved)
	}
	p.warm, p.cold = nil, nil
	p.imageMu.Lock()
	defer p.imageMu.Unlock()
	if p.pristine != nil {
		_ = syscall.Munmap(p.pristine)
		p.pristine = nil
	}
}

// imageAllocator backs memories that begin as a module's data segments
// left them (splitData's image): the image is a file, unlinked, mapped
// privately at the start of each memory, so an instance copies nothing
// at start and shares the pages it never writes with every other.
type imageAllocator struct {
	f    *os.File
	size uint64 // the image's length, whole pages
	pool memoryPool

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
	a := &imageAllocator{f: f, size: size}
	a.pool.image = size
	if size > 0 && fileFlagReliable(f) {
		// Without it memories are never wiped in place, only dropped.
		if b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED); err == nil {
			a.pool.pristine, a.pool.fileFlag = b, true
		}
	}
	return a, nil
}

// Allocate implements experimental.MemoryAllocator.
func (a *imageAllocator) Allocate(_, max uint64) experimental.LinearMemory {
	return &mmapMemory{image: a, max: max, pool: &a.pool}
}

// Close releases the image (memories mapping it keep their pages).
func (a *imageAllocator) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	a.pool.close()
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

// kept is how many mappings the pool holds.
func (p *memoryPool) kept() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.warm) + len(p.cold)
}
