package pod_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/app"
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
	dir, err := os.MkdirTemp("", "jetplane-pod-test-")
	if err != nil {
		panic(err)
	}
	compileCache = filepath.Join(dir, "compiled")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// workload is testdata/workload built for WASI, once per test run.
func workload(tb testing.TB) []byte {
	tb.Helper()
	workloadOnce.Do(func() {
		out := filepath.Join(filepath.Dir(compileCache), "workload.wasm")
		cmd := exec.Command("go", "build", "-o", out, "./testdata/workload")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if msg, err := cmd.CombinedOutput(); err != nil {
			workloadErr = fmt.Errorf("build workload: %v\n%s", err, msg)
			return
		}
		workloadBin, workloadErr = os.ReadFile(out)
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
		DataDir: tb.TempDir(), Listen: "127.0.0.1:0", NATSPort: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Pods: app.PodsConfig{Agent: pod.AgentConfig{Node: "n1", Clock: pod.ScaledClock(scale), CompileCache: compileCache, Heartbeat: time.Second}},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			tb.Error("app did not stop within 30s")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(a.URL() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			tb.Fatal("app not ready after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	return c.wait(k, phase, 60*time.Second, func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == phase })
}

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
		p := st.GetPhase()
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
	err := c.app.NodeStore().ReadLogs(context.Background(), events.LogQuery{Namespace: ns, Pod: name, Container: container}, func(l events.LogLine) error {
		b.Write(l.Data)
		return nil
	})
	if err != nil {
		c.tb.Fatal(err)
	}
	return b.String()
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
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.logs("default", "hello", "main"), "hello from main\na line on stderr\n") {
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
