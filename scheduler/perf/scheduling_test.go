package perf

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/scheduler"
	"github.com/jetplane/jetplane/scheduler/wasm"
	"github.com/jetplane/jetplane/schemas"
)

// The plugins a scheduling benchmark adds to the default ones.
type extra int

const (
	builtins extra = iota
	// sdk: the example WebAssembly filter (labelfilter) and score
	// (nodenumber), built with scheduler/guest (batch calls, node cache).
	sdk
	// upstream: one guest of kube-scheduler-wasm-extension's shape
	// (testdata/upstream: a label filter that decodes each node, and
	// NodeNumber's score), configured as upstream configures it.
	upstream
)

func (e extra) String() string { return [...]string{"builtins", "wasm", "upstream"}[e] }

// profiles returns the default profile, with the plugins of e added.
func profiles(tb testing.TB, e extra) map[string]*scheduler.Profile {
	tb.Helper()
	cfg := scheduler.DefaultConfig()
	cfg.Parallelism = *benchParallel
	if e == upstream {
		cfg.Profiles = []scheduler.ProfileConfig{{
			SchedulerName: scheduler.DefaultSchedulerName,
			Plugins:       scheduler.PluginsConfig{MultiPoint: scheduler.PluginSet{Enabled: []scheduler.PluginRef{{Name: "NodeNumber", Weight: 1}}}},
			PluginConfig: []scheduler.PluginConfig{{Name: "NodeNumber", Args: map[string]any{
				"guestURL": "file://" + guestPath(tb, "upstream"), "guestConfig": `{"filterLabel": "topology.kubernetes.io/zone"}`}}},
		}}
	}
	if e == sdk {
		cfg.Profiles = []scheduler.ProfileConfig{{
			SchedulerName: scheduler.DefaultSchedulerName,
			Plugins: scheduler.PluginsConfig{MultiPoint: scheduler.PluginSet{Enabled: []scheduler.PluginRef{
				{Name: "labelfilter"}, {Name: "nodenumber", Weight: 1}}}},
			PluginConfig: []scheduler.PluginConfig{
				{Name: "labelfilter", Args: map[string]any{"guestPath": guestPath(tb, "labelfilter")}},
				{Name: "nodenumber", Args: map[string]any{"guestPath": guestPath(tb, "nodenumber")}},
			},
		}}
	}
	ps, err := cfg.Build(wasm.Registry())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { closePlugins(ps) })
	return ps
}

func closePlugins(ps map[string]*scheduler.Profile) {
	for _, p := range ps {
		for _, pl := range p.Filter {
			if c, ok := pl.(wasm.Closer); ok {
				c.Close()
			}
		}
		for _, pl := range p.Score {
			if c, ok := pl.Plugin.(wasm.Closer); ok {
				c.Close()
			}
		}
	}
}

// BenchmarkScheduling places -sched.pods pending pods on 1,000 and 5,000
// nodes with the default plugins; with one WebAssembly filter and one
// WebAssembly score built with the SDK added (wasm); and with one guest of
// upstream's shape filtering and scoring added (upstream); through Scheduler.Schedule as the pod
// reconciler calls it (-sched.workers at once), until every Bound event is
// acknowledged by the log (Schedule returns once the event is queued). Setup (nodes and pods appended and projected)
// is not timed. The garbage collector runs as jetplane serve runs it
// (GOGC=200 unless GOGC is set). cpu-µs/pod is the process's CPU time over the same span
// per pod: the scheduler, the log, the embedded NATS server and the
// projection together.
func BenchmarkScheduling(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		for _, e := range []extra{builtins, sdk, upstream} {
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, e), func(b *testing.B) { benchScheduling(b, nodes, *benchPods, e) })
		}
	}
}

func benchScheduling(b *testing.B, nodes, pods int, withWasm extra) {
	defer asServed()()
	var total, cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := newCluster(b, profiles(b, withWasm))
		objs := make([]*schemas.Object, 0, nodes+pods)
		for n := 0; n < nodes; n++ {
			objs = append(objs, benchNode(b, n))
		}
		for p := 0; p < pods; p++ {
			objs = append(objs, benchPod(b, p))
		}
		c.apply(b, objs)
		// The cache lists the nodes and pods before the timed span, as
		// kube-scheduler's informers do before its first binding.
		if _, err := c.sched.SyncCache(); err != nil {
			b.Fatal(err)
		}
		stopProfile := startProfile(b, i)
		b.StartTimer()
		began, cpu0 := time.Now(), cpuTime()
		placed := schedulePods(b, c, pods)
		if err := c.sched.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		total += time.Since(began)
		cpu += cpuTime() - cpu0
		b.StopTimer()
		stopProfile()
		if placed != pods {
			b.Fatalf("placed %d of %d pods", placed, pods)
		}
		if bound := c.bound(b); bound != pods {
			b.Fatalf("%d of %d pods bound in the log", bound, pods)
		}
		c.stop()
	}
	b.ReportMetric(float64(pods*b.N)/total.Seconds(), "pods/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(pods*b.N), "cpu-µs/pod")
}

// startProfile starts the CPU profile of -sched.cpuprofile and writes the
// first heap profile of -sched.memprofile for run i (the files, with ".i"
// after the first run) and returns what stops and writes the second.
func startProfile(tb testing.TB, i int) func() {
	suffix := ""
	if i > 0 {
		suffix = fmt.Sprintf(".%d", i)
	}
	create := func(name string) *os.File {
		f, err := os.Create(name)
		if err != nil {
			tb.Fatal(err)
		}
		return f
	}
	heap := func(name string) {
		if *benchHeap == "" {
			return
		}
		f := create(*benchHeap + suffix + name)
		defer f.Close()
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			tb.Fatal(err)
		}
	}
	heap(".start")
	if *benchProfile == "" {
		return func() { heap(".end") }
	}
	f := create(*benchProfile + suffix)
	if err := pprof.StartCPUProfile(f); err != nil {
		tb.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		heap(".end")
	}
}

func schedulePods(tb testing.TB, c *cluster, pods int) int {
	var placed, failures atomic.Int64
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < *benchWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= pods {
					return
				}
				obj := c.store.Get(projections.Key{Kind: "Pod", Namespace: "bench", Name: fmt.Sprintf("pod-%05d", i)})
				res, err := c.sched.Schedule(context.Background(), obj)
				if err != nil {
					tb.Error(err)
					return
				}
				if len(res.Conditions) > 0 && res.Conditions[0].Status == "True" {
					placed.Add(1)
				} else if len(res.Conditions) > 0 && failures.Add(1) <= 3 {
					tb.Logf("pod-%05d not placed: %s: %s", i, res.Conditions[0].Reason, res.Conditions[0].Message)
				}
			}
		}()
	}
	wg.Wait()
	return int(placed.Load())
}

// BenchmarkWasmFilter is WebAssembly Filter calls with the guest's node
// cache warm (every node decoded once), over 1,000 nodes: one node per
// call (call: the median call as ns/filter-p50 beside the mean ns/op), and
// batch calls of 64 nodes (batch64: ns/node, the cost per node judged in
// a batch call; decision 0031).
func BenchmarkWasmFilter(b *testing.B) {
	pl, err := wasm.Load(context.Background(), "labelfilter", wasm.Args{GuestPath: guestPath(b, "labelfilter")})
	if err != nil {
		b.Fatal(err)
	}
	defer pl.(wasm.Closer).Close()
	f := pl.(scheduler.BatchFilterPlugin)
	var infos []*scheduler.NodeInfo
	for n := 0; n < 1000; n++ {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", n), Labels: map[string]string{"zone": fmt.Sprint(n % 10)}}}
		infos = append(infos, scheduler.NewNodeInfo(node, uint64(n+1)))
	}
	snap := scheduler.NewSnapshot(1, infos)
	pod := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "bench"}, Spec: v1.PodSpec{NodeSelector: map[string]string{"zone": "3"}}})
	state := scheduler.NewCycleState(snap, 1)
	ctx := context.Background()
	for _, n := range infos {
		f.Filter(ctx, state, pod, n)
	}
	b.Run("call", func(b *testing.B) {
		durs := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			n := infos[i%len(infos)]
			t0 := time.Now()
			st := f.Filter(ctx, state, pod, n)
			durs = append(durs, time.Since(t0))
			if st != nil && st.Code == scheduler.Error {
				b.Fatal(st)
			}
		}
		b.StopTimer()
		sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
		b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "ns/filter-p50")
	})
	b.Run("batch64", func(b *testing.B) {
		out := make([]*scheduler.Status, 64)
		began := time.Now()
		for i := 0; i < b.N; i++ {
			lo := (i * 64) % (len(infos) - 64)
			f.FilterNodes(ctx, state, pod, infos[lo:lo+64], out)
			for _, st := range out {
				if st != nil && st.Code == scheduler.Error {
					b.Fatal(st)
				}
			}
		}
		b.ReportMetric(float64(time.Since(began).Nanoseconds())/float64(b.N*64), "ns/node")
	})
}

// BenchmarkUpstreamFilter is Filter calls of the upstream-shaped guest
// (testdata/upstream with a label filter: each call asks the host for the
// node's name and the node, and decodes the node's labels), one node per
// call on its cycle's instance, over 1,000 nodes; the median call as
// ns/filter-p50 beside the mean ns/op, to compare with
// BenchmarkWasmFilter/call.
func BenchmarkUpstreamFilter(b *testing.B) {
	pl, err := wasm.Load(context.Background(), "upstream", wasm.Args{GuestURL: "file://" + guestPath(b, "upstream"),
		GuestConfig: `{"filterLabel": "zone=3"}`})
	if err != nil {
		b.Fatal(err)
	}
	defer pl.(wasm.Closer).Close()
	f := pl.(scheduler.FilterPlugin)
	var infos []*scheduler.NodeInfo
	for n := 0; n < 1000; n++ {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", n), Labels: map[string]string{"zone": fmt.Sprint(n % 10)}}}
		infos = append(infos, scheduler.NewNodeInfo(node, uint64(n+1)))
	}
	state := scheduler.NewCycleState(scheduler.NewSnapshot(1, infos), 1)
	pod := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "bench"}})
	ctx := context.Background()
	pl.(scheduler.PreFilterPlugin).PreFilter(ctx, state, pod)
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		st := f.Filter(ctx, state, pod, infos[i%len(infos)])
		durs = append(durs, time.Since(t0))
		if st != nil && st.Code == scheduler.Error {
			b.Fatal(st)
		}
	}
	b.StopTimer()
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds()), "ns/filter-p50")
}

// BenchmarkNativeFilter is the same filter written natively, for scale.
func BenchmarkNativeFilter(b *testing.B) {
	f := scheduler.NodeAffinity{}
	var infos []*scheduler.NodeInfo
	for n := 0; n < 1000; n++ {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%05d", n), Labels: map[string]string{"zone": fmt.Sprint(n % 10)}}}
		infos = append(infos, scheduler.NewNodeInfo(node, uint64(n+1)))
	}
	pod := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "bench"}, Spec: v1.PodSpec{NodeSelector: map[string]string{"zone": "3"}}})
	state := scheduler.NewCycleState(scheduler.NewSnapshot(1, infos), 1)
	f.PreFilter(context.Background(), state, pod)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.Filter(context.Background(), state, pod, infos[i%len(infos)])
	}
}
