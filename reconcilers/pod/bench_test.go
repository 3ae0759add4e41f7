package pod_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/schemas"
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
			if pod.StateOf(change.Object.GetStatus()) != phase {
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
	cpu0, seq0, faults0 := cpuTime(), c.app.Store().Seq(), minorFaults()
	start := apply(func(i int) string { return podYAML(fmt.Sprintf("r%d", i), "n1", "Never", "workload:v1", "hello") })
	for i := range b.N {
		w.await(b, fmt.Sprintf("r%d", i))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pods/s")
	// Events in the log per pod: the apply, and the agent's reports.
	b.ReportMetric(float64(c.app.Store().Seq()-seq0)/float64(b.N), "events/pod")
	// The whole process (API, log, reconcilers, agent, modules): how
	// many cores' worth a pod start costs, whatever else shares them.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/pod")
	// The whole process's minor page faults (most of them a module's
	// memory being touched for the first time).
	b.ReportMetric(float64(minorFaults()-faults0)/float64(b.N), "page-faults/pod")
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

// agentProcessEnv makes the test binary a node agent process (for
// BenchmarkAgentProcess): "NATS-URL CREDS-FILE NODE DIR COMPILE-CACHE".
const agentProcessEnv = "JP_POD_BENCH_AGENT"

func runAgentProcess() {
	f := strings.Fields(os.Getenv(agentProcessEnv))
	nc, err := events.Connect(events.ConnectOptions{URLs: f[0], CredsFile: f[1], Name: "node " + f[2]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	conn, err := events.OpenNode(ctx, nc, f[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ag, err := pod.NewAgent(pod.AgentConfig{Node: f[2], Conn: conn, Dir: f[3], CompileCache: f[4],
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = ag.Start(ctx)
	os.Exit(0)
}

// processCPU is a process's user and system CPU time so far, from /proc.
func processCPU(tb testing.TB, pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// Fields after the command name (which is in parentheses): state is
	// the 3rd field of the whole line, utime and stime the 14th and 15th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	var ut, st int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// BenchmarkAgentProcess: the node agent in its own process (as `jetplane
// node` runs, with a node credential, over TCP), the rest of jetplane in
// this one; b.N bound pods applied in applies of 100 until all ran, as in
// BenchmarkPodStartRate. agent-cpu-ms/pod is the agent process's CPU per
// pod: what one node agent needs per start, whatever the control plane
// costs; 2000 / it is the starts/s an agent could sustain on two cores of
// its own.
func BenchmarkAgentProcess(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc")
	}
	c := benchCluster(b)
	creds, err := c.app.Creds().Create(auth.RoleNode, "n7")
	if err != nil {
		b.Fatal(err)
	}
	credsFile := filepath.Join(b.TempDir(), "n7.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !c.app.Creds().Loaded(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the node credential was not loaded in a minute")
		}
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), agentProcessEnv+"="+strings.Join([]string{c.app.NATSURL(), credsFile, "n7", b.TempDir(), compileCache}, " "))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	c.wait(projections.Key{Kind: "Node", Name: "n7"}, "Ready", 2*time.Minute, func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Ready" })
	c.apply(podYAML("warm7", "n7", "Never", "workload:v1", "hello"))
	c.waitPhase(podKey("default", "warm7"), "Completed")
	w := watchPhase(b, c, "Completed")
	ctx := context.Background()
	b.ResetTimer()
	agent0, cpu0 := processCPU(b, cmd.Process.Pid), cpuTime()
	start := time.Now()
	for i := 0; i < b.N; i += 100 {
		var batch strings.Builder
		for j := i; j < min(i+100, b.N); j++ {
			batch.WriteString("---\n" + podYAML(fmt.Sprintf("a%d", j), "n7", "Never", "workload:v1", "hello"))
		}
		if _, err := c.client.Apply(ctx, "bench", []byte(batch.String()), ""); err != nil {
			b.Fatal(err)
		}
	}
	for i := range b.N {
		w.await(b, fmt.Sprintf("a%d", i))
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pods/s")
	b.ReportMetric(float64((processCPU(b, cmd.Process.Pid)-agent0).Microseconds())/1000/float64(b.N), "agent-cpu-ms/pod")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "control-plane-cpu-ms/pod")
}
