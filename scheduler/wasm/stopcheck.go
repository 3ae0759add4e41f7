package wasm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// stopGlobal is the export name of the global instrument adds.
const stopGlobal = "jetplane_stop"

// fuelPerYield is how many loop iterations a guest runs between two
// visits to Go.
const fuelPerYield = 1 << 16

// instrument returns the module with a check at every loop header, using
// two new mutable i32 globals, $fuel and $stop (exported as
// jetplane_stop):
//
//	$fuel -= 1
//	if $fuel == 0 {
//	  $fuel = fuelPerYield
//	  drop(memory.grow 0)          ;; a visit to Go
//	  if $stop { unreachable }
//	}
//
// The watchdog sets $stop in an instance whose call runs past its budget;
// the guest traps within fuelPerYield iterations (in Go-compiled code,
// function calls: every Go function body is a loop). The visit to Go
// matters as much: Go cannot preempt native code, so a guest that never
// left it would hold up the host's garbage collector, and with it the
// watchdog. Unbounded recursion ends in a stack overflow without help.
//
// wazero's own termination (WithCloseOnContextDone) leaves native code at
// every loop header to check the module in Go, which costs a Go-compiled
// guest a round trip per function call, and starts a goroutine per call
// (decision 0031). This check is a few instructions.
func instrument(code []byte) ([]byte, error) {
	if len(code) < 8 || string(code[:4]) != "\x00asm" || binary.LittleEndian.Uint32(code[4:8]) != 1 {
		return nil, errors.New("not a WebAssembly 1.0 binary module")
	}
	type section struct {
		id   byte
		body []byte
	}
	var sections []section
	r := &reader{b: code, pos: 8}
	for r.pos < len(r.b) {
		id := r.byte()
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		sections = append(sections, section{id, body})
	}
	importedGlobals, definedGlobals, memories := uint32(0), uint32(0), 0
	hasGlobal, hasExport := false, false
	for _, s := range sections {
		switch s.id {
		case 2:
			n, mems, err := countImports(s.body)
			if err != nil {
				return nil, fmt.Errorf("import section: %w", err)
			}
			importedGlobals = n
			memories += mems
		case 5:
			memories++
		case 6:
			hasGlobal = true
			gr := &reader{b: s.body}
			definedGlobals = gr.u32()
			if gr.err != nil {
				return nil, fmt.Errorf("global section: %w", gr.err)
			}
		case 7:
			hasExport = true
		}
	}
	if memories == 0 {
		return nil, errors.New("the module has no memory")
	}
	fuel, stop := importedGlobals+definedGlobals, importedGlobals+definedGlobals+1
	newGlobals := binary.AppendUvarint([]byte{0x7f, 0x01, 0x41}, fuelPerYield) // mut i32 = fuelPerYield
	newGlobals = append(newGlobals, 0x0b, 0x7f, 0x01, 0x41, 0x00, 0x0b)        // mut i32 = 0
	newExport := append(appendName(nil, stopGlobal), 0x03)
	newExport = binary.AppendUvarint(newExport, uint64(stop))

	// Sections in their required order (custom sections anywhere); a
	// missing global or export section is added before the first
	// section that must follow it.
	rank := map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}
	var out []section
	addMissing := func(before int) {
		if !hasGlobal && before > rank[6] {
			out = append(out, section{6, append([]byte{2}, newGlobals...)})
			hasGlobal = true
		}
		if !hasExport && before > rank[7] {
			out = append(out, section{7, append([]byte{1}, newExport...)})
			hasExport = true
		}
	}
	for _, s := range sections {
		if s.id != 0 {
			addMissing(rank[s.id])
		}
		switch s.id {
		case 6:
			s.body = appendToVector(s.body, newGlobals, 2)
		case 7:
			s.body = appendToVector(s.body, newExport, 1)
		case 10:
			body, err := instrumentCode(s.body, fuel, stop)
			if err != nil {
				return nil, fmt.Errorf("code section: %w", err)
			}
			s.body = body
		}
		out = append(out, s)
	}
	addMissing(math.MaxInt)
	res := append([]byte(nil), code[:8]...)
	for _, s := range out {
		res = append(res, s.id)
		res = binary.AppendUvarint(res, uint64(len(s.body)))
		res = append(res, s.body...)
	}
	return res, nil
}

func appendName(b []byte, name string) []byte {
	b = binary.AppendUvarint(b, uint64(len(name)))
	return append(b, name...)
}

// appendToVector adds n encoded elements to a section that is a vector.
func appendToVector(body, elems []byte, n uint64) []byte {
	r := &reader{b: body}
	count := r.u32()
	out := binary.AppendUvarint(nil, uint64(count)+n)
	out = append(out, body[r.pos:]...)
	return append(out, elems...)
}

// countImports counts the imported globals and memories.
func countImports(body []byte) (globals uint32, memories int, err error) {
	r := &reader{b: body}
	n := r.u32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		r.bytes(int(r.u32())) // module
		r.bytes(int(r.u32())) // name
		switch kind := r.byte(); kind {
		case 0: // func
			r.u32()
		case 1: // table
			r.valtype()
			r.limits()
		case 2: // memory
			r.limits()
			memories++
		case 3: // global
			r.valtype()
			r.byte()
			globals++
		case 4: // tag
			r.byte()
			r.u32()
		default:
			return 0, 0, fmt.Errorf("import kind %d", kind)
		}
	}
	return globals, memories, r.err
}

// instrumentCode adds the check after every loop instruction of every
// function body.
func instrumentCode(body []byte, fuel, stop uint32) ([]byte, error) {
	g := func(op byte, idx uint32) []byte { return binary.AppendUvarint([]byte{op}, uint64(idx)) }
	var check []byte
	check = append(check, g(0x23, fuel)...)                         // global.get $fuel
	check = append(check, 0x41, 0x01, 0x6b)                         // i32.const 1; i32.sub
	check = append(check, g(0x24, fuel)...)                         // global.set $fuel
	check = append(check, g(0x23, fuel)...)                         // global.get $fuel
	check = append(check, 0x45, 0x04, 0x40)                         // i32.eqz; if
	check = binary.AppendUvarint(append(check, 0x41), fuelPerYield) // i32.const fuelPerYield
	check = append(check, g(0x24, fuel)...)                         // global.set $fuel
	check = append(check, 0x41, 0x00, 0x40, 0x00, 0x1a)             // i32.const 0; memory.grow 0; drop
	check = append(check, g(0x23, stop)...)                         // global.get $stop
	check = append(check, 0x04, 0x40, 0x00, 0x0b)                   // if; unreachable; end
	check = append(check, 0x0b)                                     // end

	r := &reader{b: body}
	n := r.u32()
	out := binary.AppendUvarint(make([]byte, 0, len(body)+len(body)/8), uint64(n))
	var fn []byte
	for i := uint32(0); i < n; i++ {
		size := r.u32()
		f := &reader{b: r.bytes(int(size))}
		if r.err != nil {
			return nil, r.err
		}
		// Locals, copied as they are.
		for decls := f.u32(); decls > 0 && f.err == nil; decls-- {
			f.u32()
			f.valtype()
		}
		fn = append(fn[:0], f.b[:f.pos]...)
		for f.pos < len(f.b) && f.err == nil {
			start := f.pos
			loop := f.b[f.pos] == 0x03
			f.instruction()
			fn = append(fn, f.b[start:f.pos]...)
			if loop && f.err == nil {
				fn = append(fn, check...)
			}
		}
		if f.err != nil {
			return nil, fmt.Errorf("function %d: %w", i, f.err)
		}
		out = binary.AppendUvarint(out, uint64(len(fn)))
		out = append(out, fn...)
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.pos != len(r.b) {
		return nil, errors.New("trailing bytes")
	}
	return out, nil
}

// reader decodes the parts of a module instrument needs; the first error
// sticks.
type reader struct {
	b   []byte
	pos int
	err error
}

var errTruncated = errors.New("truncated")

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.pos = len(r.b)
}

func (r *reader) byte() byte {
	if r.pos >= len(r.b) {
		r.fail(errTruncated)
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || r.pos+n > len(r.b) {
		r.fail(errTruncated)
		return nil
	}
	b := r.b[r.pos : r.pos+n]
	r.pos += n
	return b
}

// leb skips a LEB128 number of at most max bytes and returns its low bits
// as unsigned.
func (r *reader) leb(max int) uint64 {
	var v uint64
	for i := 0; i < max; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if i < 10 {
			v |= uint64(c&0x7f) << (7 * i)
		}
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("LEB128 number too long"))
	return 0
}

func (r *reader) u32() uint32 { return uint32(r.leb(5)) }

// valtype skips a value type, with the heap type of a (ref null? ht).
func (r *reader) valtype() {
	if c := r.byte(); c == 0x63 || c == 0x64 {
		r.leb(5)
	}
}

func (r *reader) limits() {
	flags := r.byte()
	r.leb(10)
	if flags&1 != 0 {
		r.leb(10)
	}
}

func (r *reader) memarg() {
	if align := r.u32(); align&0x40 != 0 {
		r.u32() // memory index (multi-memory)
	}
	r.leb(10)
}

// instruction skips one instruction with its immediates.
func (r *reader) instruction() {
	op := r.byte()
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04 || op == 0x06: // block, loop, if, try
		r.leb(5) // block type (s33)
	case op == 0x07 || op == 0x08 || op == 0x09 || op == 0x18: // catch, throw, rethrow, delegate
		r.u32()
	case op == 0x1f: // try_table
		r.leb(5)
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			if kind := r.byte(); kind <= 1 {
				r.u32()
			}
			r.u32()
		}
	case op == 0x0c || op == 0x0d || op == 0xd4 || op == 0xd6: // br, br_if, br_on_null, br_on_non_null
		r.u32()
	case op == 0x0e: // br_table
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.u32()
		}
		r.u32()
	case op == 0x10 || op == 0x12 || op == 0x14 || op == 0x15 || op == 0xd2: // call, return_call, call_ref, return_call_ref, ref.func
		r.u32()
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select t*
		for n := r.u32(); n > 0 && r.err == nil; n-- {
			r.valtype()
		}
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get/set
		r.u32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memarg()
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		r.u32()
	case op == 0x41:
		r.leb(5)
	case op == 0x42:
		r.leb(10)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xd0: // ref.null
		r.leb(5)
	case op <= 0x01 || op == 0x05 || op == 0x0a || op == 0x0b || op == 0x0f || op == 0x19 ||
		op == 0x1a || op == 0x1b || (op >= 0x45 && op <= 0xc4) || op == 0xd1 || op == 0xd3 || op == 0xd5:
		// no immediates
	case op == 0xfc:
		switch sub := r.u32(); {
		case sub <= 7:
		case sub == 8 || sub == 10 || sub == 12 || sub == 14:
			r.u32()
			r.u32()
		case sub == 9 || sub == 11 || sub == 13 || (sub >= 15 && sub <= 17):
			r.u32()
		default:
			r.fail(fmt.Errorf("unknown instruction 0xfc %d", sub))
		}
	case op == 0xfd:
		switch sub := r.u32(); {
		case sub <= 11 || sub == 92 || sub == 93:
			r.memarg()
		case sub == 12 || sub == 13:
			r.bytes(16)
		case sub >= 21 && sub <= 34:
			r.byte()
		case sub >= 84 && sub <= 91:
			r.memarg()
			r.byte()
		}
	case op == 0xfe:
		if sub := r.u32(); sub == 3 {
			r.byte()
		} else {
			r.memarg()
		}
	default:
		r.fail(fmt.Errorf("unknown instruction 0x%02x", op))
	}
}
