package perf

import (
	"context"
	"fmt"
	"testing"

	"github.com/jetplane/jetplane/scheduler"
)

// BenchmarkCycle is the framework alone: cycles over an in-memory cache
// (built from the same fake nodes and pods), each placement assumed, no
// log; with the default plugins, and with the WebAssembly plugins of
// BenchmarkScheduling added. Its pods/s bounds what BenchmarkScheduling
// can reach; cpu-µs/pod is the process's CPU time per cycle (every
// goroutine's, the garbage collector's included), GOGC as jetplane serve
// sets it.
func BenchmarkCycle(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		for _, e := range []extra{builtins, sdk, upstream} {
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, e), func(b *testing.B) { benchCycle(b, nodes, e) })
		}
	}
}

func benchCycle(b *testing.B, nodes int, e extra) {
	defer asServed()()
	prof := profiles(b, e)[scheduler.DefaultSchedulerName]
	cache := scheduler.NewCache()
	for n := 0; n < nodes; n++ {
		node, err := scheduler.NodeFromObject(benchNode(b, n))
		if err != nil {
			b.Fatal(err)
		}
		cache.SetNode(node, uint64(n+1))
	}
	pods := make([]*scheduler.PodInfo, *benchPods)
	for i := range pods {
		pod, err := scheduler.PodFromObject(benchPod(b, i))
		if err != nil {
			b.Fatal(err)
		}
		pods[i] = scheduler.NewPodInfo(pod)
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	start := 0
	for i := 0; i < b.N; i++ {
		pi := pods[i%len(pods)]
		d := scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(cache.Snapshot(), uint64(i+1)), pi, start)
		if d.Node == "" {
			b.Fatal(d.Message())
		}
		start = d.NextStartIndex
		if i < len(pods) {
			cache.Assume(pi, d.Node)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/pod")
}
