package helmrelease

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

func TestHooksOfOrdersAsHelm(t *testing.T) {
	obj := func(name, events, weight, policy string) render.Object {
		ann := map[string]string{AnnotationHook: events}
		if weight != "" {
			ann[AnnotationHookWeight] = weight
		}
		if policy != "" {
			ann[AnnotationDeletePolicy] = policy
		}
		return render.Object{Template: "c/templates/h.yaml", Line: 1, Object: &schemas.Object{ApiVersion: "v1", Kind: "ConfigMap",
			Metadata: &schemas.ObjectMeta{Name: name, Namespace: "ns", Annotations: ann}}}
	}
	res := &render.Result{Hooks: []render.Object{
		obj("c", "pre-install", "5", ""),
		obj("b", "pre-install,post-upgrade", "-1", "hook-succeeded, hook-failed"),
		obj("a", " pre-install", "5", ""),
		obj("t", "test-success", "", ""),
		obj("old", "crd-install", "", ""),
	}}
	h := hooksOf(res)
	var names []string
	for _, x := range h.byEvent[PreInstall] {
		names = append(names, x.key.Name)
	}
	if want := []string{"b", "a", "c"}; !slices.Equal(names, want) {
		t.Fatalf("pre-install order %v, want %v (weight, then name)", names, want)
	}
	if got := h.byEvent[PreInstall][0].policies; !slices.Equal(got, []string{HookSucceeded, HookFailed}) {
		t.Fatalf("policies %v", got)
	}
	if got := h.byEvent[PreInstall][1].policies; !slices.Equal(got, []string{BeforeHookCreation}) {
		t.Fatalf("default policy %v, want before-hook-creation", got)
	}
	if len(h.byEvent[PostUpgrade]) != 1 || len(h.byEvent[HookTest]) != 1 {
		t.Fatalf("events: %v", h.byEvent)
	}
	if want := []string{"c/templates/h.yaml:1: ConfigMap/ns/old (crd-install)"}; !slices.Equal(h.unsupported, want) {
		t.Fatalf("unsupported %v, want %v", h.unsupported, want)
	}
}

func TestRevisionRecordStages(t *testing.T) {
	rec := revisionRecord{Revision: 3, Inputs: "x", Event: "upgrade", Stage: PreUpgrade, Hook: 2, Step: stepWait, Tested: "t1", TestPhase: "Succeeded",
		Tests: []string{"Pod/ns/a: Succeeded"}, TestStart: "s", TestFinish: "f"}
	got := recordedRevision(&schemas.Object{Status: &schemas.Status{Details: rec.details()}})
	if got.Stage != PreUpgrade || got.Hook != 2 || got.Step != stepWait || got.Event != "upgrade" || got.Tested != "t1" || len(got.Tests) != 1 ||
		got.TestStart != "s" || got.TestFinish != "f" || got.TestPhase != "Succeeded" {
		t.Fatalf("got %+v", got)
	}
}

// fakeStore is current state for runHooks: what the fake writer wrote.
type fakeStore map[projections.Key]*schemas.Object

func (f fakeStore) Get(k projections.Key) *schemas.Object              { return f[k] }
func (f fakeStore) List(projections.Query) ([]*schemas.Object, uint64) { return nil, 0 }

type fakeWriter struct{ st fakeStore }

func (w fakeWriter) Apply(_ context.Context, _ *schemas.Object, _ string, objs []*schemas.Object) (int, error) {
	for _, o := range objs {
		w.st[projections.ObjectKey(o)] = o
	}
	return len(objs), nil
}

func (w fakeWriter) Delete(_ context.Context, _ *schemas.Object, _ string, k projections.Key) error {
	delete(w.st, k)
	return nil
}

// TestHookTimesOut: a hook Job that does not finish within HookTimeout
// fails, as helm's --timeout fails it; with hook-failed it is deleted.
func TestHookTimesOut(t *testing.T) {
	st := fakeStore{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r, err := New(Config{State: st, Writer: fakeWriter{st}, Charts: chartsFunc(nil), History: func(context.Context, projections.Key) ([]*schemas.Event, error) { return nil, nil },
		HookTimeout: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	job := map[string]any{"apiVersion": "batch/v1", "kind": "Job", "metadata": map[string]any{"name": "migrate", "namespace": "shop",
		"annotations": map[string]any{AnnotationHook: PreInstall, AnnotationDeletePolicy: HookFailed}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
			"containers": []any{map[string]any{"name": "m", "image": "hello:v1"}}}}}}
	h := hook{template: "c/templates/job.yaml:1", key: projections.Key{Kind: "Job.batch", Namespace: "shop", Name: "migrate"}, manifest: job,
		events: []string{PreInstall}, policies: []string{HookFailed}}
	release := &schemas.Object{ApiVersion: "v1", Kind: Kind, Metadata: &schemas.ObjectMeta{Name: "web", Namespace: "apps"}}
	rec := revisionRecord{Stage: PreInstall}
	spec := &Spec{}
	done, err := r.runHooks(t.Context(), release, spec, PreInstall, []hook{h}, &rec)
	if done || err != nil || rec.Step != stepWait || len(st) != 1 {
		t.Fatalf("created: done %v, err %v, step %q, %d objects", done, err, rec.Step, len(st))
	}
	now = now.Add(30 * time.Second)
	if done, err := r.runHooks(t.Context(), release, spec, PreInstall, []hook{h}, &rec); done || err != nil {
		t.Fatalf("within the timeout: done %v, err %v", done, err)
	}
	now = now.Add(time.Minute)
	if _, err := r.runHooks(t.Context(), release, spec, PreInstall, []hook{h}, &rec); err != nil || len(st) != 0 {
		t.Fatalf("timed out: err %v, %d objects (hook-failed deletes it first)", err, len(st))
	}
	_, err = r.runHooks(t.Context(), release, spec, PreInstall, []hook{h}, &rec)
	var hf *hookFailure
	if !errors.As(err, &hf) || !strings.Contains(err.Error(), "pre-install hook c/templates/job.yaml:1: Job.batch/shop/migrate failed: not finished after 1m0s") {
		t.Fatalf("after the timeout: %v", err)
	}
}

type chartsFunc func(ctx context.Context, name, version string) ([]byte, error)

func (f chartsFunc) Get(ctx context.Context, name, version string) ([]byte, error) {
	return f(ctx, name, version)
}
