package app_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/app"
)

// BenchmarkSizing measures what docs/OPERATIONS.md sizes jetplane by: N
// objects (default 100,000; JETPLANE_SIZING_N) applied over the API in
// batches of 1,000, then each updated once. It reports the heap the
// objects take (after a GC, the whole process: NATS server, log,
// projection), events per second and per CPU-second, and the bytes each
// event adds to the log on disk. With default durability and with
// --sync=always.
func BenchmarkSizing(b *testing.B) {
	n := 100_000
	if v := os.Getenv("JETPLANE_SIZING_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	for _, sync := range []bool{false, true} {
		name := "default"
		if sync {
			name = "sync-always"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				sizing(b, n, sync)
			}
		})
	}
}

func sizing(b *testing.B, n int, syncAlways bool) {
	dir := b.TempDir()
	a, c := startApp(b, app.Config{DataDir: dir, SyncAlways: syncAlways})
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	heap0 := heap()
	disk0 := dirBytes(b, dir)
	phase := func(gen int) (eventsPerSec, perCPUSec float64) {
		start, cpu0 := time.Now(), cpuTime()
		for i := 0; i < n; i += 1000 {
			var sb strings.Builder
			for j := i; j < min(i+1000, n); j++ {
				fmt.Fprintf(&sb, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: ns-%d, labels: {app: sizing, tier: t%d}}\ndata: {revision: \"%d\", payload: \"%s\"}\n",
					j, j%100, j%7, gen, strings.Repeat("x", 200))
			}
			if _, err := c.Apply(b.Context(), "sizing", []byte(sb.String()), ""); err != nil {
				b.Fatal(err)
			}
		}
		wall, cpu := time.Since(start), cpuTime()-cpu0
		return float64(n) / wall.Seconds(), float64(n) / cpu.Seconds()
	}
	createRate, createPerCPU := phase(1)
	heap1 := heap()
	disk1 := dirBytes(b, dir)
	updateRate, updatePerCPU := phase(2)
	disk2 := dirBytes(b, dir)
	if got := a.Store().Len(); got != n {
		b.Fatalf("store holds %d objects, want %d", got, n)
	}
	b.ReportMetric(float64(heap1-heap0)/float64(n)*100_000/(1<<20), "MiB-heap/100k-objects")
	b.ReportMetric(createRate, "creates/s")
	b.ReportMetric(createPerCPU, "creates/cpu-s")
	b.ReportMetric(updateRate, "updates/s")
	b.ReportMetric(updatePerCPU, "updates/cpu-s")
	b.ReportMetric(float64(disk1-disk0)/float64(n), "log-bytes/create")
	b.ReportMetric(float64(disk2-disk1)/float64(n), "log-bytes/update")
}

// dirBytes is the size of the files under dir.
func dirBytes(b *testing.B, dir string) int64 {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			total += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}
