package pod

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Memory backed by a mapping grows in place, and moves once, keeping its
// contents, when it outgrows its first reservation.
func TestMappedMemoryGrowsAndMoves(t *testing.T) {
	defer func(v uint64) { reserveFirst = v }(reserveFirst)
	reserveFirst = 64 << 10
	m := memoryAllocator().Allocate(0, 1<<20)
	defer m.Free()
	b := m.Reallocate(wasmPage)
	if len(b) != wasmPage || b[0] != 0 {
		t.Fatalf("first: %d bytes", len(b))
	}
	b[0], b[wasmPage-1] = 1, 2
	b = m.Reallocate(3 * wasmPage) // past the 64 KiB reservation
	if len(b) != 3*wasmPage || b[0] != 1 || b[wasmPage-1] != 2 || b[3*wasmPage-1] != 0 {
		t.Fatalf("after moving: %d bytes, %d %d", len(b), b[0], b[wasmPage-1])
	}
	b[3*wasmPage-1] = 3
	if m.Reallocate(2<<20) != nil {
		t.Fatal("grew past its maximum")
	}
}

// A module split from its data starts on memory mapped from the image
// exactly as the whole module starts, and each instance's writes are its
// own.
func TestModulesStartFromAMemoryImage(t *testing.T) {
	bin := buildWorkload(t)
	stripped, image, ok := splitData(bin)
	if !ok {
		t.Fatal("a Go module's data could not be split")
	}
	img, err := newImageAllocator(t.TempDir(), image)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	ctx := context.Background()
	want := initialMemory(t, ctx, bin)
	actx := experimental.WithMemoryAllocator(ctx, img)
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	mod, err := rt.CompileModule(ctx, stripped)
	if err != nil {
		t.Fatal(err)
	}
	if !fitsMemory(mod, len(image)) {
		t.Fatal("the image does not fit the module's memory")
	}
	var insts []api.Module
	for i := range 2 {
		inst, err := rt.InstantiateModule(actx, mod, wazero.NewModuleConfig().WithName(fmt.Sprint(i)).WithStartFunctions())
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, inst)
		got, _ := inst.Memory().Read(0, inst.Memory().Size())
		if !bytes.Equal(got, want) {
			t.Fatalf("instance %d: memory differs from the whole module's", i)
		}
		// Written by this instance only.
		inst.Memory().WriteByte(uint32(len(image)/2), ^want[len(image)/2])
	}
	for _, inst := range insts {
		if b, _ := inst.Memory().ReadByte(uint32(len(image) / 2)); b != ^want[len(image)/2] {
			t.Fatal("an instance's write was lost")
		}
		inst.Close(ctx)
	}
	// And a fresh one is pristine, and runs.
	var out bytes.Buffer
	if _, err := rt.InstantiateModule(actx, mod, wazero.NewModuleConfig().WithArgs("w", "hello").WithStdout(&out)); err != nil || out.String() != "hello from w\n" {
		t.Fatalf("%q, %v", out.String(), err)
	}
}
