package pod

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkModuleStart is the floor under a pod start: the wasm host alone
// instantiating the test workload (a Go program that prints and exits),
// compiled before the timer starts, one after another. cpu-ms/start is
// this process's CPU time per start (robust on a shared machine).
func BenchmarkModuleStart(b *testing.B) {
	dir := b.TempDir()
	out := filepath.Join(dir, "w.wasm")
	cmd := exec.Command("go", "build", "-o", out, "./testdata/workload")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatal(err, string(msg))
	}
	h, err := newWasmHost(filepath.Join(dir, "c"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rt, mod, err := h.compile(ctx, "d", out, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start, cpu0, faults0 := time.Now(), cpuTime(), minorFaults()
	for range b.N {
		p := h.start(ctx, rt, mod, wasmSpec{args: []string{"main", "hello"}, stdout: io.Discard, stderr: io.Discard})
		<-p.Done()
		if p.Exit().Code != 0 {
			b.Fatal(p.Exit())
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "starts/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/start")
	b.ReportMetric(float64(minorFaults()-faults0)/float64(b.N), "page-faults/start")
}

// minorFaults is the process's minor page faults so far.
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
