package apply

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// applyObject is an Apply named ns/name with spec.
func applyObject(tb testing.TB, ns, name string, spec map[string]any) *schemas.Object {
	tb.Helper()
	s, err := structpb.NewStruct(spec)
	if err != nil {
		tb.Fatal(err)
	}
	return &schemas.Object{Kind: Kind, Metadata: &schemas.ObjectMeta{Namespace: ns, Name: name}, Spec: s}
}

func configMap(ns, name string) map[string]any {
	md := map[string]any{"name": name}
	if ns != "" {
		md["namespace"] = ns
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": map[string]any{"mode": "fast"}}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name      string
		applyName string
		spec      map[string]any
		wantField string // "" = valid
	}{
		{name: "valid", spec: map[string]any{"cluster": "c", "manifest": configMap("shop", "x")}},
		{name: "no cluster", spec: map[string]any{"manifest": configMap("shop", "x")}, wantField: "spec.cluster"},
		{name: "cluster not a string", spec: map[string]any{"cluster": 3, "manifest": configMap("shop", "x")}, wantField: "spec.cluster"},
		{name: "no manifest", spec: map[string]any{"cluster": "c"}, wantField: "spec.manifest"},
		{name: "manifest is a string", spec: map[string]any{"cluster": "c", "manifest": "kind: ConfigMap"}, wantField: "spec.manifest"},
		{name: "no apiVersion", spec: map[string]any{"cluster": "c", "manifest": map[string]any{
			"kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}, wantField: "spec.manifest.apiVersion"},
		{name: "bad apiVersion", spec: map[string]any{"cluster": "c", "manifest": map[string]any{
			"apiVersion": "a/b/c", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}, wantField: "spec.manifest.apiVersion"},
		{name: "no kind", spec: map[string]any{"cluster": "c", "manifest": map[string]any{
			"apiVersion": "v1", "metadata": map[string]any{"name": "x"}}}, wantField: "spec.manifest.kind"},
		{name: "no metadata", spec: map[string]any{"cluster": "c", "manifest": map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap"}}, wantField: "spec.manifest.metadata"},
		{name: "generateName", spec: map[string]any{"cluster": "c", "manifest": map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"generateName": "x-"}}}, wantField: "spec.manifest.metadata.name"},
		{name: "label not a string", spec: map[string]any{"cluster": "c", "manifest": map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x", "labels": map[string]any{"n": 1}}}},
			wantField: "spec.manifest.metadata.labels[n]"},
		{name: "Apply name too long for a label", applyName: "a23456789-123456789-123456789-123456789-123456789-123456789-1234",
			spec: map[string]any{"cluster": "c", "manifest": configMap("shop", "x")}, wantField: "metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := tt.applyName
			if name == "" {
				name = "a"
			}
			got, err := decode(applyObject(t, "ns", name, tt.spec))
			if tt.wantField == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Fatalf("decode = %v, %v; want a FieldError on %s", got, err, tt.wantField)
			}
		})
	}
}

func TestDecodeLabelsAndCleansManifest(t *testing.T) {
	m := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "labels": map[string]any{"app": "web"},
			"uid": "0f1e", "resourceVersion": "42", "managedFields": []any{}},
		"spec": map[string]any{"replicas": 3, "ratio": 0.5},
	}
	got, err := decode(applyObject(t, "team", "web", map[string]any{"cluster": "prod", "manifest": m}))
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{"app": "web", LabelApplyNamespace: "team", LabelApplyName: "web"}
	if l := got.obj.GetLabels(); len(l) != len(wantLabels) || l["app"] != "web" || l[LabelApplyNamespace] != "team" || l[LabelApplyName] != "web" {
		t.Errorf("labels = %v; want %v", l, wantLabels)
	}
	if got.obj.GetUID() != "" || got.obj.GetResourceVersion() != "" || got.obj.GetManagedFields() != nil {
		t.Errorf("read-only metadata kept: %v", got.obj.Object["metadata"])
	}
	if r := got.obj.Object["spec"].(map[string]any)["replicas"]; r != int64(3) {
		t.Errorf("replicas = %#v; want int64(3)", r)
	}
	if r := got.obj.Object["spec"].(map[string]any)["ratio"]; r != 0.5 {
		t.Errorf("ratio = %#v; want 0.5", r)
	}
	if got.cluster != "prod" || got.gvk.Group != "apps" || got.gvk.Version != "v1" || got.gvk.Kind != "Deployment" {
		t.Errorf("cluster %q gvk %v", got.cluster, got.gvk)
	}
}

func TestObservedKey(t *testing.T) {
	tests := []struct {
		name string
		obj  map[string]any
		want projections.Key
	}{
		{"core namespaced", configMap("shop", "settings"), projections.Key{Kind: "ConfigMap", Namespace: "prod/shop", Name: "settings"}},
		{"grouped", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web", "namespace": "shop"}},
			projections.Key{Kind: "Deployment.apps", Namespace: "prod/shop", Name: "web"}},
		{"cluster-scoped", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}},
			projections.Key{Kind: "Namespace", Namespace: "prod/", Name: "shop"}},
		{"cluster-scoped grouped", map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": "view"}},
			projections.Key{Kind: "ClusterRole.rbac.authorization.k8s.io", Namespace: "prod/", Name: "view"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ObservedKey("prod", &unstructured.Unstructured{Object: tt.obj}); got != tt.want {
				t.Errorf("ObservedKey = %v; want %v", got, tt.want)
			}
		})
	}
}
