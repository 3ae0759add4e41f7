package kubeapi

import (
	"encoding/json"
	"testing"

	"github.com/jetplane/jetplane/schemas/crd"
)

func TestStatusReadsBackAsWritten(t *testing.T) {
	in := map[string]any{
		"phase": "Running", "observedGeneration": float64(4), "readyReplicas": float64(2),
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Up",
			"lastTransitionTime": "2026-01-02T15:04:05Z", "lastUpdateTime": "2026-01-02T15:04:05Z"}},
	}
	st, err := statusOf(in)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetPhase() != "Running" || st.GetObservedGeneration() != 4 || len(st.GetConditions()) != 1 ||
		st.GetConditions()[0].GetType() != "Ready" || st.GetConditions()[0].GetLastTransitionTime() == nil {
		t.Fatalf("jetplane's fields: %v", st)
	}
	want, _ := json.Marshal(in)
	got, _ := json.Marshal(kubeStatus(st))
	if string(got) != string(want) {
		t.Errorf("read back:\n%s\nwant\n%s", got, want)
	}
	if st, err := statusOf(nil); err != nil || st.GetDetails() != nil {
		t.Errorf("no status: %v, %v", st, err)
	}
}

func TestScaleOf(t *testing.T) {
	deploy := map[string]any{
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "7", "creationTimestamp": "2026-01-02T15:04:05Z"},
		"spec":     map[string]any{"replicas": float64(3), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}},
		"status":   map[string]any{"replicas": float64(2)},
	}
	sc, err := scaleOf(deploy, builtinScale)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 3 || sc.Status.Replicas != 2 || sc.Status.Selector != "app=web" || sc.Name != "web" || sc.ResourceVersion != "7" || sc.CreationTimestamp.IsZero() {
		t.Errorf("deployment's scale: %+v", sc)
	}
	delete(deploy["spec"].(map[string]any), "replicas")
	if sc, _ := scaleOf(deploy, builtinScale); sc.Spec.Replicas != 1 {
		t.Errorf("no spec.replicas: %d, want Kubernetes' default 1", sc.Spec.Replicas)
	}
	widget := map[string]any{
		"metadata": map[string]any{"name": "w"},
		"spec":     map[string]any{"size": map[string]any{"n": float64(5)}},
		"status":   map[string]any{"n": float64(4), "sel": "app=w"},
	}
	sc, _ = scaleOf(widget, &crd.Scale{SpecReplicasPath: ".spec.size.n", StatusReplicasPath: ".status.n", LabelSelectorPath: ".status.sel"})
	if sc.Spec.Replicas != 5 || sc.Status.Replicas != 4 || sc.Status.Selector != "app=w" {
		t.Errorf("widget's scale: %+v", sc)
	}
	set(widget, ".spec.size.n", int64(6))
	if v, _ := lookup(widget, ".spec.size.n"); v != int64(6) {
		t.Errorf("set: %v", v)
	}
}

func TestManagedFieldsAnnotation(t *testing.T) {
	mf := []any{map[string]any{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
		"fieldsV1": map[string]any{"f:data": map[string]any{"f:a": map[string]any{}}}}}
	md := map[string]any{"name": "web", "managedFields": mf}
	if err := storeManagedFields(md); err != nil {
		t.Fatal(err)
	}
	if _, ok := md["managedFields"]; ok {
		t.Fatal("managedFields left in metadata")
	}
	if _, ok := md["annotations"].(map[string]any)[AnnotationManagedFields]; !ok {
		t.Fatal("no annotation")
	}
	showManagedFields(md)
	if _, ok := md["annotations"]; ok {
		t.Errorf("the annotation is shown: %v", md["annotations"])
	}
	got, _ := json.Marshal(md["managedFields"])
	want, _ := json.Marshal(mf)
	if string(got) != string(want) {
		t.Errorf("managedFields: %s, want %s", got, want)
	}
	bad := map[string]any{"managedFields": []any{map[string]any{"manager": "x", "fieldsType": "FieldsV9"}}}
	if err := storeManagedFields(bad); err == nil {
		t.Error("invalid managedFields were stored")
	}
}
