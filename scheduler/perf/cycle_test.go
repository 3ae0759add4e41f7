package perf

import (
	"context"
	"fmt"
	"testing"

	"github.com/jetplane/jetplane/scheduler"
)

// BenchmarkCycle is the framework alone: cycles over an in-memory cache
// (built from the same fake nodes and pods), each placement assumed, no
// log. Its pods/s bounds what BenchmarkScheduling can reach.
func BenchmarkCycle(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			profiles := profiles(b, builtins)
			prof := profiles[scheduler.DefaultSchedulerName]
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
		})
	}
}
