package pod

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
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

// A memory released to its allocator's pool and taken again starts as a
// new one does: the image where the image is, zeros after it, whatever
// the instance before wrote or grew; and a memory that moved out of its
// first reservation is never pooled.
//
// Both resets are run: wiped in place (the pages stay resident) and
// dropped (madvise(MADV_DONTNEED) over everything, as past warmSize or
// without a page map).
func TestPooledMemoryStartsPristine(t *testing.T) {
	if !pagemapUsable() {
		t.Fatal("this process's page map cannot be read; memories would never be wiped in place")
	}
	t.Run("wiped in place", func(t *testing.T) { pooledMemoryStartsPristine(t, 1) })
	defer func(v int) { warmSize = v }(warmSize)
	warmSize = 0
	t.Run("dropped", func(t *testing.T) { pooledMemoryStartsPristine(t, 0) })
}

func pooledMemoryStartsPristine(t *testing.T, warm int) {
	image := bytes.Repeat([]byte("jetplane"), 3*4096/8+5) // three pages and a bit
	img, err := newImageAllocator(t.TempDir(), image)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	want := func(t *testing.T, b []byte) {
		t.Helper()
		if !bytes.Equal(b[:len(image)], image) {
			t.Fatal("the image differs")
		}
		if i := bytes.IndexFunc(b[len(image):], func(r rune) bool { return r != 0 }); i >= 0 {
			t.Fatalf("byte %d after the image is not zero", len(image)+i)
		}
	}
	first := img.Allocate(wasmPage, 16*wasmPage).(*mmapMemory)
	b := first.Reallocate(wasmPage)
	want(t, b)
	for i := range b {
		b[i] = 0xa5
	}
	b = first.Reallocate(4 * wasmPage) // grown in place
	for i := range b {
		b[i] = 0x5a
	}
	addr := &b[0]
	first.Free()
	if len(img.pool.warm) != warm || img.pool.kept() != 1 {
		t.Fatalf("%d kept, %d wiped in place; want 1, %d", img.pool.kept(), len(img.pool.warm), warm)
	}

	second := img.Allocate(wasmPage, 16*wasmPage).(*mmapMemory)
	b = second.Reallocate(wasmPage)
	if &b[0] != addr {
		t.Fatal("the released mapping was not reused")
	}
	want(t, b)
	// What the first instance grew to reads as zeros once grown again.
	want(t, second.Reallocate(4*wasmPage))
	second.Free()

	// Past its first reservation a memory moves; the moved one is unmapped.
	defer func(v uint64) { reserveFirst = v }(reserveFirst)
	reserveFirst = 2 * wasmPage
	moving := img.Allocate(wasmPage, 16*wasmPage).(*mmapMemory)
	moving.Reallocate(wasmPage)
	b = moving.Reallocate(3 * wasmPage)
	want(t, b)
	moved := &b[0]
	moving.Free()
	for range 2 {
		m := img.Allocate(wasmPage, 16*wasmPage).(*mmapMemory)
		b := m.Reallocate(wasmPage)
		if &b[0] == moved {
			t.Fatal("a moved memory was pooled")
		}
		want(t, b)
		defer m.Free()
	}
}

// A closed allocator keeps no mappings: it unmaps those it kept and
// takes none back.
func TestClosedPoolKeepsNothing(t *testing.T) {
	a := memoryAllocator().(*mmapAllocator)
	m := a.Allocate(wasmPage, 4*wasmPage)
	m.Reallocate(wasmPage)[0] = 1
	m.Free()
	if a.pool.kept() != 1 {
		t.Fatalf("%d kept, want 1", a.pool.kept())
	}
	a.pool.close()
	if a.pool.kept() != 0 {
		t.Fatal("a closed pool kept its mappings")
	}
	m = a.Allocate(wasmPage, 4*wasmPage)
	if b := m.Reallocate(wasmPage); b[0] != 0 {
		t.Fatal("a new memory is not zero")
	}
	m.Free()
	if a.pool.kept() != 0 {
		t.Fatal("a closed pool took a mapping")
	}
}

// A memory wiped in place reads as new whatever its instances wrote,
// read or grew, round after round, and keeps resident the pages it
// wrote, in its image and past it (what spares the next instance its
// page faults).
func TestWipedInPlaceOverManyInstances(t *testing.T) {
	if !pagemapUsable() {
		t.Fatal("this process's page map cannot be read")
	}
	ps := os.Getpagesize()
	image := make([]byte, 5*ps+100)
	rand.NewChaCha8([32]byte{1}).Read(image)
	img, err := newImageAllocator(t.TempDir(), image)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if !img.pool.fileFlag {
		t.Fatal("the page map does not tell the image file's pages from private copies")
	}
	r := rand.New(rand.NewPCG(3, 4))
	var addr *byte
	for round := range 200 {
		m := img.Allocate(wasmPage, 64*wasmPage).(*mmapMemory)
		size := uint64(1+r.IntN(8)) * wasmPage
		b := m.Reallocate(size)
		if round > 0 && &b[0] != addr {
			t.Fatalf("round %d: the kept mapping was not reused", round)
		}
		addr = &b[0]
		if !bytes.Equal(b[:len(image)], image) {
			t.Fatalf("round %d: the image differs", round)
		}
		if i := slices.IndexFunc(b[len(image):], func(c byte) bool { return c != 0 }); i >= 0 {
			t.Fatalf("round %d: byte %d after the image is not zero", round, len(image)+i)
		}
		// Read some pages, write others: inside the image, after it, and
		// in runs across its end.
		var sum byte
		for range 1 + r.IntN(40) {
			i := r.IntN(len(b))
			switch r.IntN(3) {
			case 0:
				sum += b[i]
			case 1:
				b[i] = byte(1 + r.IntN(255))
			default:
				end := min(len(b), i+r.IntN(3*ps))
				for j := i; j < end; j++ {
					b[j] = 0xff
				}
			}
		}
		_ = sum
		last := len(b) - 1
		b[last], b[0] = 1, ^b[0]
		m.Free()
		if len(img.pool.warm) != 1 {
			t.Fatalf("round %d: not wiped in place", round)
		}
		for _, at := range []int{0, last} {
			var e [1]uint64
			if err := pageFlags(pagemap(), img.pool.warm[0].reserved[at:], e[:]); err != nil {
				t.Fatal(err)
			}
			if e[0]&pmPresent == 0 {
				t.Fatalf("round %d: the written page at %d was not kept resident", round, at)
			}
		}
	}
}

// An image allocator closed while its memories are released and wiped
// keeps none of them, and no wipe reads the image once it is unmapped.
func TestImageClosedWhileMemoriesAreWiped(t *testing.T) {
	img, err := newImageAllocator(t.TempDir(), bytes.Repeat([]byte{7}, 3*os.Getpagesize()))
	if err != nil {
		t.Fatal(err)
	}
	var ms []*mmapMemory
	for range 32 {
		m := img.Allocate(wasmPage, 4*wasmPage).(*mmapMemory)
		b := m.Reallocate(2 * wasmPage)
		b[0], b[len(b)-1] = 1, 1
		ms = append(ms, m)
	}
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(m.Free)
	}
	img.Close()
	wg.Wait()
	if n := img.pool.kept(); n != 0 {
		t.Fatalf("%d kept by a closed allocator", n)
	}
}

// Memories released together keep at most warmSize wiped in place; the
// others are kept dropped.
func TestWarmKeptAtMostWarmSize(t *testing.T) {
	a := memoryAllocator().(*mmapAllocator)
	defer a.Close()
	var ms []experimental.LinearMemory
	for range 40 {
		m := a.Allocate(wasmPage, 4*wasmPage)
		m.Reallocate(wasmPage)[0] = 1
		ms = append(ms, m)
	}
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(m.Free)
	}
	wg.Wait()
	if len(a.pool.warm) != warmSize || a.pool.kept() != 40 || a.pool.warming != 0 {
		t.Fatalf("%d warm of %d kept (%d warming); want %d of 40", len(a.pool.warm), a.pool.kept(), a.pool.warming, warmSize)
	}
}
