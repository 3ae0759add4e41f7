package pod

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero/experimental"
)

// nilMemory is an allocator that cannot give any memory: wazero panics
// on it inside InstantiateModule, as it did on the node's own allocator
// for a module whose data image had no bytes.
type nilMemory struct{}

func (nilMemory) Allocate(_, _ uint64) experimental.LinearMemory { return nilMemory{} }
func (nilMemory) Reallocate(uint64) []byte                       { return nil }
func (nilMemory) Free()                                          {}

// A panic inside the runtime while a module starts is that container's
// exit, not the process's.
func TestRuntimePanicIsTheContainersExit(t *testing.T) {
	module := []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00,
		0x03, 0x02, 0x01, 0x00,
		0x05, 0x03, 0x01, 0x00, 0x01,
		0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00,
		0x0a, 0x04, 0x01, 0x02, 0x00, 0x0b,
	}
	ctx := context.Background()
	h, err := newWasmHost(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer h.close(ctx)
	rt, err := h.runtime(ctx, 16)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := rt.CompileModule(ctx, module)
	if err != nil {
		t.Fatal(err)
	}
	p := h.start(ctx, rt, &compiled{mod: mod, alloc: nilMemory{}}, wasmSpec{stdout: io.Discard, stderr: io.Discard, pages: 16})
	<-p.Done()
	if ex := p.Exit(); ex.Reason != "ContainerCannotRun" || ex.Code != 128 {
		t.Fatalf("exit %+v, want ContainerCannotRun", ex)
	}
}

// A data section of empty segments builds no memory image (mapping
// zero bytes fails), and data far into memory is not expanded on the
// host.
func TestSplitDataRefusesEmptyAndFarImages(t *testing.T) {
	head := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	empty := append(bytes.Clone(head), 0x0b, 0x06, 0x01, 0x00, 0x41, 0x00, 0x0b, 0x00)
	if _, _, ok := splitData(empty); ok {
		t.Error("split a data section of no bytes")
	}
	// One byte at 0x7fff0000: a 2 GiB image from a 17-byte section.
	far := append(bytes.Clone(head), 0x0b, 0x0b, 0x01, 0x00, 0x41, 0x80, 0x80, 0xfc, 0xff, 0x07, 0x0b, 0x01, 0x2a)
	if _, _, ok := splitData(far); ok {
		t.Error("built a memory image of 2 GiB for one byte")
	}
}

// The sweep removes volumes of pods the agent no longer has, and keeps
// those of its pods.
func TestSweepRemovesGonePodsVolumes(t *testing.T) {
	dir := t.TempDir()
	a := &Agent{cfg: AgentConfig{Dir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, pods: map[string]*podRunner{"default/live": {uid: "live-uid"}}, quotas: map[string]*quota{}}
	for _, uid := range []string{"live-uid", "gone-uid"} {
		if err := os.MkdirAll(filepath.Join(a.volumesDir(uid), "data"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	a.sweepVolumes()
	if _, err := os.Stat(a.volumesDir("live-uid")); err != nil {
		t.Errorf("a live pod's volumes went: %v", err)
	}
	if _, err := os.Stat(a.volumesDir("gone-uid")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a gone pod's volumes stayed: %v", err)
	}
}
