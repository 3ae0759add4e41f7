package pod

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

func buildWorkload(tb testing.TB) []byte {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "w.wasm")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/workload")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatal(err, string(msg))
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return bin
}

// initialMemory instantiates bin without running it and returns its
// linear memory as the data segments left it.
func initialMemory(t *testing.T, ctx context.Context, bin []byte) []byte {
	t.Helper()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	mod, err := rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	mem, ok := mod.Memory().Read(0, mod.Memory().Size())
	if !ok {
		t.Fatal("memory unreadable")
	}
	return bytes.Clone(mem)
}

// The Go module's thousands of data segments become a few, and the
// memory they leave is byte for byte the same.
func TestMergedDataSegmentsLeaveTheSameMemory(t *testing.T) {
	bin := buildWorkload(t)
	merged := mergeDataSegments(bin)
	count := func(b []byte) uint64 {
		d, err := dataSegmentCount(b)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	before, after := count(bin), count(merged)
	t.Logf("data segments: %d → %d; module %d → %d bytes", before, after, len(bin), len(merged))
	if before < 1000 || after*10 > before {
		t.Fatalf("data segments %d → %d: expected a Go module's thousands to shrink tenfold at least", before, after)
	}
	ctx := context.Background()
	if !bytes.Equal(initialMemory(t, ctx, bin), initialMemory(t, ctx, merged)) {
		t.Fatal("the merged module's initial memory differs")
	}
}

// A module whose segments could not be merged without changing what it
// does comes back as it was.
func TestUnmergeableModulesAreKept(t *testing.T) {
	mod := func(sections ...[]byte) []byte {
		b := []byte("\x00asm\x01\x00\x00\x00")
		for _, s := range sections {
			b = append(b, s...)
		}
		return b
	}
	sec := func(id byte, body ...byte) []byte { return append(appendULEB([]byte{id}, uint64(len(body))), body...) }
	memory := sec(5, 1, 0, 1) // one memory, min 1 page
	active := func(off byte, data ...byte) []byte {
		return append([]byte{0, 0x41, off, 0x0b, byte(len(data))}, data...)
	}
	join := func(n byte, segs ...[]byte) []byte {
		b := []byte{n}
		for _, s := range segs {
			b = append(b, s...)
		}
		return b
	}
	for name, bin := range map[string][]byte{
		"overlapping": mod(memory, sec(11, join(2, active(0, 1, 2, 3), active(2, 9))...)),
		"passive":     mod(memory, sec(11, join(2, active(0, 1), []byte{1, 1, 7})...)),
		"data count":  mod(memory, sec(12, 2), sec(11, join(2, active(0, 1), active(4, 2))...)),
		"not wasm":    []byte("MZ\x90\x00"),
	} {
		if got := mergeDataSegments(bin); !bytes.Equal(got, bin) {
			t.Errorf("%s: changed to %x", name, got)
		}
	}
	// And one that can: two segments a short gap apart become one.
	bin := mod(memory, sec(11, join(2, active(0, 1, 2), active(10, 3))...))
	got := mergeDataSegments(bin)
	if n, err := dataSegmentCount(got); err != nil || n != 1 {
		t.Fatalf("merged %x: %d segments, %v", got, n, err)
	}
	ctx := context.Background()
	if a, b := initialMemory(t, ctx, bin), initialMemory(t, ctx, got); !bytes.Equal(a, b) {
		t.Fatal("memory differs")
	}
}

// dataSegmentCount reads the number of data segments of a module.
func dataSegmentCount(bin []byte) (uint64, error) {
	for i := 8; i < len(bin); {
		size, n, err := uleb(bin[i+1:])
		if err != nil {
			return 0, err
		}
		if bin[i] == 11 {
			c, _, err := uleb(bin[i+1+n:])
			return c, err
		}
		i += 1 + n + int(size)
	}
	return 0, nil
}

// Modules run on mapping-backed memory as on the Go heap's.
func TestModulesRunOnMappedMemory(t *testing.T) {
	ctx := experimental.WithMemoryAllocator(context.Background(), memoryAllocator())
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithMemoryLimitPages(1024))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	var out bytes.Buffer
	_, err := rt.InstantiateWithConfig(ctx, mergeDataSegments(buildWorkload(t)), wazero.NewModuleConfig().WithArgs("w", "hello").WithStdout(&out))
	if err != nil || out.String() != "hello from w\n" {
		t.Fatalf("%q, %v", out.String(), err)
	}
}
