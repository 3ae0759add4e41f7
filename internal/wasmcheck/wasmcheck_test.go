package wasmcheck

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

func module(sections ...[]byte) []byte {
	b := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range sections {
		b = append(b, s...)
	}
	return b
}

func section(id byte, payload ...byte) []byte {
	return append(append([]byte{id}, uleb(uint64(len(payload)))...), payload...)
}

// uleb encodes v as WebAssembly's unsigned LEB128, which is Go's uvarint.
func uleb(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// valid uses every section Bounded walks, with element segments of each
// form the runtime decodes and a name section; the runtime compiles it.
var valid = module(
	section(1, cat([]byte{0x02}, []byte{0x60, 0x01, 0x7f, 0x01, 0x7f}, []byte{0x60, 0x00, 0x00})...),
	section(2, cat([]byte{0x01}, []byte{0x03}, []byte("env"), []byte{0x01, 'f', 0x00, 0x01})...),
	section(3, 0x02, 0x00, 0x01),
	section(4, 0x01, 0x70, 0x00, 0x04),
	section(5, 0x01, 0x01, 0x01, 0x02),
	section(6, 0x01, 0x7f, 0x01, 0x41, 0x07, 0x0b),
	section(7, cat([]byte{0x02, 0x03}, []byte("run"), []byte{0x00, 0x01, 0x03}, []byte("mem"), []byte{0x02, 0x00})...),
	section(9, cat([]byte{0x04},
		[]byte{0x00, 0x41, 0x00, 0x0b, 0x01, 0x01}, // active, funcidx vector
		[]byte{0x01, 0x00, 0x01, 0x02},             // passive, elemkind, funcidx vector
		[]byte{0x03, 0x00, 0x01, 0x01},             // declarative
		[]byte{0x05, 0x70, 0x01, 0xd2, 0x02, 0x0b}, // passive, reftype, expressions
	)...),
	section(12, 0x02),
	section(10, cat([]byte{0x02},
		[]byte{0x06, 0x01, 0x02, 0x7f, 0x20, 0x00, 0x0b}, // (local i32 i32) local.get 0
		[]byte{0x02, 0x00, 0x0b},
	)...),
	section(11, cat([]byte{0x02},
		[]byte{0x00, 0x41, 0x10, 0x0b, 0x03, 'a', 'b', 'c'},
		[]byte{0x01, 0x02, 'x', 'y'},
	)...),
	section(0, cat([]byte{0x04}, []byte("name"),
		[]byte{0x00, 0x04, 0x03, 'm', 'o', 'd'},
		[]byte{0x01, 0x05, 0x01, 0x01, 0x02, 'r', 'n'},
		[]byte{0x02, 0x06, 0x01, 0x01, 0x01, 0x00, 0x01, 'x'},
	)...),
	section(0, cat([]byte{0x03}, []byte("etc"), []byte("anything at all"))...),
)

func compiles(t *testing.T, b []byte) {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, b); err != nil {
		t.Fatalf("the runtime refuses it: %v", err)
	}
}

func TestBoundedAcceptsValidModules(t *testing.T) {
	compiles(t, valid)
	if err := Bounded(valid); err != nil {
		t.Fatalf("a valid module is refused: %v", err)
	}
	// A module Go builds, the way pods are built.
	out := filepath.Join(t.TempDir(), "hello.wasm")
	cmd := exec.Command("go", "build", "-o", out, "../../deploy/examples/wasm/hello")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := Bounded(b); err != nil {
		t.Fatalf("a module Go built is refused: %v", err)
	}
}

// Each of these makes the runtime's decoder allocate by a count the
// module declares (gigabytes from a few bytes); none may reach it.
func TestBoundedRefusesDeclarationsOutOfProportion(t *testing.T) {
	huge := uleb(0xb2b2b2b2)
	for _, c := range []struct {
		name, want string
		module     []byte
	}{
		{"element section", "declares 2998055602 element segments", module(section(9, cat(huge, []byte("0000000"))...))},
		{"section size", "declares 2998055602 bytes", module(cat([]byte{0x05}, huge, []byte{0x01}))},
		{"parameters", "parameters", module(section(1, cat([]byte{0x01, 0x60}, huge, []byte{0x00})...))},
		{"import name", "bytes of a name", module(section(2, cat([]byte{0x01}, huge, []byte("env"))...))},
		{"data segment", "bytes of a data segment", module(section(11, cat([]byte{0x01, 0x01}, huge, []byte("ab"))...))},
		{"element init", "function indexes", module(section(9, cat([]byte{0x01, 0x01, 0x00}, huge, []byte{0x00})...))},
		{"locals", "more than 50000 locals", module(section(10, cat([]byte{0x01, 0x08, 0x01}, uleb(1<<31), []byte{0x7f, 0x0b})...))},
		{"table", "a table of 134217728 entries", module(section(4, cat([]byte{0x01, 0x70, 0x00}, uleb(1<<27))...))},
		{"names", "names", module(section(0, cat([]byte{0x04}, []byte("name"), []byte{0x01, 0x06}, huge, []byte{0x00})...))},
		{"local names", "functions' local names", module(section(0, cat([]byte{0x04}, []byte("name"), []byte{0x02, 0x06}, huge, []byte{0x00})...))},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Bounded(c.module)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Bounded = %v, want an error naming %q", err, c.want)
			}
		})
	}
	if err := Bounded([]byte("\x7fELF")); err == nil || !strings.Contains(err.Error(), "\\0asm") {
		t.Fatalf("Bounded(ELF) = %v", err)
	}
}

// FuzzBounded: whatever Bounded lets through, the runtime decodes
// without running out of memory (the fuzzer reports a crash of the
// process), and Bounded itself never panics.
func FuzzBounded(f *testing.F) {
	f.Add(valid)
	f.Add([]byte("\x00asm\x01\x00\x00\x00\t\x04\xb2\xb2\xb2\xb2\x05\a0000000"))
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfigInterpreter()
	f.Fuzz(func(t *testing.T, b []byte) {
		if Bounded(b) != nil {
			return
		}
		rt := wazero.NewRuntimeWithConfig(ctx, cfg)
		defer rt.Close(ctx)
		if m, err := rt.CompileModule(ctx, b); err == nil {
			m.Close(ctx)
		}
	})
}
