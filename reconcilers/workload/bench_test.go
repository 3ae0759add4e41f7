package workload_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// counter follows the pods of a namespace through the projection's watch
// and counts, as changes arrive, the live pods that match its predicate:
// checking the whole fleet after every change cost the benchmark's own
// process seconds of CPU per thousand pods, taken from what it measures.
type counter struct {
	ch      <-chan projections.Change
	stop    func()
	live    map[string]*schemas.Object
	match   func(*schemas.Object) bool
	matched map[string]bool
	trace   *timeline
}

func watchPods(tb testing.TB, c *cluster, ns string) *counter {
	tb.Helper()
	ch, stop, err := c.app.Store().Watch(projections.Query{Kind: "Pod", Namespace: ns}, c.app.Store().Seq())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	w := &counter{ch: ch, stop: stop, live: map[string]*schemas.Object{}, matched: map[string]bool{}}
	if os.Getenv("JETPLANE_BENCH_TRACE") != "" {
		w.trace = newTimeline()
		// The work items handed to node n1, as its agent receives them.
		ctx, cancel := context.WithCancel(context.Background())
		tb.Cleanup(cancel)
		conn, err := events.OpenNode(ctx, c.app.Log().Conn(), "n1")
		if err != nil {
			tb.Fatal(err)
		}
		go func() {
			_ = conn.WatchWork(ctx, func(wns, name string, _ []byte, deleted bool) {
				if wns == ns && !deleted {
					w.trace.work(name)
				}
			})
		}()
	}
	return w
}

// until consumes changes until done holds for the number of live pods
// matching match and the number of live pods.
func (w *counter) until(tb testing.TB, what string, d time.Duration, match func(*schemas.Object) bool, done func(matched, live int) bool) {
	tb.Helper()
	w.match = match
	w.matched = map[string]bool{}
	for name, p := range w.live {
		if match(p) {
			w.matched[name] = true
		}
	}
	timeout := time.After(d)
	for !done(len(w.matched), len(w.live)) {
		select {
		case ch := <-w.ch:
			name := ch.Key.Name
			if ch.Object == nil || ch.Object.GetStatus().GetGoal() == projections.GoalDeleted {
				delete(w.live, name)
				delete(w.matched, name)
				continue
			}
			w.live[name] = ch.Object
			if w.trace != nil {
				w.trace.see(name, ch.Object)
			}
			if match(ch.Object) {
				w.matched[name] = true
			} else {
				delete(w.matched, name)
			}
		case <-timeout:
			tb.Fatalf("%s: not after %s (%d live pods, %d matching)", what, d, len(w.live), len(w.matched))
		}
	}
	if w.trace != nil {
		w.trace.print(tb, what)
		w.trace.reset()
	}
}

// running is a pod that is Ready and, when where is set, satisfies it.
func running(where func(*schemas.Object) bool) func(*schemas.Object) bool {
	return func(p *schemas.Object) bool { return ready(p) && (where == nil || where(p)) }
}

// timeline records when each pod was first seen in each stage (created,
// bound, each state its agent reported), to tell where the time of a
// benchmark goes (JETPLANE_BENCH_TRACE=1).
type timeline struct {
	mu    sync.Mutex
	start time.Time
	first map[string]map[string]time.Duration // stage → pod → since start
}

func newTimeline() *timeline {
	return &timeline{start: time.Now(), first: map[string]map[string]time.Duration{}}
}

func (t *timeline) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.start, t.first = time.Now(), map[string]map[string]time.Duration{}
}

func (t *timeline) work(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mark(name, "1w-work", time.Since(t.start))
}

func (t *timeline) mark(name, stage string, at time.Duration) {
	m := t.first[stage]
	if m == nil {
		m = map[string]time.Duration{}
		t.first[stage] = m
	}
	if _, ok := m[name]; !ok {
		m[name] = at
	}
}

func (t *timeline) see(name string, p *schemas.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at := time.Since(t.start)
	mark := func(stage string) {
		t.mark(name, stage, at)
	}
	mark("0-created")
	if nodeOf(p) != "" {
		mark("1-bound")
	}
	for _, c := range p.GetStatus().GetConditions() {
		if c.GetType() == "Ready" && c.GetReason() != "" {
			mark("2-" + c.GetReason())
		}
	}
}

func (t *timeline) print(tb testing.TB, what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	stages := make([]string, 0, len(t.first))
	for s := range t.first {
		stages = append(stages, s)
	}
	sort.Strings(stages)
	for _, s := range stages {
		var ds []time.Duration
		for _, d := range t.first[s] {
			ds = append(ds, d)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		q := func(f float64) time.Duration { return ds[int(f*float64(len(ds)-1))].Round(time.Millisecond) }
		tb.Logf("%s: %-22s n=%4d first %8s p10 %8s p50 %8s p90 %8s last %8s", what, s, len(ds), q(0), q(0.1), q(0.5), q(0.9), q(1))
	}
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
		cpu0, seq0 := cpuTime(), c.app.Store().Seq()
		start := time.Now()
		if _, err := c.client.Apply(ctx, "bench", bareFleet(n), ""); err != nil {
			b.Fatal(err)
		}
		ref.until(b, "bare pods running", 10*time.Minute, running(nil), func(m, _ int) bool { return m == n })
		bare := time.Since(start)
		bareCPU, bareEvents := cpuTime()-cpu0, c.app.Store().Seq()-seq0
		c.delete(projections.Key{Kind: "Namespace", Name: "ref"})
		ref.until(b, "bare pods gone", 10*time.Minute, running(nil), func(_, l int) bool { return l == 0 })

		w := watchPods(b, c, "default")
		cpu0, seq0 = cpuTime(), c.app.Store().Seq()
		start = time.Now()
		c.apply(deploymentYAML(n, "module:v1", "a"))
		w.until(b, "deployment running", 10*time.Minute, running(nil), func(m, _ int) bool { return m == n })
		deploy := time.Since(start)
		deployCPU, deployEvents := cpuTime()-cpu0, c.app.Store().Seq()-seq0
		// CPU seconds of the whole process (jetplane, its agent and the
		// modules): on a shared machine a steadier figure than the time.
		b.ReportMetric(bareCPU.Seconds(), "ref-bare-pods-cpu-s")
		b.ReportMetric(deployCPU.Seconds(), "deploy-cpu-s")
		// Events in the log per pod, up to the last pod Running.
		b.ReportMetric(float64(bareEvents)/float64(n), "ref-bare-events/pod")
		b.ReportMetric(float64(deployEvents)/float64(n), "deploy-events/pod")
		if os.Getenv("JETPLANE_BENCH_DEPLOY_ONLY") != "" {
			// Only the first two figures, to look at them quickly.
			b.ReportMetric(bare.Seconds(), "ref-bare-pods-s")
			b.ReportMetric(deploy.Seconds(), "deploy-s")
			b.ReportMetric(deploy.Seconds()/bare.Seconds(), "deploy/bare")
			continue
		}

		cpu0 = cpuTime()
		start = time.Now()
		c.apply(strings.Replace(deploymentYAML(n, "module:v2", "b"), "maxSurge: 1, maxUnavailable: 1", "maxSurge: 25%, maxUnavailable: 25%", 1))
		isNew := func(p *schemas.Object) bool { return argsOf(p) == "serve b" }
		w.until(b, "rollout done", 10*time.Minute, running(isNew), func(m, l int) bool { return m == n && l == n })
		rollout := time.Since(start)
		b.ReportMetric((cpuTime() - cpu0).Seconds(), "rollout-cpu-s")
		c.delete(webKey)
		w.until(b, "deployment gone", 10*time.Minute, running(nil), func(_, l int) bool { return l == 0 })

		// Node loss: 100 replicas over n1 and n2; n2 stops.
		stop := c.startAgent("n2")
		c.apply(deploymentYAML(100, "module:v1", "a"))
		w.until(b, "100 running", 5*time.Minute, running(nil), func(m, _ int) bool { return m == 100 })
		lost := 0
		for _, p := range w.live {
			if nodeOf(p) == "n2" {
				lost++
			}
		}
		stop()
		stopped := time.Now()
		w.until(b, "replaced on n1", 5*time.Minute, running(func(p *schemas.Object) bool { return nodeOf(p) == "n1" }), func(m, _ int) bool { return m == 100 })
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

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
