package pod

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/experimental"
)

// BenchmarkModuleStartParts splits a Go module's start, one start after
// another, into what the host does and what the guest does:
// instantiate-only creates the instance (memory, tables, globals) and
// runs nothing; empty runs a Go program whose main returns at once (the
// Go runtime's own start and exit); hello runs the test workload, which
// prints two lines. cpu-ms/start is this process's CPU time per start.
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
}
