package pod_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/apptest"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/schemas"
)

var (
	workloadOnce sync.Once
	workloadBin  []byte
	workloadErr  error
	// compileCache is shared by every agent of the test run: each module
	// is compiled once per run, not once per test.
	compileCache string
)

func TestMain(m *testing.M) {
	if os.Getenv(agentProcessEnv) != "" {
		runAgentProcess() // BenchmarkAgentProcess's child
		return
	}
	os.Exit(apptest.Main(m, "jetplane-pod-test-", func(dir string) { compileCache = filepath.Join(dir, "compiled") }))
}

// workload is testdata/workload built for WASI and precompiled, once per
// test run.
func workload(tb testing.TB) []byte {
	tb.Helper()
	bin := apptest.WASM(tb, filepath.Dir(compileCache), "./testdata/workload")
	workloadOnce.Do(func() {
		start := time.Now()
		workloadBin, workloadErr = bin, pod.Precompile(context.Background(), compileCache, bin)
		tb.Logf("workload compiled in %s", time.Since(start))
	})
	if workloadErr != nil {
		tb.Fatal(workloadErr)
	}
	return workloadBin
}

type cluster struct {
	tb     testing.TB
	app    *app.App
	client *api.Client
}

// scale is how much faster than real time the test agents' clocks run:
// a 10 s backoff takes 100 ms.
const scale = 100

func startCluster(tb testing.TB, mutate func(*app.Config)) *cluster {
	tb.Helper()
	cfg := app.Config{
		Pods: app.PodsConfig{Agent: pod.AgentConfig{Node: "n1", Clock: pod.ScaledClock(scale), CompileCache: compileCache, Heartbeat: time.Second}},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	a, _ := apptest.Start(tb, cfg, 2*time.Minute)
	return &cluster{tb: tb, app: a, client: &api.Client{BaseURL: a.URL()}}
}

func (c *cluster) push(ref string, data []byte) events.Image {
	c.tb.Helper()
	im, err := c.app.Images().Push(context.Background(), ref, strings.NewReader(string(data)), 0)
	if err != nil {
		c.tb.Fatal(err)
	}
	return im
}

func (c *cluster) apply(manifest string) {
	c.tb.Helper()
	if _, err := c.client.Apply(context.Background(), "test.yaml", []byte(manifest), ""); err != nil {
		c.tb.Fatal(err)
	}
}

func podKey(ns, name string) projections.Key {
	return projections.Key{Kind: "Pod", Namespace: ns, Name: name}
}

// wait polls the projection until cond holds for key's object.
func (c *cluster) wait(k projections.Key, what string, d time.Duration, cond func(*schemas.Object) bool) *schemas.Object {
	c.tb.Helper()
	deadline := time.Now().Add(d)
	for {
		o := c.app.Store().Get(k)
		if cond(o) {
			return o
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("%s: not %s after %s; status %v", k, what, d, o.GetStatus())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *cluster) waitPhase(k projections.Key, phase string) *schemas.Object {
	c.tb.Helper()
	return c.wait(k, phase, 2*time.Minute, func(o *schemas.Object) bool {
		return pod.StateOf(o.GetStatus()) == phase || o.GetStatus().GetPhase() == phase
	})
}

// passedReason is the v1 reason of each state an agent may record as
// passed (pod.Entered's).
var passedReason = map[string]string{"Registered": "Registered", "ImagePull": "Pulling", "Starting": "ContainerCreating"}

// phases is the pod's history as the phases its status events recorded,
// each "Phase" or "Phase(reason)".
func (c *cluster) phases(k projections.Key) []string {
	c.tb.Helper()
	evs, err := c.app.Log().History(context.Background(), k.Proto())
	if err != nil {
		c.tb.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		// The instance's own "bound, waiting for the agent" status is
		// written only when it wins the race with the agent's first
		// report; the agent's reports are the pod's states.
		if ev.Type != schemas.EventType_EVENT_TYPE_STATUS_CHANGED || !strings.HasPrefix(ev.Actor, "node/") {
			continue
		}
		st := ev.GetObject().GetStatus()
		// States a report stands for too (decision 0089), with the
		// reason their own report would have had.
		for _, passed := range pod.Passed(st) {
			out = append(out, passed+"("+passedReason[passed]+")")
		}
		p := pod.StateOf(st)
		if r := st.GetDetails().GetFields()["reason"].GetStringValue(); r != "" {
			p += "(" + r + ")"
		}
		out = append(out, p)
	}
	return out
}

func (c *cluster) logs(ns, name, container string) string {
	c.tb.Helper()
	var b strings.Builder
	node := c.app.Store().Get(podKey(ns, name)).GetSpec().GetFields()["nodeName"].GetStringValue()
	err := c.app.NodeStore().ReadLogs(context.Background(), events.LogQuery{Node: node, Namespace: ns, Pod: name, Container: container}, func(l events.LogLine) error {
		b.Write(l.Data)
		return nil
	})
	if err != nil {
		c.tb.Fatal(err)
	}
	return b.String()
}

// startAgent runs a second node agent, in this process, beside the
// cluster's own (n1), until the test ends, and waits for its Node to be
// Ready.
func (c *cluster) startAgent(node string) {
	t := c.tb
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := events.OpenNode(ctx, c.app.Log().Conn(), node)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ag, err := pod.NewAgent(pod.AgentConfig{Node: node, Conn: conn, Dir: t.TempDir(), CompileCache: compileCache, Clock: pod.ScaledClock(scale), Heartbeat: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ag.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c.wait(projections.Key{Kind: "Node", Name: node}, "Ready", 2*time.Minute, func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Ready" })
}

func podYAML(name, node, policy, image string, args ...string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeName: %s
  restartPolicy: %s
  containers:
  - name: main
    image: %s
    args: [%s]
`, name, node, policy, image, strings.Join(args, ", "))
}

func TestPodPrintsAndCompletes(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.apply(podYAML("hello", "n1", "Never", "workload:v1", "hello"))
	k := podKey("default", "hello")
	o := c.waitPhase(k, "Completed")
	ps, err := pod.PodStatus(o.GetStatus())
	if err != nil {
		t.Fatal(err)
	}
	if ps.Phase != "Succeeded" || ps.ContainerStatuses[0].State.Terminated == nil || ps.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Fatalf("status %+v", ps)
	}
	deadline := time.Now().Add(time.Minute)
	// stdout and stderr are read and flushed apart, so their lines may
	// interleave either way.
	for l := c.logs("default", "hello", "main"); !strings.Contains(l, "hello from main\n") || !strings.Contains(l, "a line on stderr\n"); l = c.logs("default", "hello", "main") {
		if time.Now().After(deadline) {
			t.Fatalf("logs: %q", c.logs("default", "hello", "main"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	want := "Registered(Registered) ImagePull(Pulling) Starting(ContainerCreating) Running Completed(Completed)"
	if got := strings.Join(c.phases(k), " "); got != want {
		t.Fatalf("history %s\nwant    %s", got, want)
	}
}

// statusEvents returns the agent's status events of k.
func (c *cluster) statusEvents(k projections.Key) []*schemas.Event {
	c.tb.Helper()
	evs, err := c.app.Log().History(context.Background(), k.Proto())
	if err != nil {
		c.tb.Fatal(err)
	}
	var out []*schemas.Event
	for _, ev := range evs {
		if ev.Type == schemas.EventType_EVENT_TYPE_STATUS_CHANGED && strings.HasPrefix(ev.Actor, "node/") {
			out = append(out, ev)
		}
	}
	return out
}

func TestCrashLoopBacksOff10s20s40s(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.apply(podYAML("crash", "n1", "OnFailure", "workload:v1", "fail"))
	k := podKey("default", "crash")
	c.wait(k, "restarted three times", 3*time.Minute, func(o *schemas.Object) bool {
		ps, _ := pod.PodStatus(o.GetStatus())
		return len(ps.ContainerStatuses) > 0 && ps.ContainerStatuses[0].RestartCount >= 3
	})
	evs := c.statusEvents(k)
	all, err := c.app.Log().History(context.Background(), k.Proto())
	if err != nil {
		t.Fatal(err)
	}
	applied := all[0].Time.AsTime() // stamped before the agent saw the pod
	var delays []string
	var waited time.Duration
	for i, ev := range evs {
		st := ev.GetObject().GetStatus()
		if pod.StateOf(st) != "CrashLoopBackoff" || i+1 >= len(evs) {
			continue
		}
		// "back-off 10s restarting failed container (restart 1)"
		delay := strings.Fields(st.GetMessage())[1]
		delays = append(delays, delay)
		d, err := time.ParseDuration(delay)
		if err != nil {
			t.Fatal(err)
		}
		nextEv := evs[i+1]
		// Starting, or a later state that passed it (decision 0089).
		nextSt := nextEv.GetObject().GetStatus()
		if first := append(pod.Passed(nextSt), pod.StateOf(nextSt))[0]; first != "Starting" {
			t.Fatalf("after CrashLoopBackoff came %s", first)
		}
		// Each report is stamped when an instance records it, at or after
		// the agent entered the state (reports are sent asynchronously, so
		// two of them may be recorded closer together than they happened):
		// from the apply to a restart, the scaled clock waited at least
		// every backoff so far.
		waited += d
		if since := nextEv.Time.AsTime().Sub(applied); since < waited/scale {
			t.Fatalf("restart after %v of backoffs came %s after the apply, less than %s scaled", delays, since, waited/scale)
		}
	}
	if got := strings.Join(delays[:3], " "); got != "10s 20s 40s" {
		t.Fatalf("delays %v", delays)
	}
	ps, _ := pod.PodStatus(c.app.Store().Get(k).GetStatus())
	// The latest exit is the container's state while the pod is in Error
	// (between an exit and its backoff), and its last state afterwards.
	cs := ps.ContainerStatuses[0]
	last := cs.LastTerminationState.Terminated
	if cs.State.Terminated != nil {
		last = cs.State.Terminated
	}
	if last == nil || last.ExitCode != 1 {
		t.Fatalf("last termination %+v", cs)
	}
	if logs := c.logs("default", "crash", "main"); strings.Count(logs, "about to fail") < 3 {
		t.Fatalf("logs of the restarts: %q", logs)
	}
	// Through the API, as jetplane logs reads them.
	ctx := context.Background()
	var prev, since strings.Builder
	if err := c.client.Logs(ctx, api.LogsOptions{Namespace: "default", Pod: "crash", Previous: true, Tail: -1}, &prev); err != nil || prev.String() != "about to fail\n" {
		t.Fatalf("--previous: %q, %v", prev.String(), err)
	}
	if err := c.client.Logs(ctx, api.LogsOptions{Namespace: "default", Pod: "crash", Since: time.Hour, Tail: -1}, &since); err != nil || since.String() != "about to fail\n" {
		t.Fatalf("--since 1h: %q, %v", since.String(), err)
	}
	// Following, new runs' lines arrive as they are written.
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, w := io.Pipe()
	go func() {
		_ = c.client.Logs(fctx, api.LogsOptions{Namespace: "default", Pod: "crash", Follow: true, Tail: -1}, w)
		w.Close()
	}()
	before := strings.Count(c.logs("default", "crash", "main"), "about to fail")
	buf := make([]byte, 64<<10)
	got := ""
	for strings.Count(got, "about to fail") <= before {
		n, err := r.Read(buf)
		if err != nil {
			t.Fatalf("follow ended after %q: %v", got, err)
		}
		got += string(buf[:n])
	}
}

func TestDeletingAnInfiniteLoopTerminatesIt(t *testing.T) {
	logs := &logRecorder{}
	c := startCluster(t, func(cfg *app.Config) { cfg.Pods.Agent.Logger = slog.New(logs) })
	c.push("workload:v1", workload(t))
	c.apply(podYAML("spin", "n1", "Always", "workload:v1", "spin"))
	k := podKey("default", "spin")
	c.waitPhase(k, "Running")
	if _, err := c.client.Delete(context.Background(), api.Key{Kind: "Pod", Namespace: "default", Name: "spin"}); err != nil {
		t.Fatal(err)
	}
	c.wait(k, "gone", 2*time.Minute, func(o *schemas.Object) bool { return o == nil })
	evs, err := c.app.Log().History(context.Background(), k.Proto())
	if err != nil {
		t.Fatal(err)
	}
	var deleted, terminated time.Time
	for _, ev := range evs {
		switch {
		case ev.Type == schemas.EventType_EVENT_TYPE_DELETE_REQUESTED:
			deleted = ev.Time.AsTime()
		case ev.Type == schemas.EventType_EVENT_TYPE_STATUS_CHANGED && strings.HasPrefix(ev.Actor, "node/"):
			terminated = ev.Time.AsTime()
			if ph := pod.StateOf(ev.GetObject().GetStatus()); ph != "Terminated" {
				terminated = time.Time{}
			}
		}
	}
	if deleted.IsZero() || terminated.IsZero() {
		t.Fatalf("history has no deletion (%v) or no Terminated last (%v)", deleted, terminated)
	}
	// The bound, twice: from the deletion in the log to Terminated
	// in the log (the instances' hops included; milliseconds on an idle
	// machine), and from the agent learning of the deletion to the
	// spinning module stopped through its context and the pod Terminated
	// (measured by the agent, which says so in its log).
	if d := terminated.Sub(deleted); d > time.Second {
		t.Fatalf("deletion to Terminated in the log took %s, more than 1 s", d)
	}
	stopped := logs.find("pod stopped: deletion requested")
	if len(stopped) != 1 || attr(stopped[0], "pod").String() != "default/spin" {
		t.Fatalf("the agent logged %d stops", len(stopped))
	}
	if took := attr(stopped[0], "took").Duration(); took > time.Second {
		t.Fatalf("stopping the module took %s, more than 1 s", took)
	} else {
		t.Logf("agent: deletion seen to Terminated %s; log: deletion to Terminated recorded %s", took, terminated.Sub(deleted))
	}
}

func TestMissingImageRunsOncePushed(t *testing.T) {
	c := startCluster(t, nil)
	c.apply(podYAML("later", "n1", "Never", "later:v1", "idle"))
	k := podKey("default", "later")
	o := c.waitPhase(k, "ImagePullBackoff")
	if !strings.Contains(o.GetStatus().GetMessage(), "later:v1") || !strings.Contains(o.GetStatus().GetMessage(), "not found") {
		t.Fatalf("message %q", o.GetStatus().GetMessage())
	}
	c.push("later:v1", workload(t))
	c.waitPhase(k, "Running")
}

func TestMemoryHogIsStoppedWithAReason(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.apply(podYAML("hog", "n1", "Never", "workload:v1", "hog") + `    resources: {limits: {memory: 64Mi}}
`)
	k := podKey("default", "hog")
	o := c.waitPhase(k, "Error")
	ps, _ := pod.PodStatus(o.GetStatus())
	term := ps.ContainerStatuses[0].State.Terminated
	if ps.Reason != "OOMKilled" || term == nil || term.Reason != "OOMKilled" || !strings.Contains(term.Message, "memory limit of 67108864 bytes") {
		t.Fatalf("status %+v, terminated %+v", ps, term)
	}
}

func TestEnvFromAConfigMapAndASecret(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.apply(`apiVersion: v1
kind: Pod
metadata: {name: env, namespace: default}
spec:
  nodeName: n1
  restartPolicy: Never
  containers:
  - name: main
    image: workload:v1
    args: [env, GREETING, TOKEN, PLAIN]
    env:
    - {name: GREETING, valueFrom: {configMapKeyRef: {name: settings, key: greeting}}}
    - {name: TOKEN, valueFrom: {secretKeyRef: {name: creds, key: token}}}
    - {name: PLAIN, value: as-is}
`)
	k := podKey("default", "env")
	o := c.waitPhase(k, "Pending")
	if !strings.Contains(o.GetStatus().GetMessage(), "ConfigMap/default/settings") {
		t.Fatalf("waiting message %q", o.GetStatus().GetMessage())
	}
	c.apply(`apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {greeting: hello-from-configmap}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: default}
data: {token: czNjcjN0}
`)
	c.waitPhase(k, "Completed")
	deadline := time.Now().Add(time.Minute)
	want := "GREETING=hello-from-configmap\nTOKEN=s3cr3t\nPLAIN=as-is\n"
	for c.logs("default", "env", "main") != want {
		if time.Now().After(deadline) {
			t.Fatalf("logs %q, want %q", c.logs("default", "env", "main"), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestBadInputIsRefusedAndNothingRuns(t *testing.T) {
	roots := t.TempDir()
	c := startCluster(t, func(cfg *app.Config) {
		cfg.Pods.Agent.HostPathRoots = []string{roots}
		cfg.Pods.Agent.MaxImageBytes = 1 << 20
	})
	ctx := context.Background()
	wl := workload(t)
	// At apply: fields jetplane would ignore are errors naming them.
	for _, tt := range []struct{ name, patch, want string }{
		{"host network", "  hostNetwork: true\n", "spec.hostNetwork: is not supported"},
		{"privileged", "    securityContext: {privileged: true}\n", "spec.containers[0].securityContext.privileged: is not supported"},
		{"unknown field", "  flavour: vanilla\n", "spec.flavour: unknown field"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.client.Apply(ctx, "bad.yaml", []byte(podYAML("bad", "n1", "Never", "workload:v1", "hello")+tt.patch), "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("apply: %v, want %q", err, tt.want)
			}
		})
	}
	if c.app.Store().Get(podKey("default", "bad")) != nil {
		t.Fatal("a refused pod was stored")
	}
	// At push: empty, not WebAssembly, over the limit, not compiling.
	for _, tt := range []struct {
		name string
		data []byte
		max  int64
		want string
	}{
		{"empty", nil, 0, "0 bytes"},
		{"not wasm", []byte("MZ\x90\x00 a windows program"), 0, "not a WebAssembly module"},
		{"over the limit", wl, 1 << 20, "over the 1048576-byte limit"},
		{"garbage", append([]byte("\x00asm\x01\x00\x00\x00"), []byte("not really a module")...), 0, "does not compile"},
	} {
		if _, err := c.app.Images().Push(ctx, "bad:"+strings.ReplaceAll(tt.name, " ", "-"), strings.NewReader(string(tt.data)), tt.max); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Fatalf("push %s: %v, want %q", tt.name, err, tt.want)
		}
	}
	// In status: what only the node or the runtime can tell.
	c.push("workload:v1", wl) // over this node's 1 MiB limit
	c.apply(podYAML("nowhere", "n9", "Never", "workload:v1", "hello"))
	c.apply(podYAML("toobig", "n1", "Never", "workload:v1", "hello"))
	c.apply(podYAML("hostpath", "n1", "Never", "workload:v1", "hello") + `    volumeMounts: [{name: etc, mountPath: /etc}]
  volumes: [{name: etc, hostPath: {path: /etc}}]
`)
	for _, tt := range []struct{ pod, phase, want string }{
		{"nowhere", "Pending", `node "n9" does not exist`},
		{"toobig", "ImagePullBackoff", "over the node's limit of 1048576"},
		{"hostpath", "Error", "/etc is outside the node's allowed roots"},
	} {
		o := c.waitPhase(podKey("default", tt.pod), tt.phase)
		if !strings.Contains(o.GetStatus().GetMessage(), tt.want) {
			t.Fatalf("%s: message %q, want %q", tt.pod, o.GetStatus().GetMessage(), tt.want)
		}
		if logs := c.logs("default", tt.pod, "main"); logs != "" {
			t.Fatalf("%s ran: %q", tt.pod, logs)
		}
	}
}

func TestTwoAgentsRunOnlyTheirOwnPods(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.startAgent("n2")
	for i := range 3 {
		c.apply(podYAML(fmt.Sprintf("a%d", i), "n1", "Never", "workload:v1", "hello"))
		c.apply(podYAML(fmt.Sprintf("b%d", i), "n2", "Never", "workload:v1", "hello"))
	}
	for i := range 3 {
		for node, name := range map[string]string{"n1": fmt.Sprintf("a%d", i), "n2": fmt.Sprintf("b%d", i)} {
			k := podKey("default", name)
			c.waitPhase(k, "Completed")
			for _, ev := range c.statusEvents(k) {
				if ev.Actor != "node/"+node {
					t.Fatalf("%s on %s got a report from %s", name, node, ev.Actor)
				}
			}
		}
	}
}

// startAgent runs an agent for node on c's NATS connection until the
// returned stop is called.
func startAgent(t *testing.T, c *cluster, node, dir string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := events.OpenNode(ctx, c.app.Log().Conn(), node)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := pod.NewAgent(pod.AgentConfig{Node: node, Conn: conn, Dir: dir, CompileCache: compileCache, Clock: pod.ScaledClock(scale), Heartbeat: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ag.Start(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func TestARestartedAgentDoesNotRunFinishedPodsAgain(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	dir := t.TempDir()
	stop := startAgent(t, c, "n3", dir)
	c.apply(podYAML("once", "n3", "Never", "workload:v1", "hello"))
	c.apply(podYAML("running", "n3", "Never", "workload:v1", "idle"))
	c.waitPhase(podKey("default", "once"), "Completed")
	c.waitPhase(podKey("default", "running"), "Running")
	before := strings.Join(c.phases(podKey("default", "once")), " ")
	stop()
	startAgent(t, c, "n3", dir)
	// The restarted agent reads the node's work in order: once a pod
	// applied after the restart completes, it has seen the old ones.
	c.apply(podYAML("after", "n3", "Never", "workload:v1", "hello"))
	c.waitPhase(podKey("default", "after"), "Completed")
	if after := strings.Join(c.phases(podKey("default", "once")), " "); after != before {
		t.Fatalf("the finished pod ran again: %s, before %s", after, before)
	}
	// A pod that was running when its agent stopped is started again.
	c.wait(podKey("default", "running"), "running again", 2*time.Minute, func(o *schemas.Object) bool {
		ph := c.phases(podKey("default", "running"))
		return pod.StateOf(o.GetStatus()) == "Running" && strings.Count(strings.Join(ph, " "), "Registered(") == 2
	})
}

func TestTheSchedulerPlacesAnUnboundPod(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.wait(projections.Key{Kind: "Node", Name: "n1"}, "Ready", 2*time.Minute, func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Ready" })
	c.apply(strings.Replace(podYAML("free", "", "Never", "workload:v1", "hello"), "  nodeName: \n", "", 1))
	o := c.waitPhase(podKey("default", "free"), "Completed")
	if n := o.GetSpec().GetFields()["nodeName"].GetStringValue(); n != "n1" {
		t.Fatalf("placed on %q", n)
	}
}

// Removing an image a pod uses is refused over HTTP with 409 Conflict,
// naming the pods; once they are gone it is removed.
func TestAnImageInUseIsNotRemoved(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.apply(podYAML("server", "n1", "Never", "workload:v1", "idle"))
	c.apply(podYAML("job", "n1", "Never", "workload:v1", "hello"))
	c.waitPhase(podKey("default", "server"), "Running")
	c.waitPhase(podKey("default", "job"), "Completed")
	remove := func() (int, string) {
		req, err := http.NewRequest(http.MethodDelete, c.app.URL()+"/v1/images?ref=workload:v1", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := remove()
	if code != http.StatusConflict || !strings.Contains(body, "image in use by pod default/job, default/server") {
		t.Fatalf("remove in use: %d %s", code, body)
	}
	if _, _, err := c.app.Images().Resolve(context.Background(), "workload:v1"); err != nil {
		t.Fatalf("the refused image is gone: %v", err)
	}
	for _, name := range []string{"server", "job"} {
		if _, err := c.client.Delete(context.Background(), api.Key{Kind: "Pod", Namespace: "default", Name: name}); err != nil {
			t.Fatal(err)
		}
		c.wait(podKey("default", name), "gone", 2*time.Minute, func(o *schemas.Object) bool { return o == nil })
	}
	if code, body := remove(); code != http.StatusNoContent {
		t.Fatalf("remove unused: %d %s", code, body)
	}
	if _, _, err := c.app.Images().Resolve(context.Background(), "workload:v1"); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("after removal: %v", err)
	}
}

// trapModule is a WebAssembly module whose start function executes
// `unreachable`: a trap, which no Go program compiles to on purpose.
var trapModule = []byte{
	0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00,
	0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type 0: () → ()
	0x03, 0x02, 0x01, 0x00, // function 0 has type 0
	0x07, 0x0a, 0x01, 0x06, '_', 's', 't', 'a', 'r', 't', 0x00, 0x00, // export _start
	0x0a, 0x05, 0x01, 0x03, 0x00, 0x00, 0x0b, // code: unreachable
}

// A trap is Error with reason Trap and the trap in the message.
func TestATrapIsAnErrorWithItsReason(t *testing.T) {
	c := startCluster(t, nil)
	c.push("trap:v1", trapModule)
	c.apply(podYAML("trap", "n1", "Never", "trap:v1"))
	o := c.waitPhase(podKey("default", "trap"), "Error")
	ps, err := pod.PodStatus(o.GetStatus())
	if err != nil {
		t.Fatal(err)
	}
	term := ps.ContainerStatuses[0].State.Terminated
	if ps.Reason != "Trap" || term == nil || term.Reason != "Trap" || !strings.Contains(term.Message, "unreachable") {
		t.Fatalf("status %+v, terminated %+v", ps, term)
	}
}

// Heartbeats go to the JP_NODES bucket, not the log: a Ready node that
// keeps beating adds no event to its history.
func TestHeartbeatsStayOutOfTheLog(t *testing.T) {
	c := startCluster(t, nil) // n1 beats every second
	k := projections.Key{Kind: "Node", Name: "n1"}
	c.wait(k, "Ready", 2*time.Minute, func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Ready" })
	ctx := context.Background()
	history := func() int {
		evs, err := c.app.Log().History(ctx, k.Proto())
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	before := history()
	beats := map[time.Time]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(beats) < 4 {
		hb, err := c.app.NodeStore().Heartbeat(ctx, "n1")
		if err != nil {
			t.Fatal(err)
		}
		beats[hb.Time] = true
		if time.Now().After(deadline) {
			t.Fatalf("%d heartbeats in 2 minutes", len(beats))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if after := history(); after != before {
		t.Fatalf("the node's history grew from %d to %d events over %d heartbeats", before, after, len(beats))
	}
}

// Pod output is stored in JP_LOGS under
// jp.logs.<node>.<namespace>.<pod>.<container>, bounded as the README says.
func TestLogsAreStoredPerContainerAndBounded(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.apply(podYAML("talk", "n1", "Never", "workload:v1", "hello"))
	c.waitPhase(podKey("default", "talk"), "Completed")
	ctx := context.Background()
	js, err := jetstream.New(c.app.Log().Conn())
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, events.LogsStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter("jp.logs.>"))
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Subjects[events.LogsSubject("n1", "default", "talk", "main")] > 0 {
			cfg := info.Config
			if cfg.MaxMsgsPerSubject != 10000 || cfg.MaxMsgSize < 16<<10 || cfg.MaxMsgSize > 17<<10 || cfg.MaxAge != 24*time.Hour {
				t.Fatalf("bounds: %d per container, %d bytes each, %s", cfg.MaxMsgsPerSubject, cfg.MaxMsgSize, cfg.MaxAge)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("subjects %v", info.State.Subjects)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A pod bound to a node that is NotReady says so while it waits.
func TestAPodOnANotReadyNodeSaysSo(t *testing.T) {
	c := startCluster(t, func(cfg *app.Config) { cfg.Pods.NodeGrace, cfg.Pods.NodeEviction = 3*time.Second, time.Hour })
	stop := startAgent(t, c, "n6", t.TempDir())
	k := projections.Key{Kind: "Node", Name: "n6"}
	c.wait(k, "Ready", 2*time.Minute, func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Ready" })
	stop()
	c.wait(k, "NotReady", 2*time.Minute, func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "NotReady" })
	c.apply(podYAML("stranded", "n6", "Never", "workload:v1", "hello"))
	o := c.waitPhase(podKey("default", "stranded"), "Pending")
	if r := o.GetStatus().GetConditions()[0].GetReason(); r != "NodeNotReady" || !strings.Contains(o.GetStatus().GetMessage(), "n6") {
		t.Fatalf("status %v", o.GetStatus())
	}
}

// A module printing line by line is stored in chunks, not a message per
// line, and every line arrives, in order.
func TestLogLinesAreStoredInChunks(t *testing.T) {
	c := startCluster(t, nil)
	c.push("workload:v1", workload(t))
	c.apply(podYAML("chatty", "n1", "Never", "workload:v1", "lines"))
	c.waitPhase(podKey("default", "chatty"), "Completed")
	var want strings.Builder
	for i := range 2000 {
		fmt.Fprintln(&want, "line", i)
	}
	deadline := time.Now().Add(time.Minute)
	for got := c.logs("default", "chatty", "main"); got != want.String(); got = c.logs("default", "chatty", "main") {
		if time.Now().After(deadline) {
			t.Fatalf("logs: %d bytes, want %d", len(got), want.Len())
		}
		time.Sleep(20 * time.Millisecond)
	}
	js, err := jetstream.New(c.app.Log().Conn())
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), events.LogsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background(), jetstream.WithSubjectFilter(events.LogsSubject("n1", "default", "chatty", "main")))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[events.LogsSubject("n1", "default", "chatty", "main")]; n == 0 || n > 200 {
		t.Fatalf("2,000 lines stored as %d messages", n)
	}
}
