package workload_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// counter follows the pods of a namespace through the projection's watch
// and tells when n of them, matching want, are running and ready.
type counter struct {
	ch   <-chan projections.Change
	stop func()
	live map[string]*schemas.Object
}

func watchPods(tb testing.TB, c *cluster, ns string) *counter {
	tb.Helper()
	ch, stop, err := c.app.Store().Watch(projections.Query{Kind: "Pod", Namespace: ns}, c.app.Store().Seq())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return &counter{ch: ch, stop: stop, live: map[string]*schemas.Object{}}
}

// until consumes changes until cond holds over the live pods.
func (w *counter) until(tb testing.TB, what string, d time.Duration, cond func(live map[string]*schemas.Object) bool) {
	tb.Helper()
	timeout := time.After(d)
	for !cond(w.live) {
		select {
		case ch := <-w.ch:
			if ch.Object == nil || ch.Object.GetStatus().GetGoal() == projections.GoalDeleted {
				delete(w.live, ch.Key.Name)
			} else {
				w.live[ch.Key.Name] = ch.Object
			}
		case <-timeout:
			tb.Fatalf("%s: not after %s (%d live pods)", what, d, len(w.live))
		}
	}
}

func runningCount(live map[string]*schemas.Object, where func(*schemas.Object) bool) int {
	n := 0
	for _, p := range live {
		if ready(p) && (where == nil || where(p)) {
			n++
		}
	}
	return n
}

func bareFleet(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: bare-%d, namespace: ref, labels: {app: bare}}\nspec:\n  containers:\n  - {name: web, image: module:v1, args: [serve, a]}\n", i)
	}
	return []byte(b.String())
}

// BenchmarkWorkloads measures, in one run on the local node: 1,000 bare
// pods applied at once → all Running (the reference), then a Deployment of
// 1,000 replicas → all Running, a rolling update of it → every pod of the
// new template Running and the old ones gone, and, with a second node, the
// time from a node's eviction to its pods replaced on the other node.
func BenchmarkWorkloads(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("JETPLANE_BENCH_REPLICAS")); err == nil && v > 0 {
		n = v // a smaller fleet, to try the benchmark out
	}
	for range b.N {
		c := startCluster(b, func(cfg *app.Config) {
			cfg.Pods.Agent.Pods = 3 * n
			cfg.Pods.Agent.Heartbeat = time.Second
			cfg.Pods.NodeGrace, cfg.Pods.NodeEviction = 3*time.Second, time.Second
		})
		ctx := context.Background()
		c.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: ref}\n")
		// Warm: the module compiled and cached on the node.
		c.apply(deploymentYAML(1, "module:v1", "a"))
		c.waitRunning(webKey, 1, 5*time.Minute, nil)
		c.delete(webKey)
		c.poll("warm-up gone", time.Minute, func() bool { return len(c.pods(webKey)) == 0 })

		ref := watchPods(b, c, "ref")
		start := time.Now()
		if _, err := c.client.Apply(ctx, "bench", bareFleet(n), ""); err != nil {
			b.Fatal(err)
		}
		ref.until(b, "bare pods running", 10*time.Minute, func(l map[string]*schemas.Object) bool { return runningCount(l, nil) == n })
		bare := time.Since(start)
		c.delete(projections.Key{Kind: "Namespace", Name: "ref"})
		ref.until(b, "bare pods gone", 10*time.Minute, func(l map[string]*schemas.Object) bool { return len(l) == 0 })

		w := watchPods(b, c, "default")
		start = time.Now()
		c.apply(deploymentYAML(n, "module:v1", "a"))
		w.until(b, "deployment running", 10*time.Minute, func(l map[string]*schemas.Object) bool { return runningCount(l, nil) == n })
		deploy := time.Since(start)

		start = time.Now()
		c.apply(strings.Replace(deploymentYAML(n, "module:v2", "b"), "maxSurge: 1, maxUnavailable: 1", "maxSurge: 25%, maxUnavailable: 25%", 1))
		isNew := func(p *schemas.Object) bool { return argsOf(p) == "serve b" }
		w.until(b, "rollout done", 10*time.Minute, func(l map[string]*schemas.Object) bool {
			return runningCount(l, isNew) == n && len(l) == n
		})
		rollout := time.Since(start)
		c.delete(webKey)
		w.until(b, "deployment gone", 10*time.Minute, func(l map[string]*schemas.Object) bool { return len(l) == 0 })

		// Node loss: 100 replicas over n1 and n2; n2 stops.
		stop := c.startAgent("n2")
		c.apply(deploymentYAML(100, "module:v1", "a"))
		w.until(b, "100 running", 5*time.Minute, func(l map[string]*schemas.Object) bool { return runningCount(l, nil) == 100 })
		lost := 0
		for _, p := range w.live {
			if nodeOf(p) == "n2" {
				lost++
			}
		}
		stop()
		stopped := time.Now()
		w.until(b, "replaced on n1", 5*time.Minute, func(l map[string]*schemas.Object) bool {
			return runningCount(l, func(p *schemas.Object) bool { return nodeOf(p) == "n1" }) == 100
		})
		replace := time.Since(stopped)

		b.ReportMetric(bare.Seconds(), "ref-bare-pods-s")
		b.ReportMetric(deploy.Seconds(), "deploy-s")
		b.ReportMetric(deploy.Seconds()/bare.Seconds(), "deploy/bare")
		b.ReportMetric(rollout.Seconds(), "rollout-s")
		b.ReportMetric(float64(lost), "pods-lost")
		b.ReportMetric(replace.Seconds(), "replace-after-kill-s")
		b.ReportMetric((replace - 4*time.Second).Seconds(), "replace-after-eviction-s")
	}
}
