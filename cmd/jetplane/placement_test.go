package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/scheduler"
	"github.com/jetplane/jetplane/schemas"
)

func spec(t *testing.T, v any) *structpb.Struct {
	t.Helper()
	data, _ := json.Marshal(v)
	s := &structpb.Struct{}
	if err := s.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestPlacement schedules pods with the real scheduler on a real log, then
// runs `jetplane placement` and `placement --replay` against the API, and
// the old form `explain Pod/...`, which still runs it with a note.
func TestPlacement(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	store := projections.NewStore(projections.StoreOptions{})
	quiet := slog.New(slog.DiscardHandler)
	proj, err := projections.NewProjector(projections.ProjectorConfig{Log: l, Store: store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := scheduler.New(scheduler.Options{Log: l, State: store, Instance: "test", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = proj.Start(ctx) }()
	go func() { defer wg.Done(); _ = sched.Start(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	g, err := gate.New(gate.Config{Log: l, State: store})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := l.NodeStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Gate: g, Store: store, Log: l, Logger: quiet, Pods: storeOnly{nodes}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)

	var objs []*schemas.Object
	for i, cpu := range []string{"1", "2", "4"} {
		objs = append(objs, &schemas.Object{ApiVersion: "v1", Kind: "Node", Metadata: &schemas.ObjectMeta{Name: fmt.Sprintf("n%d", i)},
			Spec: spec(t, map[string]any{"allocatable": map[string]string{"cpu": cpu, "memory": "8Gi", "pods": "10"}})})
	}
	objs = append(objs, &schemas.Object{ApiVersion: "v1", Kind: "Pod", Metadata: &schemas.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: spec(t, map[string]any{"containers": []any{map[string]any{"name": "web", "image": "web",
			"resources": map[string]any{"requests": map[string]string{"cpu": "1500m"}}}}})})
	var last uint64
	for _, o := range objs {
		r, err := l.Append(ctx, events.Entry{Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: projections.ObjectKey(o).Proto(), Object: o}, Expect: events.AnyVersion})
		if err != nil {
			t.Fatal(err)
		}
		last = r.Sequence
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	if err := store.WaitFor(wctx, last); err != nil {
		t.Fatal(err)
	}
	podKey := projections.Key{Kind: "Pod", Namespace: "default", Name: "web"}
	if _, err := sched.Schedule(ctx, store.Get(podKey)); err != nil {
		t.Fatal(err)
	}
	// Schedule returns once the Bound event is queued: wait for its
	// answer, then for the projection to fold the whole log.
	if err := sched.Flush(wctx); err != nil {
		t.Fatal(err)
	}
	head, err := l.LastSequence(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WaitFor(wctx, head); err != nil {
		t.Fatal(err)
	}
	if store.Get(podKey).GetSpec().GetFields()["nodeName"] == nil {
		t.Fatal("pod not bound")
	}

	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append([]string{"--server", hs.URL}, args...))
		if err := root.ExecuteContext(ctx); err != nil {
			t.Fatalf("jetplane %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	out := run("placement", "Pod/default/web")
	for _, want := range []string{"Node:       n2", "Nodes:      3 evaluated of 3, 2 feasible", "Rejected:   1 Insufficient cpu",
		"NodeResourcesFit=builtin/1+LeastAllocated"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q:\n%s", want, out)
		}
	}
	out = run("placement", "Pod/default/web", "--replay")
	if !strings.Contains(out, "Replay: same decision: node n2") {
		t.Errorf("replay output:\n%s", out)
	}
	out = run("explain", "Pod/default/web", "--replay")
	if !strings.Contains(out, "Replay: same decision: node n2") || !strings.Contains(out, "note: a scheduling decision is now 'jetplane placement Pod/default/web'") {
		t.Errorf("the old form explain Pod/... --replay:\n%s", out)
	}
	cfg := filepath.Join(t.TempDir(), "sched.yaml")
	os.WriteFile(cfg, []byte("profiles:\n- schedulerName: jetplane\n  pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated}}\n"), 0o644)
	out = run("explain", "Pod/default/web", "--replay", "--config", cfg)
	for _, want := range []string{"differs", "plugin NodeResourcesFit changed: builtin/1+MostAllocated, was builtin/1+LeastAllocated", "best totals"} {
		if !strings.Contains(out, want) {
			t.Errorf("replay with another config lacks %q:\n%s", want, out)
		}
	}

	// A field that does not exist is named with its path, the file and
	// the fields that do.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("profiles:\n- schedulerName: jetplane\n  plugin:\n    score: {enabled: [{name: NodeName}]}\n"), 0o644)
	var badOut bytes.Buffer
	if code := execute(ctx, []string{"--server", hs.URL, "placement", "Pod/default/web", "--replay", "--config", bad}, &badOut, &badOut); code == 0 ||
		!strings.Contains(badOut.String(), bad+": line 3: profiles[0].plugin: unknown field; the fields of profiles[0] are schedulerName, percentageOfNodesToScore, plugins, pluginConfig") {
		t.Errorf("a bad scheduler config field: exit %d\n%s", code, badOut.String())
	}

	// A WebAssembly plugin named by image is looked up in the image store
	// through the API.
	os.WriteFile(cfg, []byte("profiles:\n- schedulerName: jetplane\n  plugins:\n    multiPoint:\n      enabled: [{name: onlyssd}]\n"+
		"  pluginConfig:\n  - name: onlyssd\n    args: {image: \"plugins/onlyssd:v1\"}\n"), 0o644)
	var errOut bytes.Buffer
	root := newRoot()
	root.SetOut(&errOut)
	root.SetErr(&errOut)
	root.SetArgs([]string{"--server", hs.URL, "placement", "Pod/default/web", "--replay", "--config", cfg})
	if err := root.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "image plugins/onlyssd:v1") || !strings.Contains(err.Error(), "push it with jetplane image push") {
		t.Errorf("replay with a plugin image not pushed: %v, want the store's answer through the API", err)
	}

}

// storeOnly serves the image routes from a node store, without pods.
type storeOnly struct{ nodes *events.NodeStore }

func (s storeOnly) Images() *events.Images { return s.nodes.Images() }
func (s storeOnly) ReadLogs(ctx context.Context, q events.LogQuery, fn func(events.LogLine) error) error {
	return s.nodes.ReadLogs(ctx, q, fn)
}
func (s storeOnly) NewestLog(ctx context.Context, q events.LogQuery) ([]events.LogLine, error) {
	return s.nodes.NewestLog(ctx, q)
}
func (storeOnly) ImageInUse(string, string) []string { return nil }
func (storeOnly) MaxImageBytes() int64               { return events.DefaultMaxImageBytes }
