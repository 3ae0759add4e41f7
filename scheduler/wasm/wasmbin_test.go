package wasm

import (
	"encoding/binary"
)

// Hand-written modules for the lifecycle's edge cases, encoded here
// rather than committed as binaries: the WebAssembly binary format, just
// the sections these modules use.

// Instructions used by the bodies below.
const (
	opUnreachable = 0x00
	opEnd         = 0x0b
	opDrop        = 0x1a
	opCall        = 0x10
	opGlobalGet   = 0x23
	opGlobalSet   = 0x24
	opI32Const    = 0x41
	opI64Const    = 0x42
	opIf          = 0x04
	opElse        = 0x05
	valI32        = 0x7f
	valI64        = 0x7e
	blockEmpty    = 0x40
)

type binFunc struct {
	export  string
	params  []byte
	results []byte
	body    []byte // instructions, without the final end
}

// binModule is a module importing wasi's fd_write and proc_exit, with one
// page of memory holding "panic!" behind an iovec at 0 (as upstream's
// panic_on_*.wat), a mutable i32 global, and funcs.
type binModule struct {
	funcs []binFunc
}

func uleb(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func sleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func vec(n int, items []byte) []byte { return append(uleb(nil, uint64(n)), items...) }

func str(s string) []byte { return append(uleb(nil, uint64(len(s))), s...) }

func section(id byte, body []byte) []byte {
	return append(append([]byte{id}, uleb(nil, uint64(len(body)))...), body...)
}

// The imported functions' indices.
const (
	fnFdWrite  = 0
	fnProcExit = 1
)

// writePanic writes "panic!" to stdout through fd_write.
var writePanic = []byte{
	opI32Const, 1, opI32Const, 0, opI32Const, 1, opI32Const, 0x10,
	opCall, fnFdWrite, opDrop,
}

func (m binModule) encode() []byte {
	// Types: 0 fd_write (i32 i32 i32 i32)->i32, 1 proc_exit (i32)->(),
	// then one per func.
	types := [][]byte{
		{0x60, 4, valI32, valI32, valI32, valI32, 1, valI32},
		{0x60, 1, valI32, 0},
	}
	for _, f := range m.funcs {
		t := append([]byte{0x60}, vec(len(f.params), f.params)...)
		types = append(types, append(t, vec(len(f.results), f.results)...))
	}
	var tb []byte
	for _, t := range types {
		tb = append(tb, t...)
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = append(out, section(1, vec(len(types), tb))...)
	var imp []byte
	imp = append(imp, str("wasi_snapshot_preview1")...)
	imp = append(imp, str("fd_write")...)
	imp = append(imp, 0x00, 0)
	imp = append(imp, str("wasi_snapshot_preview1")...)
	imp = append(imp, str("proc_exit")...)
	imp = append(imp, 0x00, 1)
	out = append(out, section(2, vec(2, imp))...)
	var fs []byte
	for i := range m.funcs {
		fs = uleb(fs, uint64(2+i))
	}
	out = append(out, section(3, vec(len(m.funcs), fs))...)
	out = append(out, section(5, vec(1, []byte{0x00, 1}))...) // memory: min 1 page
	// One mutable i32 global, 0.
	out = append(out, section(6, vec(1, []byte{valI32, 1, opI32Const, 0, opEnd}))...)
	var ex []byte
	ex = append(ex, str("memory")...)
	ex = append(ex, 0x02, 0)
	n := 1
	for i, f := range m.funcs {
		if f.export == "" {
			continue
		}
		ex = append(ex, str(f.export)...)
		ex = append(ex, 0x00)
		ex = uleb(ex, uint64(2+i))
		n++
	}
	out = append(out, section(7, vec(n, ex))...)
	var code []byte
	for _, f := range m.funcs {
		body := append([]byte{0}, f.body...) // no locals
		body = append(body, opEnd)
		code = append(code, uleb(nil, uint64(len(body)))...)
		code = append(code, body...)
	}
	out = append(out, section(10, vec(len(m.funcs), code))...)
	// Data: the iovec {8, 6} at 0 and "panic!" at 8; fd_write's result at 16.
	data := []byte{0x00, opI32Const, 0, opEnd}
	data = append(data, str("\x08\x00\x00\x00\x06\x00\x00\x00panic!")...)
	out = append(out, section(11, vec(1, data))...)
	return out
}

// i32Result is a body returning v.
func i32Result(v int32) []byte { return sleb([]byte{opI32Const}, int64(v)) }

func i64Result(v int64) []byte { return sleb([]byte{opI64Const}, v) }

// panicBody writes "panic!" and traps, as a TinyGo panic does.
func panicBody() []byte { return append(append([]byte(nil), writePanic...), opUnreachable) }

// hookFunc is upstream's export name with its result types.
func hookFunc(name string, body []byte) binFunc {
	var results []byte
	switch guestExports[name] {
	case i32:
		results = []byte{valI32}
	case i64:
		results = []byte{valI64}
	}
	return binFunc{export: name, results: results, body: body}
}

// successBody returns Success for a hook's result type.
func successBody(name string) []byte {
	switch guestExports[name] {
	case i32:
		return i32Result(0)
	case i64:
		return i64Result(0)
	}
	return nil
}
