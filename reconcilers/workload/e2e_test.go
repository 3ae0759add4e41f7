package workload_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/apptest"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/reconcilers/workload"
	"github.com/jetplane/jetplane/schemas"
)

var compileCache string

func TestMain(m *testing.M) {
	os.Exit(apptest.Main(m, "jetplane-workload-test-", func(dir string) { compileCache = filepath.Join(dir, "compiled") }))
}

// module is testdata/module built for WASI, once per test run.
func module(tb testing.TB) []byte {
	tb.Helper()
	return apptest.WASM(tb, filepath.Dir(compileCache), "./testdata/module")
}

type cluster struct {
	tb     testing.TB
	app    *app.App
	client *api.Client
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startCluster runs jetplane in-process with its node agent n1 and the
// module pushed as module:v1 and module:v2.
func startCluster(tb testing.TB, mutate func(*app.Config)) *cluster {
	tb.Helper()
	cfg := app.Config{
		Pods:      app.PodsConfig{Agent: pod.AgentConfig{Node: "n1", CompileCache: compileCache, Heartbeat: 200 * time.Millisecond}},
		Workloads: app.WorkloadsConfig{JobBackoff: 50 * time.Millisecond},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	a, _ := apptest.Start(tb, cfg, 2*time.Minute)
	c := &cluster{tb: tb, app: a, client: &api.Client{BaseURL: a.URL()}}
	bin := module(tb)
	for _, ref := range []string{"module:v1", "module:v2"} {
		if _, err := a.Images().Push(context.Background(), ref, strings.NewReader(string(bin)), 0); err != nil {
			tb.Fatal(err)
		}
	}
	c.waitNode("n1", "Ready")
	return c
}

func (c *cluster) poll(what string, d time.Duration, cond func() bool) {
	c.tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			c.tb.Fatalf("not %s after %s", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *cluster) waitNode(name, phase string) {
	c.tb.Helper()
	c.poll("node "+name+" "+phase, 3*time.Minute, func() bool {
		return c.app.Store().Get(projections.Key{Kind: "Node", Name: name}).GetStatus().GetPhase() == phase
	})
}

func (c *cluster) apply(manifest string) {
	c.tb.Helper()
	if _, err := c.client.Apply(context.Background(), "test.yaml", []byte(manifest), ""); err != nil {
		c.tb.Fatal(err)
	}
}

func (c *cluster) delete(k projections.Key) {
	c.tb.Helper()
	if _, err := c.client.Delete(context.Background(), api.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}); err != nil {
		c.tb.Fatal(err)
	}
}

// startAgent runs another node agent in this process until the test ends
// or stop is called.
func (c *cluster) startAgent(node string) (stop func()) {
	c.tb.Helper()
	return c.startAgentWith(pod.AgentConfig{Node: node})
}

// startAgentWith runs an agent of cfg (its node, labels, taints).
func (c *cluster) startAgentWith(cfg pod.AgentConfig) (stop func()) {
	c.tb.Helper()
	node := cfg.Node
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := events.OpenNode(ctx, c.app.Log().Conn(), node)
	if err != nil {
		cancel()
		c.tb.Fatal(err)
	}
	cfg.Conn, cfg.Dir, cfg.CompileCache, cfg.Heartbeat, cfg.Logger = conn, c.tb.TempDir(), compileCache, 200*time.Millisecond, quiet()
	ag, err := pod.NewAgent(cfg)
	if err != nil {
		cancel()
		c.tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ag.Start(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	c.tb.Cleanup(stop)
	c.waitNode(node, "Ready")
	return stop
}

// pods lists the pods whose owner (directly or through a ReplicaSet) is
// owner and that are not being deleted.
func (c *cluster) pods(owner projections.Key) []*schemas.Object {
	all, _ := c.app.Store().List(projections.Query{Kind: "Pod", Namespace: owner.Namespace})
	var out []*schemas.Object
	for _, p := range all {
		o, ok := workload.OwnerOf(p.GetMetadata())
		if !ok || p.GetStatus().GetGoal() == projections.GoalDeleted {
			continue
		}
		if o != owner {
			rs := c.app.Store().Get(o)
			if rs == nil {
				continue
			}
			if oo, ok := workload.OwnerOf(rs.GetMetadata()); !ok || oo != owner {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

func ready(p *schemas.Object) bool {
	for _, c := range p.GetStatus().GetConditions() {
		if c.GetType() == "Ready" {
			return c.GetStatus() == "True"
		}
	}
	return false
}

func nodeOf(p *schemas.Object) string { return p.GetSpec().GetFields()["nodeName"].GetStringValue() }

func argsOf(p *schemas.Object) string {
	cs := p.GetSpec().GetFields()["containers"].GetListValue().GetValues()
	var out []string
	for _, a := range cs[0].GetStructValue().GetFields()["args"].GetListValue().GetValues() {
		out = append(out, a.GetStringValue())
	}
	return strings.Join(out, " ")
}

// waitRunning waits for n pods of owner, all Ready (and, when where is
// set, each satisfying it), and returns them.
func (c *cluster) waitRunning(owner projections.Key, n int, d time.Duration, where func(*schemas.Object) bool) []*schemas.Object {
	c.tb.Helper()
	var got []*schemas.Object
	c.poll(fmt.Sprintf("%d pods of %s running", n, owner), d, func() bool {
		got = c.pods(owner)
		if len(got) != n {
			return false
		}
		for _, p := range got {
			if !ready(p) || (where != nil && !where(p)) {
				return false
			}
		}
		return true
	})
	return got
}

func deploymentYAML(replicas int, image, arg string) string {
	return apptest.Deployment("default", replicas, image, "serve", arg)
}

var webKey = projections.Key{Kind: workload.KindDeployment, Namespace: "default", Name: "web"}

func TestADeploymentSpreadsScalesRollsOutAndIsDeleted(t *testing.T) {
	c := startCluster(t, nil)
	c.startAgent("n2")
	c.apply(deploymentYAML(4, "module:v1", "a"))
	pods := c.waitRunning(webKey, 4, 3*time.Minute, nil)
	nodes := map[string]int{}
	for _, p := range pods {
		nodes[nodeOf(p)]++
	}
	if nodes["n1"] == 0 || nodes["n2"] == 0 {
		t.Fatalf("4 replicas did not spread over both nodes: %v", nodes)
	}
	c.apply(deploymentYAML(6, "module:v1", "a"))
	c.waitRunning(webKey, 6, 3*time.Minute, nil)

	// A template change rolls out: never fewer than 6-1 ready pods, never
	// more than 6+1 pods.
	stop := make(chan struct{})
	worst := make(chan [2]int, 1)
	go func() {
		minReady, maxPods := 6, 0
		for {
			select {
			case <-stop:
				worst <- [2]int{minReady, maxPods}
				return
			default:
			}
			ps := c.pods(webKey)
			n := 0
			for _, p := range ps {
				if ready(p) {
					n++
				}
			}
			minReady, maxPods = min(minReady, n), max(maxPods, len(ps))
			time.Sleep(2 * time.Millisecond)
		}
	}()
	c.apply(deploymentYAML(6, "module:v2", "b"))
	c.waitRunning(webKey, 6, 3*time.Minute, func(p *schemas.Object) bool { return argsOf(p) == "serve b" })
	close(stop)
	w := <-worst
	if w[0] < 5 {
		t.Errorf("during the rollout only %d pods were ready; maxUnavailable 1 allows 5", w[0])
	}
	d := c.app.Store().Get(webKey)
	if d.GetStatus().GetPhase() != "Ready" {
		c.poll("deployment Ready", 30*time.Second, func() bool { return c.app.Store().Get(webKey).GetStatus().GetPhase() == "Ready" })
	}
	rss, _ := c.app.Store().List(projections.Query{Kind: workload.KindReplicaSet, Namespace: "default"})
	if len(rss) != 2 {
		t.Fatalf("want the old and the new ReplicaSet, have %d", len(rss))
	}

	c.delete(webKey)
	c.poll("deployment, replica sets and pods gone", 3*time.Minute, func() bool {
		rss, _ := c.app.Store().List(projections.Query{Kind: workload.KindReplicaSet, Namespace: "default"})
		pods, _ := c.app.Store().List(projections.Query{Kind: "Pod", Namespace: "default"})
		return c.app.Store().Get(webKey) == nil && len(rss) == 0 && len(pods) == 0
	})
}

func jobYAML(name, arg string, completions, parallelism, backoffLimit int) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata: {name: %s, namespace: default}
spec:
  completions: %d
  parallelism: %d
  backoffLimit: %d
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: task
        image: module:v1
        args: [%s]
`, name, completions, parallelism, backoffLimit, arg)
}

// concurrency reads from the log how many of pods were active at once:
// each from its creation to its first report of a finished phase.
func (c *cluster) concurrency(pods []*schemas.Object) int {
	c.tb.Helper()
	type edge struct {
		seq   uint64
		delta int
	}
	var edges []edge
	for _, p := range pods {
		evs, err := c.app.Log().History(context.Background(), projections.ObjectKey(p).Proto())
		if err != nil {
			c.tb.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == schemas.EventType_EVENT_TYPE_APPLIED {
				edges = append(edges, edge{ev.GetSequence(), 1})
				break
			}
		}
		for _, ev := range evs {
			ph := ev.GetObject().GetStatus().GetDetails().GetFields()["phase"].GetStringValue()
			if ev.Type == schemas.EventType_EVENT_TYPE_STATUS_CHANGED && (ph == "Succeeded" || ph == "Failed") {
				edges = append(edges, edge{ev.GetSequence(), -1})
				break
			}
		}
	}
	slices.SortFunc(edges, func(a, b edge) int { return int(a.seq) - int(b.seq) })
	n, peak := 0, 0
	for _, e := range edges {
		n += e.delta
		peak = max(peak, n)
	}
	return peak
}

func jobPods(c *cluster, name string) []*schemas.Object {
	all, _ := c.app.Store().List(projections.Query{Kind: "Pod", Namespace: "default"})
	var out []*schemas.Object
	for _, p := range all {
		if o, ok := workload.OwnerOf(p.GetMetadata()); ok && o.Name == name && o.Kind == workload.KindJob {
			out = append(out, p)
		}
	}
	return out
}

func TestAJobRunsItsCompletionsWithinItsParallelism(t *testing.T) {
	c := startCluster(t, nil)
	k := projections.Key{Kind: workload.KindJob, Namespace: "default", Name: "batch"}
	c.apply(jobYAML("batch", "work", 3, 2, 0))
	c.poll("job Complete", 3*time.Minute, func() bool { return c.app.Store().Get(k).GetStatus().GetPhase() == workload.PhaseComplete })
	pods := jobPods(c, "batch")
	if len(pods) != 3 {
		t.Fatalf("a Job of 3 completions that never failed ran %d pods", len(pods))
	}
	if n := c.concurrency(pods); n > 2 {
		t.Fatalf("%d pods ran at once; parallelism is 2", n)
	} else if n < 2 {
		t.Fatalf("only %d pod ran at a time; parallelism is 2", n)
	}
	det := c.app.Store().Get(k).GetStatus().GetDetails().GetFields()
	if det["succeeded"].GetNumberValue() != 3 || det["completionTime"].GetStringValue() == "" {
		t.Fatalf("status %v", det)
	}
}

func TestAFailingJobStopsAtItsBackoffLimit(t *testing.T) {
	c := startCluster(t, nil)
	k := projections.Key{Kind: workload.KindJob, Namespace: "default", Name: "broken"}
	c.apply(jobYAML("broken", "fail", 1, 1, 2))
	c.poll("job Failed", 3*time.Minute, func() bool { return c.app.Store().Get(k).GetStatus().GetPhase() == "Failed" })
	st := c.app.Store().Get(k).GetStatus()
	if !strings.Contains(st.GetMessage(), "backoff limit") {
		t.Fatalf("message %q", st.GetMessage())
	}
	if pods := jobPods(c, "broken"); len(pods) != 3 {
		t.Fatalf("backoffLimit 2 allows 3 failed pods; ran %d", len(pods))
	}
}

func TestADaemonSetRunsOnANodeThatJoinsLater(t *testing.T) {
	c := startCluster(t, nil)
	k := projections.Key{Kind: workload.KindDaemonSet, Namespace: "default", Name: "agent"}
	c.apply(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: module:v1, args: [serve]}
`)
	c.waitRunning(k, 1, 3*time.Minute, func(p *schemas.Object) bool { return nodeOf(p) == "n1" })
	c.startAgent("n2")
	pods := c.waitRunning(k, 2, 3*time.Minute, nil)
	if nodeOf(pods[0]) == nodeOf(pods[1]) {
		t.Fatalf("both daemon pods on %s", nodeOf(pods[0]))
	}
}

// TestPodsOfALostNodeTurnUnknownAndAreReplaced stops a node's agent: its
// pods are reported Unknown (Ready Unknown, reason NodeLost) while the
// node is NotReady, then evicted and replaced on the surviving node.
func TestPodsOfALostNodeTurnUnknownAndAreReplaced(t *testing.T) {
	const grace, eviction = time.Second, time.Second
	c := startCluster(t, func(cfg *app.Config) { cfg.Pods.NodeGrace, cfg.Pods.NodeEviction = grace, eviction })
	stop := c.startAgent("n2")
	c.apply(deploymentYAML(4, "module:v1", "a"))
	pods := c.waitRunning(webKey, 4, 3*time.Minute, nil)
	var lost []projections.Key
	for _, p := range pods {
		if nodeOf(p) == "n2" {
			lost = append(lost, projections.ObjectKey(p))
		}
	}
	if len(lost) == 0 {
		t.Fatal("no pod on n2")
	}
	stop()
	start := time.Now()
	c.poll("pods of n2 Unknown", 10*time.Second, func() bool {
		for _, k := range lost {
			st := c.app.Store().Get(k).GetStatus()
			if st.GetPhase() != "Unknown" || st.GetDetails().GetFields()["reason"].GetStringValue() != "NodeLost" {
				return false
			}
			if len(st.GetConditions()) == 0 || st.GetConditions()[0].GetStatus() != "Unknown" {
				return false
			}
		}
		return true
	})
	c.waitRunning(webKey, 4, grace+eviction+2*time.Second+time.Second, func(p *schemas.Object) bool { return nodeOf(p) == "n1" })
	t.Logf("replaced on n1 %s after the agent stopped (grace %s, eviction %s)", time.Since(start).Round(time.Millisecond), grace, eviction)
	if d := time.Since(start); d > grace+eviction+2*time.Second+200*time.Millisecond {
		t.Errorf("replacement took %s; want within grace+eviction+2s", d)
	}
}

// TestIdleWorkloadsAndNodesWriteNothing runs every key again and again
// (resync every 100 ms, heartbeats every 200 ms) once a Deployment, a
// finished Job and a DaemonSet have settled on two nodes: nothing changes,
// so nothing is written.
func TestIdleWorkloadsAndNodesWriteNothing(t *testing.T) {
	c := startCluster(t, func(cfg *app.Config) {
		cfg.Queue.Resync = 100 * time.Millisecond
		cfg.Pods.NodeGrace = 2 * time.Second
	})
	c.startAgentWith(pod.AgentConfig{Node: "n2", Labels: map[string]string{"zone": "b"},
		Taints: []corev1.Taint{{Key: "dedicated", Value: "edge", Effect: corev1.TaintEffectPreferNoSchedule}}})
	c.apply(deploymentYAML(3, "module:v1", "a"))
	c.apply(jobYAML("once", "work", 1, 1, 0))
	c.apply(`apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: default}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: agent, image: module:v1, args: [serve]}
`)
	c.waitRunning(webKey, 3, 3*time.Minute, nil)
	c.waitRunning(projections.Key{Kind: workload.KindDaemonSet, Namespace: "default", Name: "agent"}, 2, 3*time.Minute, nil)
	c.poll("everything settled", 3*time.Minute, func() bool {
		for _, k := range []projections.Key{webKey, {Kind: workload.KindJob, Namespace: "default", Name: "once"}, {Kind: workload.KindDaemonSet, Namespace: "default", Name: "agent"}} {
			if ph := c.app.Store().Get(k).GetStatus().GetPhase(); ph != "Ready" && ph != workload.PhaseComplete {
				return false
			}
		}
		return true
	})
	// Let the last reports land, then watch the log stand still.
	time.Sleep(500 * time.Millisecond) // not a wait for a condition: the quiet period under test starts here
	before, err := c.app.Log().LastSequence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the quiet period: ~30 resyncs and ~15 heartbeats per node
	after, err := c.app.Log().LastSequence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		_ = c.app.Log().Read(context.Background(), events.ReadOptions{From: before + 1}, func(m events.Message) error {
			ev, err := m.Event()
			if err != nil {
				return err
			}
			t.Logf("event %d: %s %s by %s: %v", m.Sequence, ev.GetType(), projections.KeyOf(ev.GetKey()), ev.GetActor(), ev.GetObject().GetStatus())
			return nil
		})
		t.Fatalf("idle workloads and nodes wrote %d events", after-before)
	}
}

// TestAJobPastItsDeadlineFailsAndAFinishedOneExpires: activeDeadlineSeconds
// stops a Job that runs too long; ttlSecondsAfterFinished deletes a
// finished Job, and its pods with it.
func TestAJobPastItsDeadlineFailsAndAFinishedOneExpires(t *testing.T) {
	c := startCluster(t, nil)
	slow := projections.Key{Kind: workload.KindJob, Namespace: "default", Name: "slow"}
	c.apply(strings.Replace(jobYAML("slow", "serve", 1, 1, 0), "  backoffLimit: 0\n", "  backoffLimit: 0\n  activeDeadlineSeconds: 1\n", 1))
	c.poll("slow Failed", 3*time.Minute, func() bool { return c.app.Store().Get(slow).GetStatus().GetPhase() == "Failed" })
	if st := c.app.Store().Get(slow).GetStatus(); !strings.Contains(st.GetMessage(), "deadline") {
		t.Fatalf("slow: %v", st)
	}
	c.poll("slow's pod stopped", 3*time.Minute, func() bool { return len(c.pods(slow)) == 0 })

	brief := projections.Key{Kind: workload.KindJob, Namespace: "default", Name: "brief"}
	c.apply(strings.Replace(jobYAML("brief", "work", 1, 1, 0), "  backoffLimit: 0\n", "  backoffLimit: 0\n  ttlSecondsAfterFinished: 1\n", 1))
	c.poll("brief Complete", 3*time.Minute, func() bool { return c.app.Store().Get(brief).GetStatus().GetPhase() == workload.PhaseComplete })
	c.poll("brief and its pod gone", 3*time.Minute, func() bool { return c.app.Store().Get(brief) == nil && len(jobPods(c, "brief")) == 0 })
}

// TestRecreateAndPause: a Recreate Deployment never runs old and new pods
// at once; a paused one does not roll out a template change until resumed.
func TestRecreateAndPause(t *testing.T) {
	c := startCluster(t, nil)
	recreate := func(arg string, paused bool) string {
		y := strings.Replace(deploymentYAML(3, "module:v1", arg), "strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 1}}", "strategy: {type: Recreate}", 1)
		if paused {
			y = strings.Replace(y, "  replicas: 3\n", "  replicas: 3\n  paused: true\n", 1)
		}
		return y
	}
	c.apply(recreate("a", false))
	c.waitRunning(webKey, 3, 3*time.Minute, nil)
	c.apply(recreate("b", true))
	c.poll("paused", 30*time.Second, func() bool { return c.app.Store().Get(webKey).GetStatus().GetPhase() == workload.PhasePaused })
	for _, p := range c.pods(webKey) {
		if argsOf(p) != "serve a" {
			t.Fatalf("a paused Deployment rolled out %s", p.GetMetadata().GetName())
		}
	}
	stop := make(chan struct{})
	mixed := make(chan bool, 1)
	go func() {
		seen := false
		for {
			select {
			case <-stop:
				mixed <- seen
				return
			default:
			}
			args := map[string]bool{}
			for _, p := range c.pods(webKey) {
				if podPhaseOf(p) == "Running" {
					args[argsOf(p)] = true
				}
			}
			seen = seen || len(args) > 1
			time.Sleep(2 * time.Millisecond)
		}
	}()
	c.apply(recreate("b", false))
	c.waitRunning(webKey, 3, 3*time.Minute, func(p *schemas.Object) bool { return argsOf(p) == "serve b" })
	close(stop)
	if <-mixed {
		t.Fatal("Recreate ran old and new pods at once")
	}
}

func podPhaseOf(p *schemas.Object) string { return p.GetStatus().GetPhase() }

// TestAReplicaSetAdoptsOnlyWhatItMay: an orphan pod its selector matches
// is adopted only when its writer allowed it; any other orphan is left
// alone and the ReplicaSet makes its own pods.
func TestAReplicaSetAdoptsOnlyWhatItMay(t *testing.T) {
	c := startCluster(t, nil)
	orphan := func(name, allow string) string {
		ann := ""
		if allow != "" {
			ann = fmt.Sprintf(", annotations: {jetplane.dev/allow-adoption-by: %s}", allow)
		}
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, namespace: default, labels: {app: cache}%s}\nspec:\n  containers:\n  - {name: c, image: module:v1, args: [serve]}\n", name, ann)
	}
	c.apply(orphan("willing", "ReplicaSet.apps/default/cache"))
	c.apply(orphan("stranger", ""))
	rs := projections.Key{Kind: workload.KindReplicaSet, Namespace: "default", Name: "cache"}
	c.apply(`apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: cache, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: cache}}
  template:
    metadata: {labels: {app: cache}}
    spec:
      containers:
      - {name: c, image: module:v1, args: [serve]}
`)
	pods := c.waitRunning(rs, 2, 3*time.Minute, nil)
	names := map[string]bool{}
	for _, p := range pods {
		names[p.GetMetadata().GetName()] = true
	}
	if !names["willing"] || names["stranger"] {
		t.Fatalf("the ReplicaSet's pods: %v; want willing adopted and stranger left alone", names)
	}
	if o, ok := workload.OwnerOf(c.app.Store().Get(projections.Key{Kind: "Pod", Namespace: "default", Name: "stranger"}).GetMetadata()); ok {
		t.Fatalf("stranger owned by %s", o)
	}
}
