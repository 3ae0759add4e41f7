package gate_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/manifest"
)

// conflictCountingLog is the real log, counting the appends it refused with
// ErrConflict, so a test can prove the gate's retry path ran.
type conflictCountingLog struct {
	*events.Log
	conflicts atomic.Int64
}

func (c *conflictCountingLog) AppendBatch(ctx context.Context, entries []events.Entry) ([]events.Result, error) {
	res, err := c.Log.AppendBatch(ctx, entries)
	if errors.Is(err, events.ErrConflict) {
		c.conflicts.Add(1)
	}
	return res, err
}

func (c *conflictCountingLog) AppendEach(ctx context.Context, entries []events.Entry) ([]events.Result, []error) {
	res, errs := c.Log.AppendEach(ctx, entries)
	for _, err := range errs {
		if errors.Is(err, events.ErrConflict) {
			c.conflicts.Add(1)
		}
	}
	return res, errs
}

// env is a gate on a real log, with a store kept current by a projector.
type env struct {
	log   *conflictCountingLog
	store *projections.Store
	gate  *gate.Gate
	// stopProjector stops the projector and waits for it to return; calling
	// it twice is harmless. startProjector starts a new one on the same
	// store, which resumes after the store's sequence.
	stopProjector  func()
	startProjector func()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	l := testenv.Log(t, events.Config{})
	e := &env{log: &conflictCountingLog{Log: l}, store: projections.NewStore(projections.StoreOptions{})}
	e.startProjector = func() {
		t.Helper()
		p, err := projections.NewProjector(projections.ProjectorConfig{Log: l, Store: e.store, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Start(ctx) }()
		var once sync.Once
		e.stopProjector = func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
					t.Errorf("projector stopped with %v", err)
				}
			})
		}
		t.Cleanup(e.stopProjector)
	}
	e.startProjector()
	g, err := gate.New(gate.Config{Log: e.log, State: e.store, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	e.gate = g
	return e
}

func decode(t *testing.T, yaml string) []*schemas.Object {
	t.Helper()
	objs, err := manifest.Decode("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return objs
}

func (e *env) apply(t *testing.T, actor, yaml, idem string) []gate.Outcome {
	t.Helper()
	out, err := e.gate.Apply(context.Background(), gate.Admin(actor), decode(t, yaml), idem)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return out
}

func (e *env) count(t *testing.T) uint64 {
	t.Helper()
	n, err := e.log.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func configMap(name string, labels, data string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: ns, labels: {%s}}\ndata: {%s}\n", name, labels, data)
}

var webKey = projections.Key{Kind: "ConfigMap", Namespace: "ns", Name: "web"}

// TestApplyLifecycle applies a series of versions of one object and checks
// what each apply did, the generation, the events written, and that the uid
// and creation time never change.
func TestApplyLifecycle(t *testing.T) {
	e := newEnv(t)
	steps := []struct {
		name       string
		yaml       string
		want       gate.Action
		wantGen    int64
		wantEvents uint64 // events the apply adds to the log
	}{
		{"create", configMap("web", "app: web", "a: '1'"), gate.Created, 1, 1},
		{"identical re-apply", configMap("web", "app: web", "a: '1'"), gate.Unchanged, 1, 0},
		{"label-only change", configMap("web", "app: web, tier: front", "a: '1'"), gate.Configured, 1, 1},
		{"label-only re-apply", configMap("web", "app: web, tier: front", "a: '1'"), gate.Unchanged, 1, 0},
		{"spec change", configMap("web", "app: web, tier: front", "a: '2'"), gate.Configured, 2, 1},
		{"spec and label change", configMap("web", "app: web", "a: '3'"), gate.Configured, 3, 1},
		{"spec back to an earlier value", configMap("web", "app: web", "a: '1'"), gate.Configured, 4, 1},
	}
	var uid string
	var created *schemas.Object
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := e.count(t)
			out := e.apply(t, "user/alice", st.yaml, "")
			if len(out) != 1 {
				t.Fatalf("%d outcomes, want 1", len(out))
			}
			if out[0].Key != webKey {
				t.Errorf("key %v, want %v", out[0].Key, webKey)
			}
			if out[0].Action != st.want {
				t.Errorf("action %q, want %q", out[0].Action, st.want)
			}
			if got := e.count(t) - before; got != st.wantEvents {
				t.Errorf("the log grew by %d events, want %d", got, st.wantEvents)
			}
			obj := e.store.Get(webKey)
			if obj == nil {
				t.Fatal("object missing from the store after apply")
			}
			if !proto.Equal(out[0].Object, obj) {
				t.Errorf("outcome object differs from the store's:\n%v\n%v", out[0].Object, obj)
			}
			m := obj.Metadata
			if m.Generation != st.wantGen {
				t.Errorf("generation %d, want %d", m.Generation, st.wantGen)
			}
			if created == nil {
				created, uid = obj, m.Uid
				if uid == "" || m.CreationTime == nil {
					t.Fatalf("created object has uid %q and creationTime %v; want both set", uid, m.CreationTime)
				}
			}
			if m.Uid != uid {
				t.Errorf("uid changed from %q to %q", uid, m.Uid)
			}
			if !proto.Equal(m.CreationTime, created.Metadata.CreationTime) {
				t.Errorf("creationTime changed from %v to %v", created.Metadata.CreationTime.AsTime(), m.CreationTime.AsTime())
			}
			want := decode(t, st.yaml)[0]
			if !proto.Equal(obj.Spec, want.Spec) || !equalMaps(m.Labels, want.Metadata.Labels) {
				t.Errorf("stored spec %v labels %v, want %v %v", obj.Spec, m.Labels, want.Spec, want.Metadata.Labels)
			}
		})
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestApplyIdempotencyKey repeats an apply with the same idempotency key:
// the second call finds nothing to do and writes nothing.
func TestApplyIdempotencyKey(t *testing.T) {
	e := newEnv(t)
	yaml := configMap("web", "app: web", "a: '1'") + "---\n" + configMap("api", "app: api", "a: '1'")
	first := e.apply(t, "user/alice", yaml, "k1")
	for _, o := range first {
		if o.Action != gate.Created {
			t.Fatalf("first apply: %s %s, want created", o.Key, o.Action)
		}
	}
	before := e.count(t)
	second := e.apply(t, "user/alice", yaml, "k1")
	for i, o := range second {
		if o.Action != gate.Unchanged {
			t.Errorf("second apply: %s %s, want unchanged", o.Key, o.Action)
		}
		if o.Object.GetMetadata().GetUid() != first[i].Object.GetMetadata().GetUid() {
			t.Errorf("%s: uid changed on the repeated apply", o.Key)
		}
	}
	if after := e.count(t); after != before {
		t.Errorf("the repeated apply wrote %d events, want 0", after-before)
	}
}

// TestApplyIdempotencyKeyConcurrentRetries sends one request several times
// at once with one idempotency key, as a client retrying after a timeout
// would while the first attempt is still in flight: every attempt succeeds
// and the objects' events are stored once.
func TestApplyIdempotencyKeyConcurrentRetries(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"one object", configMap("web", "app: web", "a: '1'")},
		{"an atomic batch", configMap("web", "app: web", "a: '1'") + "---\n" + configMap("api", "app: api", "a: '1'")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			objs := decode(t, tt.yaml)
			const attempts = 4
			var wg sync.WaitGroup
			errs := make([]error, attempts)
			for i := range attempts {
				objs := decode(t, tt.yaml)
				wg.Go(func() {
					_, errs[i] = e.gate.Apply(context.Background(), gate.Admin("user/alice"), objs, "retry-1")
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("attempt %d: %v", i, err)
				}
			}
			if got := e.count(t); got != uint64(len(objs)) {
				t.Errorf("the log holds %d events, want %d (one per object)", got, len(objs))
			}
			for _, o := range objs {
				k := projections.KeyOf(manifest.KeyOf(o))
				if got := e.store.Get(k); got.GetMetadata().GetGeneration() != 1 {
					t.Errorf("%s: %v, want it stored at generation 1", k, got)
				}
			}
		})
	}
}

// TestDelete deletes an object of a kind nobody finalizes: it leaves the
// store, and its history records who asked and what finished it.
func TestDelete(t *testing.T) {
	e := newEnv(t)
	e.apply(t, "user/alice", configMap("web", "app: web", "a: '1'"), "")
	out, err := e.gate.Delete(context.Background(), gate.Admin("user/bob"), webKey, "")
	if err != nil {
		t.Fatal(err)
	}
	if out.Action != gate.Deleted || out.Object != nil || out.Key != webKey {
		t.Errorf("outcome %+v, want %v deleted with no object", out, webKey)
	}
	if got := e.store.Get(webKey); got != nil {
		t.Errorf("store still holds %v", got)
	}
	objs, _ := e.store.List(projections.Query{Labels: mustSelector(t, "app=web")})
	if len(objs) != 0 {
		t.Errorf("label index still lists %d objects", len(objs))
	}
	hist, err := e.log.History(context.Background(), webKey.Proto())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		typ   schemas.EventType
		actor string
	}{
		{schemas.EventType_EVENT_TYPE_APPLIED, "user/alice"},
		{schemas.EventType_EVENT_TYPE_DELETE_REQUESTED, "user/bob"},
		{schemas.EventType_EVENT_TYPE_FINALIZED, "jetplane/finalizer"},
	}
	if len(hist) != len(want) {
		t.Fatalf("history has %d events, want %d: %v", len(hist), len(want), hist)
	}
	for i, w := range want {
		if hist[i].Type != w.typ || hist[i].Actor != w.actor {
			t.Errorf("event %d: %s by %q, want %s by %q", i, hist[i].Type, hist[i].Actor, w.typ, w.actor)
		}
		if i > 0 && hist[i].Sequence <= hist[i-1].Sequence {
			t.Errorf("event %d: sequence %d not after %d", i, hist[i].Sequence, hist[i-1].Sequence)
		}
	}
	if req, fin := hist[1], hist[2]; req.Id == "" || fin.Cause != req.Id {
		t.Errorf("Finalized.Cause %q, want the DeleteRequested id %q", fin.Cause, req.Id)
	}
}

// TestDeleteMissing deletes keys that do not exist: never created, and
// already deleted.
func TestDeleteMissing(t *testing.T) {
	e := newEnv(t)
	e.apply(t, "user/alice", configMap("web", "app: web", "a: '1'"), "")
	if _, err := e.gate.Delete(context.Background(), gate.Admin("user/alice"), webKey, ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  projections.Key
	}{
		{"never existed", projections.Key{Kind: "ConfigMap", Namespace: "ns", Name: "nope"}},
		{"already deleted", webKey},
		{"other namespace", projections.Key{Kind: "ConfigMap", Namespace: "other", Name: "web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.count(t)
			_, err := e.gate.Delete(context.Background(), gate.Admin("user/alice"), tt.key, "")
			if !errors.Is(err, gate.ErrNotFound) {
				t.Fatalf("err %v, want ErrNotFound", err)
			}
			if !strings.Contains(err.Error(), tt.key.String()) {
				t.Errorf("error %q does not name %s", err, tt.key)
			}
			if after := e.count(t); after != before {
				t.Errorf("the log grew by %d events", after-before)
			}
		})
	}
}

// TestApplyAfterDeleteCreatesAnew re-applies a deleted object: it is a new
// object, with a new uid and generation 1.
func TestApplyAfterDeleteCreatesAnew(t *testing.T) {
	e := newEnv(t)
	first := e.apply(t, "user/alice", configMap("web", "app: web", "a: '1'"), "")[0].Object
	e.apply(t, "user/alice", configMap("web", "app: web", "a: '2'"), "")
	if _, err := e.gate.Delete(context.Background(), gate.Admin("user/alice"), webKey, ""); err != nil {
		t.Fatal(err)
	}
	out := e.apply(t, "user/alice", configMap("web", "app: web", "a: '2'"), "")
	if out[0].Action != gate.Created {
		t.Errorf("action %q, want created", out[0].Action)
	}
	m := e.store.Get(webKey).GetMetadata()
	if m.GetGeneration() != 1 || m.GetUid() == "" || m.GetUid() == first.Metadata.Uid || m.GetDeletionTime() != nil {
		t.Errorf("re-created object has generation %d, uid %q (first was %q), deletionTime %v; want 1, a new uid, none",
			m.GetGeneration(), m.GetUid(), first.Metadata.Uid, m.GetDeletionTime())
	}
}

func mustSelector(t *testing.T, s string) projections.Selector {
	t.Helper()
	sel, err := projections.ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func dependent(name string, deps ...string) string {
	var refs []string
	for _, d := range deps {
		refs = append(refs, "{kind: ConfigMap, name: "+d+"}")
	}
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: ns, dependsOn: [%s]}\n", name, strings.Join(refs, ", "))
}

func docs(ds ...string) string { return strings.Join(ds, "---\n") }

// TestDependsOnCycles applies dependsOn graphs, some closing a cycle within
// the request and some through objects already stored.
func TestDependsOnCycles(t *testing.T) {
	tests := []struct {
		name      string
		stored    string
		apply     string
		wantErr   error
		wantCycle string
	}{
		{
			name:      "two objects in one batch",
			apply:     docs(dependent("a", "b"), dependent("b", "a")),
			wantErr:   gate.ErrInvalid,
			wantCycle: "ConfigMap/ns/a → ConfigMap/ns/b → ConfigMap/ns/a",
		},
		{
			name:      "three objects in one batch",
			apply:     docs(dependent("c", "a"), dependent("a", "b"), dependent("b", "c")),
			wantErr:   gate.ErrInvalid,
			wantCycle: "ConfigMap/ns/a → ConfigMap/ns/b → ConfigMap/ns/c → ConfigMap/ns/a",
		},
		{
			name:      "closed through a stored object",
			stored:    docs(dependent("a"), dependent("b", "a")),
			apply:     dependent("a", "b"),
			wantErr:   gate.ErrInvalid,
			wantCycle: "ConfigMap/ns/a → ConfigMap/ns/b → ConfigMap/ns/a",
		},
		{
			name:      "closed through a chain of stored objects",
			stored:    docs(dependent("a"), dependent("b", "a"), dependent("c", "b")),
			apply:     dependent("a", "c"),
			wantErr:   gate.ErrInvalid,
			wantCycle: "ConfigMap/ns/a → ConfigMap/ns/c → ConfigMap/ns/b → ConfigMap/ns/a",
		},
		{
			name:      "batch and stored state together",
			stored:    docs(dependent("a"), dependent("b", "a")),
			apply:     docs(dependent("a", "c"), dependent("c", "b")),
			wantErr:   gate.ErrInvalid,
			wantCycle: "ConfigMap/ns/a → ConfigMap/ns/c → ConfigMap/ns/b → ConfigMap/ns/a",
		},
		{
			name:   "the batch replaces the stored edge",
			stored: docs(dependent("a"), dependent("b", "a")),
			apply:  docs(dependent("b"), dependent("a", "b")),
		},
		{
			name:  "a diamond is no cycle",
			apply: docs(dependent("d"), dependent("b", "d"), dependent("c", "d"), dependent("a", "b", "c")),
		},
		{
			name:  "a dependency that does not exist yet",
			apply: dependent("a", "later"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.stored != "" {
				e.apply(t, "user/alice", tt.stored, "")
			}
			before := e.count(t)
			_, err := e.gate.Apply(context.Background(), gate.Admin("user/alice"), decode(t, tt.apply), "")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil {
				return
			}
			if !strings.Contains(err.Error(), tt.wantCycle) {
				t.Errorf("error %q does not name the cycle %q", err, tt.wantCycle)
			}
			if after := e.count(t); after != before {
				t.Errorf("a rejected apply wrote %d events", after-before)
			}
		})
	}
}

// appendDirect writes an Applied event for k straight to the log, as another
// gate instance would, without waiting for the projection.
func appendDirect(t *testing.T, l *events.Log, yaml string) uint64 {
	t.Helper()
	o := decode(t, yaml)[0]
	o.Metadata.Generation = 1
	o.Metadata.Uid = "written-directly"
	res, err := l.Append(context.Background(), events.Entry{
		Event:  &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: manifest.KeyOf(o), Object: o, Actor: "user/other"},
		Expect: events.AnyVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Sequence
}

// TestApplyRetriesAfterConflict writes a key behind the gate's back and at
// once applies a change to it through the gate: the apply succeeds (retrying
// if it read the key before the projection caught up) and the store ends
// with the gate's version.
func TestApplyRetriesAfterConflict(t *testing.T) {
	e := newEnv(t)
	e.apply(t, "user/alice", configMap("web", "app: web", "a: '1'"), "")
	for i := range 20 {
		direct := appendDirect(t, e.log.Log, configMap("web", "app: web", fmt.Sprintf("a: direct-%d", i)))
		want := configMap("web", "app: web", fmt.Sprintf("a: gate-%d", i))
		out := e.apply(t, "user/alice", want, "")
		if out[0].Action != gate.Configured {
			t.Fatalf("round %d: action %q, want configured", i, out[0].Action)
		}
		got := e.store.Get(webKey)
		if got.Metadata.ResourceVersion <= direct || !proto.Equal(got.Spec, decode(t, want)[0].Spec) {
			t.Fatalf("round %d: store holds %v at %d, want the gate's spec after the direct write at %d", i, got.Spec, got.Metadata.ResourceVersion, direct)
		}
	}
	t.Logf("the gate met %d conflicts in 20 rounds", e.log.conflicts.Load())
}

// TestApplyRetriesAfterConflictWithStaleProjection makes the conflict
// certain: the projection is stopped while another writer changes the key,
// so the gate reads a stale version, the log refuses its write, and the gate
// waits for the projection to catch up and writes again.
func TestApplyRetriesAfterConflictWithStaleProjection(t *testing.T) {
	e := newEnv(t)
	e.apply(t, "user/alice", configMap("web", "app: web", "a: '1'"), "")
	e.stopProjector()
	direct := appendDirect(t, e.log.Log, configMap("web", "app: web", "a: direct"))

	want := configMap("web", "app: web, by: gate", "a: gate")
	type result struct {
		out []gate.Outcome
		err error
	}
	done := make(chan result, 1)
	objs := decode(t, want)
	go func() {
		out, err := e.gate.Apply(context.Background(), gate.Admin("user/alice"), objs, "")
		done <- result{out, err}
	}()
	// The gate's first write is refused; it then waits for the projection.
	deadline := time.Now().Add(30 * time.Second)
	for e.log.conflicts.Load() == 0 {
		select {
		case r := <-done:
			t.Fatalf("apply returned before any conflict: %v, %v", r.out, r.err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no conflict after 30s")
		}
	}
	e.startProjector()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("apply did not finish 30s after the projection restarted")
	}
	if r.err != nil {
		t.Fatalf("apply: %v", r.err)
	}
	if r.out[0].Action != gate.Configured {
		t.Errorf("action %q, want configured", r.out[0].Action)
	}
	got := e.store.Get(webKey)
	if got.Metadata.ResourceVersion <= direct || !proto.Equal(got.Spec, decode(t, want)[0].Spec) || got.Metadata.Labels["by"] != "gate" {
		t.Errorf("store holds %v, want the gate's version after the direct write at %d", got, direct)
	}
	// The direct write was version 2 of the spec, the gate's version 3.
	if got.Metadata.Generation != 2 {
		t.Errorf("generation %d, want 2 (the direct write carried 1, the gate changed the spec once more)", got.Metadata.Generation)
	}
	if n := e.log.conflicts.Load(); n != 1 {
		t.Errorf("%d conflicts, want exactly 1", n)
	}
}

// TestApplyLargeBatch: an apply of more objects than one atomic batch
// holds is refused whole, whoever writes it; the largest one that fits is
// written at once.
func TestApplyLargeBatch(t *testing.T) {
	e := newEnv(t)
	docs := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString("---\n")
			}
			b.WriteString(configMap(fmt.Sprintf("cm-%04d", i), "batch: big", "i: '"+fmt.Sprint(i)+"'"))
		}
		return b.String()
	}
	_, err := e.gate.Apply(context.Background(), gate.Admin("user/alice"), decode(t, docs(events.MaxBatch+1)), "")
	if !errors.Is(err, gate.ErrTooLarge) {
		t.Fatalf("apply of %d objects: %v, want ErrTooLarge", events.MaxBatch+1, err)
	}
	if got := e.count(t); got != 0 {
		t.Fatalf("a refused apply wrote %d events", got)
	}
	out := e.apply(t, "user/alice", docs(events.MaxBatch), "")
	if len(out) != events.MaxBatch {
		t.Fatalf("%d outcomes, want %d", len(out), events.MaxBatch)
	}
	if got := e.count(t); got != uint64(events.MaxBatch) {
		t.Errorf("the log holds %d events, want %d", got, events.MaxBatch)
	}
}

// TestConcurrentAppliesToOneKey races several different changes to one key:
// each apply either succeeds or, having run out of retries, reports a
// conflict; the generation counts exactly the successful spec changes.
func TestConcurrentAppliesToOneKey(t *testing.T) {
	e := newEnv(t)
	e.apply(t, "user/alice", configMap("web", "app: web", "writer: initial"), "")
	const writers = 8
	errs := make([]error, writers)
	outs := make([][]gate.Outcome, writers)
	var wg sync.WaitGroup
	for i := range writers {
		objs := decode(t, configMap("web", "app: web", fmt.Sprintf("writer: w%d", i)))
		wg.Go(func() {
			outs[i], errs[i] = e.gate.Apply(context.Background(), gate.Admin(fmt.Sprintf("user/w%d", i)), objs, "")
		})
	}
	wg.Wait()
	succeeded := 0
	for i, err := range errs {
		switch {
		case err == nil:
			succeeded++
			if outs[i][0].Action != gate.Configured {
				t.Errorf("writer %d: action %q, want configured", i, outs[i][0].Action)
			}
		case errors.Is(err, events.ErrConflict):
			t.Logf("writer %d gave up: %v", i, err)
		default:
			t.Errorf("writer %d: %v, want success or ErrConflict", i, err)
		}
	}
	if succeeded == 0 {
		t.Fatal("no writer succeeded")
	}
	got := e.store.Get(webKey)
	if want := int64(1 + succeeded); got.Metadata.Generation != want {
		t.Errorf("generation %d, want %d (1 + %d successful changes)", got.Metadata.Generation, want, succeeded)
	}
	hist, err := e.log.History(context.Background(), webKey.Proto())
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1+succeeded {
		t.Errorf("history has %d events, want %d", len(hist), 1+succeeded)
	}
	// Each stored generation is one more than the last: no write was based
	// on a stale read.
	for i, ev := range hist {
		if g := ev.Object.GetMetadata().GetGeneration(); g != int64(i+1) {
			t.Errorf("event %d (%s) carries generation %d, want %d", i, ev.Actor, g, i+1)
		}
	}
	// The last event is the state the store holds.
	last := hist[len(hist)-1]
	if !proto.Equal(last.Object.Spec, got.Spec) || got.Metadata.ResourceVersion != last.Sequence {
		t.Errorf("store holds %v at %d, want the last event's spec %v at %d", got.Spec, got.Metadata.ResourceVersion, last.Object.Spec, last.Sequence)
	}
}
