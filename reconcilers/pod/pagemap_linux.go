package pod

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// Flags of a page's entry in /proc/PID/pagemap (the kernel's
// Documentation/admin-guide/mm/pagemap.rst); readable without privileges.
const (
	pmPresent = 1 << 63 // in memory
	pmSwapped = 1 << 62 // swapped out (or being migrated)
	pmFile    = 1 << 61 // a page of a file's page cache (or shared anonymous)
)

// pagemap is this process's page map, nil when it cannot be read or did
// not report an anonymous page written and one untouched as such.
var pagemap = sync.OnceValue(func() *os.File {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return nil
	}
	ok := func() bool {
		ps := syscall.Getpagesize()
		b, err := syscall.Mmap(-1, 0, 2*ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			return false
		}
		defer syscall.Munmap(b)
		b[0] = 1
		var e [2]uint64
		if pageFlags(f, b, e[:]) != nil {
			return false
		}
		return e[0]&(pmPresent|pmFile) == pmPresent && e[1]&(pmPresent|pmSwapped) == 0
	}()
	if !ok {
		f.Close()
		return nil
	}
	return f
})

// pagemapUsable says memories can be wiped in place.
func pagemapUsable() bool { return pagemap() != nil }

// pageFlags reads the page map's entries of the pages b starts on, one
// per element of out.
func pageFlags(f *os.File, b []byte, out []uint64) error {
	ps := uintptr(syscall.Getpagesize())
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(out))), len(out)*8)
	n, err := f.ReadAt(raw, int64(addr/ps*8))
	if n == len(raw) {
		return nil
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// fileFlagReliable says the page map tells a privately mapped page of f
// (the first, which must exist) that was only read from one that was
// written: the first must be the file's, the second a private copy.
func fileFlagReliable(f *os.File) bool {
	pm := pagemap()
	if pm == nil {
		return false
	}
	ps := syscall.Getpagesize()
	b, err := syscall.Mmap(int(f.Fd()), 0, ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	if err != nil {
		return false
	}
	defer syscall.Munmap(b)
	var read, written [1]uint64
	v := b[0]
	if pageFlags(pm, b, read[:]) != nil {
		return false
	}
	b[0] = v // a write, so a private copy
	if pageFlags(pm, b, written[:]) != nil {
		return false
	}
	return read[0]&(pmPresent|pmFile) == pmPresent|pmFile && written[0]&(pmPresent|pmFile) == pmPresent
}

var errNotPages = errors.New("not whole pages")

// wipeInPlace resets b, a released memory's committed pages whose first
// len(image) bytes are a private mapping of the image file (image maps
// the same file, read-only), to what a new mapping reads, keeping every
// page resident: each page the page map shows present or swapped is
// either cleared (past the image) or, if it is no longer the file's page
// (the instance wrote it), copied over from image. A page neither
// present nor swapped was never touched: it reads as the file, or zeros.
// On an error b may be partly wiped; the caller then drops all of it.
func wipeInPlace(b []byte, pristine []byte) error {
	image := uint64(len(pristine))
	pm := pagemap()
	if pm == nil {
		return os.ErrNotExist
	}
	ps := uint64(syscall.Getpagesize())
	if uint64(len(b))%ps != 0 || image%ps != 0 || image > uint64(len(b)) {
		return errNotPages
	}
	const (
		keep = iota
		zero
		restore
	)
	runAct, runFrom := keep, uint64(0)
	flush := func(to uint64) {
		switch runAct {
		case zero:
			clear(b[runFrom:to])
		case restore:
			copy(b[runFrom:to], pristine[runFrom:to])
		}
	}
	var entries [512]uint64
	for first := uint64(0); first < uint64(len(b)); first += uint64(len(entries)) * ps {
		chunk := entries[:min(uint64(len(entries)), (uint64(len(b))-first)/ps)]
		if err := pageFlags(pm, b[first:], chunk); err != nil {
			return err
		}
		for i, e := range chunk {
			off := first + uint64(i)*ps
			act := keep
			switch {
			case off < image && (e&pmSwapped != 0 || e&(pmPresent|pmFile) == pmPresent):
				act = restore
			case off >= image && e&(pmPresent|pmSwapped) != 0:
				act = zero
			}
			if act != runAct {
				flush(off)
				runAct, runFrom = act, off
			}
		}
	}
	flush(uint64(len(b)))
	return nil
}
