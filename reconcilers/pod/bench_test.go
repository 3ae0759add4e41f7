package pod_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
)

// phaseWatch records, per pod name, when the projection first showed it
// in phase.
type phaseWatch struct {
	mu   sync.Mutex
	seen map[string]time.Time
	wait map[string]chan struct{}
	stop func()
}

func watchPhase(tb testing.TB, c *cluster, phase string) *phaseWatch {
	tb.Helper()
	ch, stop, err := c.app.Store().Watch(projections.Query{Kind: "Pod"}, c.app.Store().Seq())
	if err != nil {
		tb.Fatal(err)
	}
	w := &phaseWatch{seen: map[string]time.Time{}, wait: map[string]chan struct{}{}, stop: stop}
	go func() {
		for change := range ch {
			if change.Object.GetStatus().GetPhase() != phase {
				continue
			}
			now := time.Now()
			w.mu.Lock()
			if _, ok := w.seen[change.Key.Name]; !ok {
				w.seen[change.Key.Name] = now
				if c := w.wait[change.Key.Name]; c != nil {
					close(c)
				}
			}
			w.mu.Unlock()
		}
	}()
	tb.Cleanup(stop)
	return w
}

// await blocks until name was seen, and returns when.
func (w *phaseWatch) await(tb testing.TB, name string) time.Time {
	w.mu.Lock()
	if t, ok := w.seen[name]; ok {
		w.mu.Unlock()
		return t
	}
	c := make(chan struct{})
	w.wait[name] = c
	w.mu.Unlock()
	select {
	case <-c:
	case <-time.After(10 * time.Minute):
		tb.Fatalf("%s not seen in 10 minutes", name)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[name]
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func benchCluster(b *testing.B) *cluster {
	c := startCluster(b, func(cfg *app.Config) { cfg.Pods.Agent.Heartbeat = 10 * time.Second })
	c.push("workload:v1", workload(b))
	// The image is cached and compiled before measuring.
	c.apply(podYAML("warm", "n1", "Never", "workload:v1", "hello"))
	c.waitPhase(podKey("default", "warm"), "Completed")
	return c
}

// BenchmarkPodStart: apply of a bound Pod whose image the node has cached
// → Running in the projection, one pod at a time. The reference is the
// same apply of a ConfigMap → in the projection, in the same run.
func BenchmarkPodStart(b *testing.B) {
	c := benchCluster(b)
	w := watchPhase(b, c, "Running")
	ctx := context.Background()
	pods := make([]time.Duration, 0, b.N)
	refs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("p%d", i)
		start := time.Now()
		if _, err := c.client.Apply(ctx, "bench", []byte(podYAML(name, "n1", "Never", "workload:v1", "hello")), ""); err != nil {
			b.Fatal(err)
		}
		pods = append(pods, w.await(b, name).Sub(start))
		start = time.Now()
		if _, err := c.client.Apply(ctx, "bench", fmt.Appendf(nil, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c%d, namespace: default}\ndata: {k: v}\n", i), ""); err != nil {
			b.Fatal(err)
		}
		refs = append(refs, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(pods, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(pods, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(percentile(refs, 0.5).Microseconds())/1000, "ref-configmap-p50-ms")
	b.ReportMetric(float64(percentile(refs, 0.99).Microseconds())/1000, "ref-configmap-p99-ms")
}

// BenchmarkPodStartRate: b.N bound pods applied in applies of 100, as
// fast as the API takes them; pods/s is b.N over the time from the first
// apply until every pod has run (Completed: the module printed and
// exited). The reference is b.N ConfigMaps applied the same way in the
// same run (applied/s).
func BenchmarkPodStartRate(b *testing.B) {
	c := benchCluster(b)
	ctx := context.Background()
	apply := func(doc func(i int) string) time.Time {
		start := time.Now()
		for i := 0; i < b.N; i += 100 {
			var batch strings.Builder
			for j := i; j < min(i+100, b.N); j++ {
				batch.WriteString("---\n" + doc(j))
			}
			if _, err := c.client.Apply(ctx, "bench", []byte(batch.String()), ""); err != nil {
				b.Fatal(err)
			}
		}
		return start
	}
	w := watchPhase(b, c, "Completed")
	b.ResetTimer()
	cpu0 := cpuTime()
	start := apply(func(i int) string { return podYAML(fmt.Sprintf("r%d", i), "n1", "Never", "workload:v1", "hello") })
	for i := range b.N {
		w.await(b, fmt.Sprintf("r%d", i))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pods/s")
	// The whole process (API, log, reconcilers, agent, modules): how
	// many cores' worth a pod start costs, whatever else shares them.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/pod")
	start = apply(func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: r%d, namespace: default}\ndata: {k: v}\n", i)
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ref-configmaps/s")
}

// BenchmarkIdlePodMemory: b.N pods running an idle Go module (started,
// then asleep); memory is the process's growth over b.N, after a GC:
// the Go heap and stacks in use (where wazero keeps the modules' linear
// memory) and the resident set (after returning freed memory to the OS,
// so that runs in one process do not hide each other's growth).
func BenchmarkIdlePodMemory(b *testing.B) {
	c := benchCluster(b)
	w := watchPhase(b, c, "Running")
	heap0, rss0 := memory()
	b.ResetTimer()
	for i := 0; i < b.N; i += 50 {
		var batch strings.Builder
		for j := i; j < min(i+50, b.N); j++ {
			batch.WriteString("---\n" + podYAML(fmt.Sprintf("idle%d", j), "n1", "Never", "workload:v1", "idle"))
		}
		c.apply(batch.String())
	}
	for i := range b.N {
		w.await(b, fmt.Sprintf("idle%d", i))
	}
	b.StopTimer()
	time.Sleep(time.Second) // let the modules reach their sleep
	heap1, rss1 := memory()
	b.ReportMetric(float64(heap1-heap0)/float64(b.N)/(1<<20), "heap-MiB/pod")
	b.ReportMetric(float64(rss1-rss0)/float64(b.N)/(1<<20), "rss-MiB/pod")
}

func memory() (heap, rss int64) {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		var size, res int64
		if _, err := fmt.Sscan(string(b), &size, &res); err == nil {
			rss = res * int64(os.Getpagesize())
		}
	}
	return int64(m.HeapInuse + m.StackInuse), rss
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
