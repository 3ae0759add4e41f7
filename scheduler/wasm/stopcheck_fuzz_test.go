package wasm

import (
	"bytes"
	"context"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/jetplane/jetplane/internal/wasmcheck"
)

// FuzzInstrument feeds the stop-check rewriter arbitrary modules. It must
// never panic or hang, and whatever valid module it accepts (and
// wasmcheck finds in proportion, as the host requires) it must turn
// into a valid module that exports the stop global: a plugin the
// rewriter breaks would fail every call, and one it crashes on would
// take the scheduler with it. ./scripts/test runs it briefly;
// ./scripts/fuzz runs it long.
func FuzzInstrument(f *testing.F) {
	f.Add(spin)
	// One function with locals, a block, branches, memory access and a
	// call: (func (param i32) (result i32) (local i32) ...).
	f.Add([]byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, // type: (i32) -> i32
		0x03, 0x02, 0x01, 0x00,
		0x05, 0x03, 0x01, 0x00, 0x01,
		0x06, 0x06, 0x01, 0x7f, 0x01, 0x41, 0x00, 0x0b, // global: mut i32 = 0
		0x07, 0x05, 0x01, 0x01, 'f', 0x00, 0x00,
		0x0a, 0x1a, 0x01, 0x18, 0x01, 0x01, 0x7f, // code: 1 local i32
		0x02, 0x40, // block
		0x20, 0x00, 0x0d, 0x00, // local.get 0; br_if 0
		0x41, 0x00, 0x28, 0x02, 0x00, 0x21, 0x01, // i32.const 0; i32.load; local.set 1
		0x0b,       // end
		0x20, 0x01, // local.get 1
		0x10, 0x00, // call 0
		0x0b, // end
	})
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	ctx := context.Background()
	cfg := wazero.NewRuntimeConfigInterpreter()
	f.Fuzz(func(t *testing.T, code []byte) {
		out, err := instrument(code)
		if err != nil {
			return
		}
		// The runtime sizes what it decodes by a module's declarations;
		// jetplane hands it only modules wasmcheck finds in proportion,
		// and what the instrumenter makes of one stays so.
		if wasmcheck.Bounded(code) != nil {
			return
		}
		if err := wasmcheck.Bounded(out); err != nil {
			t.Fatalf("a bounded module instrumented is out of proportion: %v", err)
		}
		rt := wazero.NewRuntimeWithConfig(ctx, cfg)
		defer rt.Close(ctx)
		in, err := rt.CompileModule(ctx, code)
		if err != nil {
			return // invalid in, anything out: the host compiles the result and refuses it
		}
		in.Close(ctx)
		mod, err := rt.CompileModule(ctx, out)
		if err != nil {
			t.Fatalf("a valid module instrumented does not compile: %v", err)
		}
		defer mod.Close(ctx)
		if !bytes.Contains(out, []byte(stopGlobal)) {
			t.Fatalf("the instrumented module does not name %s", stopGlobal)
		}
	})
}
