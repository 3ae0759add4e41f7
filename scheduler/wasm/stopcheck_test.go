package wasm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// spin is a module without globals or exports of its own beyond one
// function: (func (export "spin") (loop (br 0))) and a memory.
var spin = []byte{
	0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
	0x03, 0x02, 0x01, 0x00, // func 0: type 0
	0x05, 0x03, 0x01, 0x00, 0x01, // memory: min 1
	0x07, 0x08, 0x01, 0x04, 's', 'p', 'i', 'n', 0x00, 0x00, // export "spin" func 0
	0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // code: loop; br 0; end; end
}

// TestInstrumentStopsALoop: a module with no global or export section of
// its own gets both; its endless loop runs until the stop global is set,
// then traps, and the host's garbage collector runs meanwhile.
func TestInstrumentStopsALoop(t *testing.T) {
	code, err := instrument(spin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.Instantiate(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	stop, ok := mod.ExportedGlobal(stopGlobal).(api.MutableGlobal)
	if !ok {
		t.Fatal("no stop global")
	}
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction("spin").Call(ctx)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	gc := make(chan struct{})
	go func() { forceGC(); close(gc) }()
	select {
	case <-gc:
	case <-time.After(20 * time.Second):
		t.Fatal("a garbage collection waited for the looping guest")
	}
	select {
	case err := <-done:
		t.Fatalf("the loop ended by itself: %v", err)
	default:
	}
	stop.Set(1)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the stopped loop returned no error")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the loop did not stop")
	}
}

func TestInstrumentRefusesWhatItCannotRead(t *testing.T) {
	if _, err := instrument([]byte("not wasm")); err == nil {
		t.Error("instrumented garbage")
	}
	bad := bytes.Clone(spin)
	bad[len(bad)-4] = 0xff // an unknown opcode in place of br
	if _, err := instrument(bad); err == nil {
		t.Error("instrumented an unknown instruction")
	}
	noMem := append(bytes.Clone(spin[:18]), spin[23:]...)
	if _, err := instrument(noMem); err == nil || errors.Is(err, os.ErrNotExist) {
		t.Errorf("a module without memory: %v", err)
	}
}

func forceGC() { runtime.GC() }
