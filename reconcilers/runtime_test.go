package reconcilers_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/manifest"
)

type env struct {
	log   *events.Log
	store *projections.Store
	gate  *gate.Gate
	rt    *reconcilers.Runtime
}

// start runs a log, a projection, the runtime with recs, and a gate that
// leaves finalization of their kinds to them.
func start(t *testing.T, qcfg queue.Config, recs ...reconcilers.Reconciler) *env {
	t.Helper()
	return startWith(t, qcfg, nil, recs...)
}

// startWith is start with the runtime's view of the log passed through
// wrap (nil: the log itself), for injecting faults.
func startWith(t *testing.T, qcfg queue.Config, wrap func(*events.Log) reconcilers.Log, recs ...reconcilers.Reconciler) *env {
	t.Helper()
	l := testenv.Log(t, events.Config{})
	var rl reconcilers.Log = l
	if wrap != nil {
		rl = wrap(l)
	}
	st := projections.NewStore(projections.StoreOptions{})
	quiet := slog.New(slog.DiscardHandler)
	p, err := projections.NewProjector(projections.ProjectorConfig{Log: l, Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := reconcilers.New(reconcilers.Config{Log: rl, State: st, Reconcilers: recs, Instance: "test", Queue: qcfg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	g, err := gate.New(gate.Config{Log: l, State: st, Finalizes: rt.Handles, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = p.Start(ctx) }()
	go func() { defer wg.Done(); _ = rt.Start(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	eventually(t, "the projection to catch up", p.Ready)
	if len(recs) > 0 {
		eventually(t, "the runtime to hold every partition", func() bool { return len(rt.Partitions()) == l.Partitions() })
	}
	return &env{log: l, store: st, gate: g, rt: rt}
}

func (e *env) apply(t *testing.T, yaml string) {
	t.Helper()
	objs, err := manifest.Decode("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.gate.Apply(context.Background(), gate.Admin("user/test"), objs, ""); err != nil {
		t.Fatal(err)
	}
}

func (e *env) delete(t *testing.T, name string) {
	t.Helper()
	if _, err := e.gate.Delete(context.Background(), gate.Admin("user/test"), key(name), ""); err != nil {
		t.Fatal(err)
	}
}

func key(name string) projections.Key {
	return projections.Key{Kind: "Widget", Namespace: "ns", Name: name}
}

func widget(name, size string, deps ...string) string {
	var d string
	if len(deps) > 0 {
		var refs []string
		for _, dep := range deps {
			refs = append(refs, fmt.Sprintf("{kind: Widget, name: %s}", dep))
		}
		d = ", dependsOn: [" + strings.Join(refs, ", ") + "]"
	}
	return fmt.Sprintf("apiVersion: v1\nkind: Widget\nmetadata: {name: %s, namespace: ns%s}\nspec: {size: %q}\n---\n", name, d, size)
}

// eventually polls cond until it holds or 2 minutes pass (CI machines run
// every package at once, under the race detector).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recorder is a reconciler that records every run.
type recorder struct {
	mu        sync.Mutex
	runs      []string // "name@generation" in run order
	finalized []string
	running   map[string]bool
	overlap   bool
	fail      map[string]error // result per name while failN > 0 (or < 0: always)
	failN     map[string]int
	gate      chan struct{} // when set, runs wait on it
}

func newRecorder() *recorder {
	return &recorder{running: map[string]bool{}, fail: map[string]error{}, failN: map[string]int{}}
}

func (r *recorder) Kinds() []string { return []string{"Widget"} }

func (r *recorder) Reconcile(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	name := obj.Metadata.Name
	r.mu.Lock()
	if r.running[name] {
		r.overlap = true
	}
	r.running[name] = true
	r.runs = append(r.runs, fmt.Sprintf("%s@%d", name, obj.Metadata.Generation))
	g := r.gate
	var err error
	if r.failN[name] != 0 {
		err = r.fail[name]
		if r.failN[name] > 0 {
			r.failN[name]--
		}
	}
	r.mu.Unlock()
	if g != nil {
		<-g
	}
	r.mu.Lock()
	r.running[name] = false
	r.mu.Unlock()
	return reconcilers.Result{Message: "size " + obj.Spec.Fields["size"].GetStringValue()}, err
}

func (r *recorder) Finalize(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	r.mu.Lock()
	r.finalized = append(r.finalized, obj.Metadata.Name)
	r.mu.Unlock()
	return reconcilers.Result{}, nil
}

func (r *recorder) snapshot() (runs, finalized []string, overlap bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.runs), slices.Clone(r.finalized), r.overlap
}

func ready(st *projections.Store, name string) bool {
	o := st.Get(key(name))
	return o != nil && reconcilers.IsReady(o) && o.Status.ObservedGeneration == o.Metadata.Generation
}

func TestReconcileRecordsStatus(t *testing.T) {
	rec := newRecorder()
	e := start(t, queue.Config{}, rec)
	e.apply(t, widget("a", "s"))
	eventually(t, "a Ready", func() bool { return ready(e.store, "a") })
	o := e.store.Get(key("a"))
	if o.Status.Phase != reconcilers.PhaseReady || o.Status.Message != "size s" || o.Status.NextRunTime == nil {
		t.Fatalf("status = %v", o.Status)
	}
	hist, err := e.log.History(context.Background(), key("a").Proto())
	if err != nil {
		t.Fatal(err)
	}
	last := hist[len(hist)-1]
	if last.Type != schemas.EventType_EVENT_TYPE_STATUS_CHANGED || last.Actor != "reconciler/Widget@test" || last.Cause != hist[0].Id {
		t.Fatalf("status event %v: want StatusChanged by reconciler/Widget@test caused by the apply", last)
	}
	// A spec change runs again on the new generation.
	e.apply(t, widget("a", "m"))
	eventually(t, "a Ready at generation 2", func() bool { return ready(e.store, "a") && e.store.Get(key("a")).Metadata.Generation == 2 })
}

// Changes while a run is in flight cause exactly one more run, on the
// latest state.
func TestChangesDuringRunCoalesce(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	e := start(t, queue.Config{}, rec)
	e.apply(t, widget("a", "1"))
	eventually(t, "first run", func() bool { runs, _, _ := rec.snapshot(); return len(runs) == 1 })
	for i := 2; i <= 5; i++ {
		e.apply(t, widget("a", fmt.Sprint(i)))
	}
	close(rec.gate)
	eventually(t, "a Ready at generation 5", func() bool { return ready(e.store, "a") && e.store.Get(key("a")).Metadata.Generation == 5 })
	runs, _, overlap := rec.snapshot()
	if overlap {
		t.Fatal("a key ran twice at once")
	}
	// The four changes made during the first run coalesce: no run sees an
	// intermediate generation, and the next run sees the latest. (The
	// consumer may hand the runtime the last changes only once that run has
	// begun; they then cause exactly one more run, on the same state.)
	if len(runs) < 2 || len(runs) > 3 || runs[0] != "a@1" || slices.ContainsFunc(runs[1:], func(r string) bool { return r != "a@5" }) {
		t.Fatalf("runs = %v, want a@1 then one or two runs at a@5", runs)
	}
}

func TestErrorsRetryAndTerminalWaits(t *testing.T) {
	rec := newRecorder()
	rec.fail["a"], rec.failN["a"] = errors.New("backend down"), 2
	rec.fail["b"], rec.failN["b"] = reconcilers.Terminal(errors.New("size is impossible")), 1
	e := start(t, queue.Config{BaseDelay: time.Millisecond}, rec)
	// Watch b's statuses, so no transient one is missed.
	changes, stop, err := e.store.Watch(projections.Query{Kind: "Widget"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var mu sync.Mutex
	var failed *schemas.Status
	go func() {
		for c := range changes {
			if c.Key.Name == "b" && c.Object.GetStatus().GetPhase() == reconcilers.PhaseFailed {
				mu.Lock()
				failed = c.Object.Status
				mu.Unlock()
			}
		}
	}()
	e.apply(t, widget("a", "s")+widget("b", "s"))
	eventually(t, "a Ready after a retry", func() bool { return ready(e.store, "a") })
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		f := failed
		mu.Unlock()
		if f != nil {
			break
		}
		if time.Now().After(deadline) {
			runs, _, _ := rec.snapshot()
			hist, _ := e.log.History(context.Background(), key("b").Proto())
			for _, h := range hist {
				t.Logf("b event %d %s %s %v", h.Sequence, h.Type, h.Actor, h.GetObject().GetStatus())
			}
			t.Fatalf("b never Failed; runs %v; b now %v", runs, e.store.Get(key("b")).GetStatus())
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	b := failed
	mu.Unlock()
	if !strings.Contains(b.Message, "size is impossible") || b.NextRunTime != nil {
		t.Fatalf("terminal status = %v; want the error and no next run", b)
	}
	runs, _, _ := rec.snapshot()
	if n := strings.Count(fmt.Sprint(runs), "b@"); n != 1 {
		t.Fatalf("b ran %d times; a terminal error is not retried", n)
	}
	e.apply(t, widget("b", "l")) // the object changes: it runs again
	eventually(t, "b Ready after its change", func() bool { return ready(e.store, "b") })
}

func TestDependencyOrder(t *testing.T) {
	rec := newRecorder()
	e := start(t, queue.Config{BaseDelay: time.Millisecond, MaxDelay: 50 * time.Millisecond}, rec)
	// A diamond: top depends on left and right, both depend on base.
	// Applied in one batch, top first, so only dependency gating orders
	// the runs.
	e.apply(t, widget("top", "s", "left", "right")+widget("left", "s", "base")+widget("right", "s", "base")+widget("base", "s"))
	for _, n := range []string{"base", "left", "right", "top"} {
		eventually(t, n+" Ready", func() bool { return ready(e.store, n) })
	}
	runs, _, _ := rec.snapshot()
	pos := func(n string) int { return slices.Index(runs, n+"@1") }
	if !(pos("base") < pos("left") && pos("base") < pos("right") && pos("left") < pos("top") && pos("right") < pos("top")) {
		t.Fatalf("runs %v are not in dependency order", runs)
	}

	// A dependency that turns unready holds its dependents.
	rec.mu.Lock()
	rec.fail["base"], rec.failN["base"] = errors.New("base broke"), -1
	rec.mu.Unlock()
	e.apply(t, widget("base", "m"))
	eventually(t, "base not Ready", func() bool { return !reconcilers.IsReady(e.store.Get(key("base"))) })
	e.apply(t, widget("left", "m", "base"))
	eventually(t, "left waiting", func() bool {
		return e.store.Get(key("left")).GetStatus().GetPhase() == reconcilers.PhaseWaiting
	})
	if msg := e.store.Get(key("left")).Status.Message; !strings.Contains(msg, "Widget/ns/base is not Ready") {
		t.Fatalf("left's status message %q does not name the dependency", msg)
	}
	// base recovers (its next retry succeeds): left runs.
	rec.mu.Lock()
	rec.failN["base"] = 0
	rec.mu.Unlock()
	eventually(t, "left Ready at generation 2", func() bool {
		return ready(e.store, "left") && e.store.Get(key("left")).Metadata.Generation == 2
	})

	// Deletion runs in reverse order: base is finalized only after its
	// dependents are gone.
	for _, n := range []string{"base", "left", "right", "top"} {
		e.delete(t, n)
	}
	eventually(t, "all gone", func() bool { return e.store.Len() == 0 })
	_, fin, _ := rec.snapshot()
	fpos := func(n string) int { return slices.Index(fin, n) }
	if !(fpos("top") < fpos("left") && fpos("top") < fpos("right") && fpos("left") < fpos("base") && fpos("right") < fpos("base")) {
		t.Fatalf("finalized %v, want reverse dependency order", fin)
	}
}

// owning is a recorder that also owns Gadget objects labelled owner=<name>.
type owning struct{ *recorder }

func (o owning) Owners(rec *schemas.ObjectRecord) []projections.Key {
	if rec.GetKind() != "Gadget" || rec.GetMetadata().GetLabels()["owner"] == "" {
		return nil
	}
	return []projections.Key{key(rec.Metadata.Labels["owner"])}
}

// A change of an object a Watcher owns runs its owner again.
func TestWatcherOwnedChangeRunsOwner(t *testing.T) {
	rec := newRecorder()
	e := start(t, queue.Config{}, owning{rec})
	e.apply(t, widget("a", "s"))
	eventually(t, "a Ready", func() bool { return ready(e.store, "a") })
	runs, _, _ := rec.snapshot()
	e.apply(t, "apiVersion: v1\nkind: Gadget\nmetadata: {name: g, namespace: ns, labels: {owner: a}}\nspec: {x: 1}\n")
	eventually(t, "a run again", func() bool { r, _, _ := rec.snapshot(); return len(r) > len(runs) })
	e.apply(t, "apiVersion: v1\nkind: Gadget\nmetadata: {name: h, namespace: ns}\nspec: {x: 1}\n")
	time.Sleep(200 * time.Millisecond)
	after, _, _ := rec.snapshot()
	e.apply(t, "apiVersion: v1\nkind: Gadget\nmetadata: {name: h, namespace: ns}\nspec: {x: 2}\n")
	time.Sleep(200 * time.Millisecond)
	if r, _, _ := rec.snapshot(); len(r) != len(after) {
		t.Fatalf("an unowned change ran the owner: %v", r)
	}
}
