package pod

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

// BenchmarkModuleStartParts splits a Go module's start, one start after
// another, into what the host does and what the guest does:
// instantiate-only creates the instance (memory, tables, globals) and
// runs nothing; empty runs a Go program whose main returns at once (the
// Go runtime's own start and exit); hello runs the test workload, which
// prints two lines; idle starts the workload's idle mode (print, then
// sleep) until it printed, keeping every instance alive, and stops them
// all at the end (cpu-ms/stop). cpu-ms/start is this process's CPU time
// per start.
func BenchmarkModuleStartParts(b *testing.B) {
	build := func(pkg string) string {
		out := filepath.Join(b.TempDir(), filepath.Base(pkg)+".wasm")
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if msg, err := cmd.CombinedOutput(); err != nil {
			b.Fatal(err, string(msg))
		}
		return out
	}
	h, err := newWasmHost(filepath.Join(b.TempDir(), "c"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.close(context.Background()) })
	ctx := context.Background()
	for _, tc := range []struct{ name, pkg string }{
		{"instantiate-only", "./testdata/empty"},
		{"empty", "./testdata/empty"},
		{"hello", "./testdata/workload"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rt, mod, err := h.compile(ctx, tc.name, build(tc.pkg), 0)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			for range b.N {
				if tc.name == "instantiate-only" {
					inst, err := rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, mod.alloc), mod.mod, wazero.NewModuleConfig().WithName("").WithStartFunctions())
					if err != nil {
						b.Fatal(err)
					}
					_ = inst.Close(ctx)
					continue
				}
				p := h.start(ctx, rt, mod, wasmSpec{args: []string{"main", "hello"}, stdout: io.Discard, stderr: io.Discard})
				<-p.Done()
				if p.Exit().Code != 0 {
					b.Fatal(p.Exit())
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/start")
		})
	}
	// idle: b.N modules that print and then sleep, all alive together as
	// a Deployment's replicas are; started one after another (each until
	// it printed), then stopped together.
	b.Run("idle", func(b *testing.B) {
		rt, mod, err := h.compile(ctx, "idle", build("./testdata/workload"), 0)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		cpu0 := cpuTime()
		procs := make([]*wasmProc, 0, b.N)
		for range b.N {
			printed := make(chan struct{})
			p := h.start(ctx, rt, mod, wasmSpec{args: []string{"main", "idle"}, stdout: &signalWriter{c: printed}, stderr: io.Discard})
			select {
			case <-printed:
			case <-p.Done():
				b.Fatal(p.Exit())
			}
			procs = append(procs, p)
		}
		cpu1 := cpuTime()
		for _, p := range procs {
			p.cancel()
		}
		for _, p := range procs {
			<-p.Done()
		}
		b.ReportMetric(float64((cpu1-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/start")
		b.ReportMetric(float64((cpuTime()-cpu1).Microseconds())/1000/float64(b.N), "cpu-ms/stop")
	})
}

// signalWriter closes c at the first write.
type signalWriter struct {
	c    chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.c) })
	return len(p), nil
}
