package pod

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A Go module asleep in the host ends at its first sleep once stopped:
// it never gets a sleep cut short to ask again for (a spin until the
// runtime's own closer runs), and it ends Killed.
func TestAStoppedSleepingModuleEndsAtItsSleep(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "w.wasm")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/workload")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatal(err, string(msg))
	}
	h, err := newWasmHost(filepath.Join(dir, "c"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.close(context.Background()) })
	ctx := context.Background()
	rt, mod, err := h.compile(ctx, "d", out, 0)
	if err != nil {
		t.Fatal(err)
	}
	var procs []*wasmProc
	for range 20 {
		printed := make(chan struct{})
		p := h.start(ctx, rt, mod, wasmSpec{args: []string{"main", "idle"}, stdout: &signalWriter{c: printed}, stderr: io.Discard})
		select {
		case <-printed:
		case <-p.Done():
			t.Fatalf("the idle module ended: %+v", p.Exit())
		case <-time.After(time.Minute):
			t.Fatal("the idle module printed nothing in a minute")
		}
		procs = append(procs, p)
	}
	// Stopped together, as a scale-down stops them.
	for _, p := range procs {
		p.cancel()
	}
	for i, p := range procs {
		<-p.Done()
		if ex := p.Exit(); ex.Code != 137 || ex.Reason != "Killed" {
			t.Errorf("module %d ended %+v, want Killed (137)", i, ex)
		}
		if n := p.stoppedSleeps.Load(); n > 1 {
			t.Errorf("module %d slept %d times after it was stopped, want at most once", i, n)
		}
	}
}
