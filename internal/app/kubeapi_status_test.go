package app_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// TestStatusUpdateFromClientGo writes a defined kind's status as a
// controller does (client-go's UpdateStatus, a PUT of the whole object),
// against jetplane and kube-apiserver alike: the spec sent with it is
// ignored, the status is stored, and a stale resourceVersion is a
// conflict.
func TestStatusUpdateFromClientGo(t *testing.T) {
	jet, kube := bothServers(t)
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	for _, k := range []kubectl{jet, kube} {
		k.ok("", "create", "namespace", "shop")
		k.ok(scalableWidgets, "apply", "-f", "-")
		waitFor(t, k, "get", "widgets", "-n", "shop")
		cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w2", "namespace": "shop"}, "spec": map[string]any{"replicas": int64(1)}}}
		created, err := dc.Resource(widgets).Namespace("shop").Create(ctx, w, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		next := created.DeepCopy()
		_ = unstructured.SetNestedField(next.Object, int64(5), "spec", "replicas")
		_ = unstructured.SetNestedField(next.Object, int64(1), "status", "replicas")
		updated, err := dc.Resource(widgets).Namespace("shop").UpdateStatus(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("%s: UpdateStatus: %v", k.kubeconfig, err)
		}
		spec, _, _ := unstructured.NestedInt64(updated.Object, "spec", "replicas")
		st, _, _ := unstructured.NestedInt64(updated.Object, "status", "replicas")
		if spec != 1 || st != 1 {
			t.Errorf("%s: after UpdateStatus spec.replicas %d, status.replicas %d; want 1, 1", k.kubeconfig, spec, st)
		}
		if updated.GetResourceVersion() == created.GetResourceVersion() {
			t.Errorf("%s: UpdateStatus kept the resourceVersion", k.kubeconfig)
		}
		_ = unstructured.SetNestedField(next.Object, int64(2), "status", "replicas")
		if _, err := dc.Resource(widgets).Namespace("shop").UpdateStatus(ctx, next, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Errorf("%s: UpdateStatus with a stale resourceVersion: %v, want a conflict", k.kubeconfig, err)
		}
		got, err := dc.Resource(widgets).Namespace("shop").Get(ctx, "w2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st, _, _ := unstructured.NestedInt64(got.Object, "status", "replicas"); st != 1 {
			t.Errorf("%s: status.replicas %d after a refused write, want 1", k.kubeconfig, st)
		}
	}
}
