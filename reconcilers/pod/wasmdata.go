package pod

import (
	"bytes"
	"errors"
	"slices"
)

// mergeGap is the longest run of zeros mergeDataSegments writes to join
// two data segments: linear memory starts zeroed, so writing zeros where
// there were none changes nothing but the bytes copied (and the pages
// touched, which is why the run is short).
const mergeGap = 256

// mergeDataSegments returns bin with its active data segments joined
// into as few as cover the same bytes, or bin itself when it cannot tell
// that doing so changes nothing.
//
// A Go wasip1 binary has tens of thousands of small data segments (the
// linker starts a new one after every run of zeros), and the runtime
// evaluates each segment's offset and copies it on every instantiation:
// about a third of a pod's start. Joining them is done once per image,
// before compiling. It is safe when every segment is active, in memory 0,
// at a constant offset, and no two overlap (then the order in which they
// are applied does not matter), and when the module has no data count
// section (without one, code cannot name a segment: memory.init and
// data.drop need it). Anything else is left as it came.
func mergeDataSegments(bin []byte) []byte {
	out, err := mergeData(bin)
	if err != nil {
		return bin
	}
	return out
}

var errKeep = errors.New("keep the module as it is")

type segment struct {
	off  uint32
	data []byte
}

// dataSection is a module's data section, parsed: its segments and where
// the section sits in the binary.
type dataSection struct {
	segs      []segment
	head, end int // the section's id byte, and the end of its contents
}

// parseData reads bin's data section, when every segment is one that
// mergeDataSegments and splitData may move: active, in memory 0, at a
// constant offset, in a module without a data count section.
func parseData(bin []byte) (*dataSection, error) {
	if len(bin) < 8 || !bytes.Equal(bin[:4], []byte("\x00asm")) {
		return nil, errKeep
	}
	type section struct {
		id         byte
		start, end int // the section's contents
		head       int // where its id byte is
	}
	var secs []section
	for i := 8; i < len(bin); {
		head := i
		id := bin[i]
		size, n, err := uleb(bin[i+1:])
		if err != nil || i+1+n+int(size) > len(bin) {
			return nil, errKeep
		}
		start := i + 1 + n
		secs = append(secs, section{id: id, start: start, end: start + int(size), head: head})
		i = start + int(size)
	}
	data := -1
	for j, s := range secs {
		switch s.id {
		case 12: // data count
			return nil, errKeep
		case 11:
			data = j
		}
	}
	if data < 0 {
		return nil, errKeep
	}
	b := bin[secs[data].start:secs[data].end]
	count, n, err := uleb(b)
	if err != nil {
		return nil, err
	}
	b = b[n:]
	// A segment takes at least 4 bytes: the count cannot ask for more.
	segs := make([]segment, 0, min(count, uint64(len(b)/4)))
	for range count {
		if len(b) < 3 || b[0] != 0 || b[1] != 0x41 { // active, memory 0, i32.const
			return nil, errKeep
		}
		off, n, err := sleb32(b[2:])
		if err != nil || len(b) < 2+n+1 || b[2+n] != 0x0b { // end
			return nil, errKeep
		}
		b = b[2+n+1:]
		size, n, err := uleb(b)
		if err != nil || uint64(len(b)-n) < size {
			return nil, errKeep
		}
		segs = append(segs, segment{off: uint32(off), data: b[n : n+int(size)]})
		b = b[n+int(size):]
	}
	if len(b) != 0 {
		return nil, errKeep
	}
	slices.SortStableFunc(segs, func(a, b segment) int {
		switch {
		case a.off < b.off:
			return -1
		case a.off > b.off:
			return 1
		}
		return 0
	})
	for i := 1; i < len(segs); i++ {
		if uint64(segs[i].off) < uint64(segs[i-1].off)+uint64(len(segs[i-1].data)) {
			return nil, errKeep // overlapping: order would matter
		}
	}
	return &dataSection{segs: segs, head: secs[data].head, end: secs[data].end}, nil
}

func mergeData(bin []byte) ([]byte, error) {
	ds, err := parseData(bin)
	if err != nil {
		return nil, err
	}
	segs := ds.segs
	if len(segs) < 2 {
		return nil, errKeep
	}
	var merged []segment
	total := uint64(0)
	for _, s := range segs {
		if total += uint64(len(s.data)) + mergeGap; total > maxExpansion(bin) {
			return nil, errKeep // the zeros written would cost more than the module
		}
		if len(merged) > 0 {
			last := &merged[len(merged)-1]
			end := uint64(last.off) + uint64(len(last.data))
			if uint64(s.off)-end <= mergeGap {
				last.data = append(last.data, make([]byte, uint64(s.off)-end)...)
				last.data = append(last.data, s.data...)
				continue
			}
		}
		merged = append(merged, segment{off: s.off, data: slices.Clone(s.data)})
	}
	return replaceData(bin, ds, merged), nil
}

// replaceData is bin with its data section holding segs instead.
func replaceData(bin []byte, ds *dataSection, segs []segment) []byte {
	var sec []byte
	sec = appendULEB(sec, uint64(len(segs)))
	for _, s := range segs {
		sec = append(sec, 0, 0x41)
		sec = appendSLEB(sec, int64(int32(s.off)))
		sec = append(sec, 0x0b)
		sec = appendULEB(sec, uint64(len(s.data)))
		sec = append(sec, s.data...)
	}
	out := make([]byte, 0, len(bin)-(ds.end-ds.head)+len(sec)+8)
	out = append(out, bin[:ds.head]...)
	out = append(out, 11)
	out = appendULEB(out, uint64(len(sec)))
	out = append(out, sec...)
	out = append(out, bin[ds.end:]...)
	return out
}

// splitData returns bin without its data segments, and the memory they
// would leave: the bytes from 0 to the end of the last segment, zeros
// between them. A module so split and started on memory that begins as
// image (imageAllocator) runs as bin would, with nothing to copy per
// instance. ok is false when bin cannot be split (see parseData).
func splitData(bin []byte) (stripped, image []byte, ok bool) {
	ds, err := parseData(bin)
	if err != nil || len(ds.segs) == 0 {
		return nil, nil, false
	}
	last := ds.segs[len(ds.segs)-1]
	if uint64(last.off)+uint64(len(last.data)) > maxExpansion(bin) {
		// A few bytes of module must not cost the node gigabytes: a
		// segment far into memory stays a segment.
		return nil, nil, false
	}
	if int(last.off)+len(last.data) == 0 {
		// Segments of no bytes leave no image to map (a mapping of
		// length 0 is an error): the module keeps its (empty) data.
		return nil, nil, false
	}
	image = make([]byte, int(last.off)+len(last.data))
	for _, s := range ds.segs {
		copy(image[s.off:], s.data)
	}
	return replaceData(bin, ds, nil), image, true
}

// maxExpansion bounds the bytes the node builds from bin's data (an
// image, merged segments): twice the module and 16 MiB, which a compiler's
// data (a Go program's, 1 MiB of stack before a Rust program's) stays
// well within.
func maxExpansion(bin []byte) uint64 { return 2*uint64(len(bin)) + 16<<20 }

func uleb(b []byte) (uint64, int, error) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1, nil
		}
	}
	return 0, 0, errKeep
}

func sleb32(b []byte) (int32, int, error) {
	var v int64
	for i := 0; i < len(b) && i < 5; i++ {
		v |= int64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			if shift := 7 * (i + 1); shift < 64 && b[i]&0x40 != 0 {
				v |= -1 << shift
			}
			return int32(v), i + 1, nil
		}
	}
	return 0, 0, errKeep
}

func appendULEB(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
