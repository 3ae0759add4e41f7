// Package wasmcheck walks a WebAssembly module's structure before the
// runtime decodes it, and refuses a module whose declared sizes are out of
// proportion to its bytes.
//
// The runtime's decoder sizes its tables by the counts a module declares:
// a 23-byte module whose element section declares three billion entries
// makes it allocate tens of gigabytes at once, and the process dies of it
// (a Go out-of-memory error cannot be recovered). jetplane decodes modules
// that other people wrote — pod images on every node, scheduler plugins —
// so every one passes Bounded first. Bounded reads every vector a decoder
// would size and holds each count to the bytes left in its section (every
// entry takes at least one byte), each string to the bytes left, the
// locals of one function and the initial size of a table to fixed limits;
// a valid module meets all of them. It does not validate instructions:
// what it lets through, the runtime decodes in memory proportional to the
// module's size and validates itself.
package wasmcheck

import (
	"errors"
	"fmt"
)

const (
	// MaxLocals bounds the locals one function declares. The decoder
	// allocates one byte per local before it reads the body; compilers
	// stay far below (Go's and TinyGo's functions declare tens).
	MaxLocals = 50_000
	// MaxTableMin bounds a table's initial size, which instantiation
	// allocates at once (8 bytes an entry) outside the pod's memory
	// limit. Go modules need a few thousand entries.
	MaxTableMin = 1 << 20
)

var sectionNames = [...]string{"custom", "type", "import", "function", "table", "memory", "global",
	"export", "start", "element", "code", "data", "data count", "tag"}

// Bounded reports the first declaration of module that is out of
// proportion to its bytes, naming the section and the offset.
func Bounded(module []byte) (err error) {
	w := &walker{b: module}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			err = f.err
		}
	}()
	if len(module) < 8 || string(module[:4]) != "\x00asm" {
		return errors.New("not a WebAssembly module: it does not start with \\0asm")
	}
	w.pos = 8
	for w.pos < len(w.b) {
		start := w.pos
		id := w.byte()
		size := int(w.u32())
		if size > len(w.b)-w.pos {
			w.failf("section %s at offset %d declares %d bytes, but %d are left", name(id), start, size, len(w.b)-w.pos)
		}
		s := &walker{b: w.b[:w.pos+size], pos: w.pos, section: name(id)}
		s.walk(id)
		w.pos += size
	}
	return nil
}

func name(id byte) string {
	if int(id) < len(sectionNames) {
		return sectionNames[id]
	}
	return fmt.Sprintf("#%d", id)
}

type failure struct{ err error }

// walker reads b from pos; b ends where the current section ends, so
// "left" is what the section has left.
type walker struct {
	b       []byte
	pos     int
	section string
}

func (w *walker) failf(format string, args ...any) {
	panic(failure{fmt.Errorf("malformed WebAssembly module: "+format, args...)})
}

func (w *walker) left() int { return len(w.b) - w.pos }

func (w *walker) byte() byte {
	if w.pos >= len(w.b) {
		w.failf("section %s ends early at offset %d", w.section, w.pos)
	}
	c := w.b[w.pos]
	w.pos++
	return c
}

func (w *walker) skip(n int) {
	if n < 0 || n > w.left() {
		w.failf("section %s at offset %d declares %d bytes, but %d are left", w.section, w.pos, n, w.left())
	}
	w.pos += n
}

// leb reads an unsigned LEB128 number of at most max bytes.
func (w *walker) leb(max int) uint64 {
	var v uint64
	for i := 0; i < max; i++ {
		c := w.byte()
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v
		}
	}
	w.failf("section %s: a number at offset %d runs over %d bytes", w.section, w.pos, max)
	return 0
}

func (w *walker) u32() uint32 { return uint32(w.leb(5)) }

// count reads a vector's length, at most one entry per byte left.
func (w *walker) count(what string) int {
	at := w.pos
	n := w.leb(5)
	if n > uint64(w.left()) {
		w.failf("section %s at offset %d declares %d %s in %d bytes", w.section, at, n, what, w.left())
	}
	return int(n)
}

func (w *walker) name() string {
	n := w.count("bytes of a name")
	s := string(w.b[w.pos : w.pos+n])
	w.pos += n
	return s
}

func (w *walker) walk(id byte) {
	switch id {
	case 0: // custom: only "name" is decoded beyond its bytes
		if w.name() == "name" {
			w.names()
		}
		w.pos = len(w.b)
	case 1: // type
		for range w.count("types") {
			if form := w.byte(); form != 0x60 {
				w.failf("section type at offset %d: type form %#x is not a function type", w.pos-1, form)
			}
			for range w.count("parameters") {
				w.valtype()
			}
			for range w.count("results") {
				w.valtype()
			}
		}
	case 2: // import
		for range w.count("imports") {
			w.name()
			w.name()
			switch kind := w.byte(); kind {
			case 0x00:
				w.u32()
			case 0x01:
				w.table(false)
			case 0x02:
				w.limits()
			case 0x03:
				w.valtype()
				w.byte()
			case 0x04:
				w.byte()
				w.u32()
			default:
				w.failf("section import at offset %d: import kind %#x", w.pos-1, kind)
			}
		}
	case 3: // function
		for range w.count("functions") {
			w.u32()
		}
	case 4: // table
		for range w.count("tables") {
			w.table(true)
		}
	case 5: // memory
		for range w.count("memories") {
			w.limits()
		}
	case 6: // global
		for range w.count("globals") {
			w.valtype()
			w.byte()
			w.expr()
		}
	case 7: // export
		for range w.count("exports") {
			w.name()
			w.byte()
			w.u32()
		}
	case 8, 12: // start, data count
		w.u32()
	case 9: // element
		for range w.count("element segments") {
			w.element()
		}
	case 10: // code
		for range w.count("function bodies") {
			size := w.count("bytes of a function body")
			body := &walker{b: w.b[:w.pos+size], pos: w.pos, section: w.section}
			var locals uint64
			for range body.count("local declarations") {
				at := body.pos
				locals += uint64(body.u32())
				if locals > MaxLocals {
					body.failf("section code at offset %d: a function declares more than %d locals", at, MaxLocals)
				}
				body.valtype()
			}
			w.pos += size
		}
	case 11: // data
		for range w.count("data segments") {
			switch flag := w.u32(); flag {
			case 0:
				w.expr()
			case 1:
			case 2:
				w.u32()
				w.expr()
			default:
				w.failf("section data at offset %d: segment flag %d", w.pos-1, flag)
			}
			w.skip(w.count("bytes of a data segment"))
		}
	case 13: // tag
		for range w.count("tags") {
			w.byte()
			w.u32()
		}
	default:
		w.failf("unknown section id %d", id)
	}
	if w.left() != 0 {
		w.failf("section %s has %d bytes after its end at offset %d", w.section, w.left(), w.pos)
	}
}

func (w *walker) valtype() {
	switch t := w.byte(); t {
	case 0x63, 0x64: // (ref null? heaptype)
		w.leb(5)
	}
}

func (w *walker) limits() (min uint64) {
	flag := w.byte()
	wide := 5
	if flag&0x04 != 0 {
		wide = 10 // 64-bit memory
	}
	min = w.leb(wide)
	if flag&0x01 != 0 {
		w.leb(wide)
	}
	return min
}

func (w *walker) table(defined bool) {
	init := false
	if defined && w.pos < len(w.b) && w.b[w.pos] == 0x40 {
		w.pos++
		w.byte()
		init = true
	}
	w.valtype()
	at := w.pos
	if min := w.limits(); min > MaxTableMin {
		w.failf("section %s at offset %d: a table of %d entries at start (at most %d)", w.section, at, min, MaxTableMin)
	}
	if init {
		w.expr()
	}
}

func (w *walker) element() {
	flag := w.u32()
	if flag > 7 {
		w.failf("section element at offset %d: segment flag %d", w.pos-1, flag)
	}
	if flag&0x02 != 0 && flag&0x01 == 0 {
		w.u32() // table index
	}
	if flag&0x01 == 0 {
		w.expr() // offset
	}
	if flag&0x03 != 0 { // element kind or reference type
		w.valtype()
	}
	if flag&0x04 == 0 {
		for range w.count("function indexes") {
			w.u32()
		}
		return
	}
	for range w.count("element expressions") {
		w.expr()
	}
}

// expr skips a constant expression up to its end.
func (w *walker) expr() {
	for {
		switch op := w.byte(); op {
		case 0x0b:
			return
		case 0x41, 0x23, 0xd2: // i32.const, global.get, ref.func
			w.leb(5)
		case 0x42: // i64.const
			w.leb(10)
		case 0x43:
			w.skip(4)
		case 0x44:
			w.skip(8)
		case 0xd0: // ref.null heaptype
			w.leb(5)
		case 0xfd: // v128.const
			w.u32()
			w.skip(16)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		default:
			w.failf("section %s at offset %d: %#x in a constant expression", w.section, w.pos-1, op)
		}
	}
}

// names walks the name section's subsections the decoder reads: the
// module's name, function names and local names.
func (w *walker) names() {
	for w.left() > 0 {
		id := w.byte()
		size := w.count("bytes of a name subsection")
		sub := &walker{b: w.b[:w.pos+size], pos: w.pos, section: "custom name"}
		switch id {
		case 0:
			sub.name()
		case 1:
			sub.nameMap()
		case 2:
			for range sub.count("functions' local names") {
				sub.u32()
				sub.nameMap()
			}
		}
		w.pos += size
	}
}

func (w *walker) nameMap() {
	for range w.count("names") {
		w.u32()
		w.name()
	}
}
