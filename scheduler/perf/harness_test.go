package perf

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/scheduler"
	"github.com/jetplane/jetplane/schemas"
)

var (
	benchPods     = flag.Int("sched.pods", 10000, "pods each scheduling benchmark places")
	benchWorkers  = flag.Int("sched.workers", 64, "concurrent Schedule calls; each waits for its Bound to be acknowledged, so this bounds the binds in flight")
	benchParallel = flag.Int("sched.parallelism", 0, "goroutines for Filter and Score (0: the default, 16)")
	benchProfile  = flag.String("sched.cpuprofile", "", "write a CPU profile of BenchmarkScheduling's timed spans only (not the setup: guest compilation, nodes and pods applied) to this file")
	benchHeap     = flag.String("sched.memprofile", "", "write heap profiles at the start and the end of BenchmarkScheduling's timed spans to this file with .start and .end added (go tool pprof -base FILE.start FILE.end: what the span allocated)")
)

// asServed sets the garbage collector as jetplane serve does (GOGC=200
// unless GOGC is set) and returns what restores it. kube-scheduler, a
// process of its own, keeps its default.
func asServed() func() {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(200)
	return func() { debug.SetGCPercent(old) }
}

// cluster is a log on embedded NATS, its projection and a started
// scheduler.
type cluster struct {
	log   *events.Log
	store *projections.Store
	sched *scheduler.Scheduler
	stop  func()
}

func newCluster(tb testing.TB, profiles map[string]*scheduler.Profile) *cluster {
	tb.Helper()
	l := testenv.Log(tb, events.Config{})
	store := projections.NewStore(projections.StoreOptions{})
	quiet := slog.New(slog.DiscardHandler)
	p, err := projections.NewProjector(projections.ProjectorConfig{Log: l, Store: store, Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = p.Start(ctx) }()
	s, err := scheduler.New(scheduler.Options{Log: l, State: store, Profiles: profiles, Instance: "bench", Logger: quiet})
	if err != nil {
		tb.Fatal(err)
	}
	go func() { defer wg.Done(); _ = s.Start(ctx) }()
	c := &cluster{log: l, store: store, sched: s, stop: func() { cancel(); wg.Wait() }}
	tb.Cleanup(c.stop)
	return c
}

func mustStruct(tb testing.TB, v any) *structpb.Struct {
	data, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON(data); err != nil {
		tb.Fatal(err)
	}
	return s
}

// The fake cluster, as scheduler_perf's default templates have it: nodes
// of 4 CPUs, 32 GiB and 110 pods in 10 zones; pods asking 100m and 500Mi.
func benchNode(tb testing.TB, i int) *schemas.Object {
	name := fmt.Sprintf("node-%05d", i)
	return &schemas.Object{ApiVersion: "v1", Kind: "Node",
		Metadata: &schemas.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%10)}},
		Spec: mustStruct(tb, map[string]any{"allocatable": map[string]string{"cpu": "4", "memory": "32Gi", "pods": "110"}})}
}

func benchPod(tb testing.TB, i int) *schemas.Object {
	return &schemas.Object{ApiVersion: "v1", Kind: "Pod",
		Metadata: &schemas.ObjectMeta{Name: fmt.Sprintf("pod-%05d", i), Namespace: "bench"},
		Spec: mustStruct(tb, map[string]any{"containers": []any{map[string]any{"name": "pause", "image": "pause",
			"resources": map[string]any{"requests": map[string]string{"cpu": "100m", "memory": "500Mi"}}}}})}
}

// apply appends objects as APPLIED events and waits for the projection.
func (c *cluster) apply(tb testing.TB, objs []*schemas.Object) {
	tb.Helper()
	ctx := context.Background()
	var last uint64
	for i := 0; i < len(objs); i += 1000 {
		var entries []events.Entry
		for _, o := range objs[i:min(i+1000, len(objs))] {
			entries = append(entries, events.Entry{Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED,
				Key: projections.ObjectKey(o).Proto(), Object: o, Actor: "user/bench"}, Expect: events.AnyVersion})
		}
		res, errs := c.log.AppendAsync(ctx, entries)
		for _, err := range errs {
			if err != nil {
				tb.Fatal(err)
			}
		}
		last = res[len(res)-1].Sequence
	}
	if err := c.store.WaitFor(ctx, last); err != nil {
		tb.Fatal(err)
	}
}

// bound counts the pods the projection shows bound once it has folded
// the whole log.
func (c *cluster) bound(tb testing.TB) int {
	tb.Helper()
	ctx := context.Background()
	last, err := c.log.LastSequence(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.store.WaitFor(ctx, last); err != nil {
		tb.Fatal(err)
	}
	objs, _ := c.store.List(projections.Query{Kind: "Pod"})
	n := 0
	for _, o := range objs {
		if o.GetSpec().GetFields()["nodeName"].GetStringValue() != "" {
			n++
		}
	}
	return n
}

// Guest modules are built from source once per test run.
var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func guestPath(tb testing.TB, name string) string {
	tb.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "jetplane-perf-"); buildErr != nil {
			return
		}
		for n, src := range map[string]string{"labelfilter": "../guest/examples/labelfilter", "nodenumber": "../guest/examples/nodenumber",
			"upstream": "../wasm/testdata/upstream"} {
			cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(buildDir, n+".wasm"), src)
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", n, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return filepath.Join(buildDir, name+".wasm")
}
