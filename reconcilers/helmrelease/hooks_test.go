package helmrelease

import (
	"slices"
	"testing"

	"github.com/jetplane/jetplane/internal/render"
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
