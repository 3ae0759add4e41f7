package app_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
)

// stamps records, in one order, the starts and ends of runs and the
// app's log lines, so that a test can say what happened before what.
type stamps struct {
	mu    sync.Mutex
	lines []string
}

func (s *stamps) add(line string) {
	s.mu.Lock()
	s.lines = append(s.lines, line)
	s.mu.Unlock()
}

func (s *stamps) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

func (s *stamps) count(prefix string) int {
	n := 0
	for _, l := range s.all() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// stampHandler is a slog handler adding each message to stamps.
type stampHandler struct{ s *stamps }

func (h stampHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h stampHandler) Handle(_ context.Context, r slog.Record) error {
	h.s.add("log " + r.Message)
	return nil
}
func (h stampHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h stampHandler) WithGroup(string) slog.Handler      { return h }

// Stopping in the middle of a burst: the runtime stops taking work and
// its runs in flight end before the projection they read stops; no run
// starts or ends after.
func TestShutdownStopsRuntimeBeforeProjection(t *testing.T) {
	s := &stamps{}
	rec := reconcilers.Funcs{KindList: []string{"Slow"}, ReconcileFunc: func(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
		s.add("start " + obj.Metadata.Name)
		defer s.add("end " + obj.Metadata.Name)
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
		return reconcilers.Result{}, nil
	}}
	cfg := app.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", NATSPort: -1, Reconcilers: []reconcilers.Reconciler{rec},
		Logger: slog.New(stampHandler{s})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	client := &api.Client{BaseURL: a.URL()}
	eventuallyApp(t, "the API", func() bool { _, err := client.List(ctx, api.Query{}); return err == nil })
	var b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Slow\nmetadata: {name: s%d, namespace: ns}\nspec: {}\n---\n", i)
	}
	if _, err := client.Apply(ctx, "burst.yaml", []byte(b.String()), ""); err != nil {
		t.Fatal(err)
	}
	eventuallyApp(t, "the burst under way", func() bool { return s.count("start ") >= 40 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the app did not stop")
	}
	lines := s.all()
	stopping := -1
	for i, l := range lines {
		if l == "log stopping the projection" {
			stopping = i
		}
	}
	if stopping < 0 {
		t.Fatalf("no log line says the projection stops: %q", lines)
	}
	for _, l := range lines[stopping:] {
		if strings.HasPrefix(l, "start ") || strings.HasPrefix(l, "end ") {
			t.Fatalf("%q after the projection began to stop; the last lines: %q", l, lines[max(0, stopping-5):])
		}
	}
	if s.count("start ") == 500 {
		t.Fatal("the burst had ended before the stop; the test shows nothing")
	}
}

// get shows the next run time the runtime holds, which moves at every
// resync although the log records no new status.
func TestGetShowsTheRuntimesNextRun(t *testing.T) {
	rec := reconcilers.Funcs{KindList: []string{"Steady"}, ReconcileFunc: func(context.Context, *schemas.Object) (reconcilers.Result, error) {
		return reconcilers.Result{}, nil
	}}
	a, client := startApp(t, app.Config{Reconcilers: []reconcilers.Reconciler{rec}, Queue: queue.Config{Resync: 300 * time.Millisecond}})
	ctx := context.Background()
	if _, err := client.Apply(ctx, "s.yaml", []byte("apiVersion: v1\nkind: Steady\nmetadata: {name: s, namespace: ns}\nspec: {}\n"), ""); err != nil {
		t.Fatal(err)
	}
	k := api.Key{Kind: "Steady", Namespace: "ns", Name: "s"}
	next := func() (time.Time, uint64) {
		raw, err := client.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		o, err := api.DecodeObject(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !reconcilers.IsReady(o) || o.Status.NextRunTime == nil {
			return time.Time{}, 0
		}
		return o.Status.NextRunTime.AsTime(), o.Metadata.ResourceVersion
	}
	eventuallyApp(t, "s Ready with a next run", func() bool { t, _ := next(); return !t.IsZero() })
	first, rv := next()
	eventuallyApp(t, "a later next run", func() bool { t, _ := next(); return t.After(first) })
	_, rv2 := next()
	if rv2 != rv {
		t.Fatalf("resync wrote to the log (resourceVersion %d → %d)", rv, rv2)
	}
	_ = a
}

// A bulk client asking for the brief answer gets each object's key,
// action and resourceVersion, and no object.
func TestApplyBriefAnswer(t *testing.T) {
	a, client := startApp(t, app.Config{})
	docs := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\ndata: {x: \"1\"}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: ns}\ndata: {x: \"2\"}\n"
	resp, err := client.ApplyBrief(context.Background(), "brief.yaml", []byte(docs), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != 2 {
		t.Fatalf("results = %+v", resp.Results)
	}
	for _, r := range resp.Results {
		o := a.Store().Get(projections.Key{Kind: "ConfigMap", Namespace: "ns", Name: r.Key.Name})
		if r.Object != nil || r.Action == "" || o == nil || r.ResourceVersion != o.Metadata.ResourceVersion {
			t.Fatalf("brief result %+v; stored object %v", r, o)
		}
	}
	full, err := client.Apply(context.Background(), "full.yaml", []byte(docs), "")
	if err != nil {
		t.Fatal(err)
	}
	if full.Results[0].Object == nil {
		t.Fatal("the full answer lost its objects")
	}
}
