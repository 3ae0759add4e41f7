package security

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
)

// kindWithStatus is the CustomResourceDefinition of kind (plural
// plural) in example.com, schemaless, with a status subresource.
func kindWithStatus(kind, plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[2]s.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: %[1]s, plural: %[2]s, singular: %[3]s}
  versions:
  - {name: v1, served: true, storage: true, subresources: {status: {}}, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`, kind, plural, strings.ToLower(kind))
}

const widgetObjects = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: other}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: shop}
spec: {size: 1}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w2, namespace: other}
spec: {size: 1}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g1, namespace: shop}
spec: {size: 1}
`

// The status subresource of the Kubernetes API decides as the door of
// status writes does: a controller credential, through a token signed
// with its key, records the status of its own kind's objects in every
// namespace and nothing else (no spec, no other kind's status, no create
// or delete), and its token stops working when the credential is
// revoked; a writer confined to a namespace records status there and
// nowhere else.
func TestStatusSubresourceAuthorizesAsTheDoor(t *testing.T) {
	a := start(t, app.Config{Principals: principals()})
	ctx := context.Background()
	admin := &api.Client{BaseURL: a.URL(), Token: "admin-token"}
	if _, err := admin.Apply(ctx, "crds.yaml", []byte(kindWithStatus("Widget", "widgets")+"---\n"+kindWithStatus("Gadget", "gadgets")), ""); err != nil {
		t.Fatal(err)
	}
	widgetsCreds, err := a.Creds().CreateWithKinds(auth.RoleController, "widgets", []string{widgetKind})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Creds().CreateWithKinds(auth.RoleController, "gadgets", []string{gadgetKind}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Apply(ctx, "objs.yaml", []byte(widgetObjects), ""); err != nil {
		t.Fatal(err)
	}
	token, _, err := auth.SignToken(widgetsCreds, 10*time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	client := func(token string) *dynamic.DynamicClient {
		t.Helper()
		dc, err := dynamic.NewForConfig(&rest.Config{Host: a.URL(), BearerToken: token})
		if err != nil {
			t.Fatal(err)
		}
		return dc
	}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	gadgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}
	// writeStatus writes status.note of name as token's holder.
	writeStatus := func(token string, gvr schema.GroupVersionResource, ns, name, note string) error {
		t.Helper()
		dc := client(token)
		o, err := dc.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s/%s: %v", ns, name, err)
		}
		_ = unstructured.SetNestedField(o.Object, note, "status", "note")
		_, err = dc.Resource(gvr).Namespace(ns).UpdateStatus(ctx, o, metav1.UpdateOptions{})
		return err
	}
	note := func(kind, ns, name string) string {
		t.Helper()
		o := a.Store().Get(projections.Key{Kind: kind, Namespace: ns, Name: name})
		return o.GetStatus().GetDetails().GetFields()["note"].GetStringValue()
	}

	// What the controller may do: its kind's status, in any namespace.
	for _, ns := range []string{"shop", "other"} {
		name := map[string]string{"shop": "w1", "other": "w2"}[ns]
		if err := writeStatus(token, widgets, ns, name, "by its controller"); err != nil {
			t.Fatalf("the controller's status of its own Widget in %s: %v", ns, err)
		}
		if got := note(widgetKind, ns, name); got != "by its controller" {
			t.Fatalf("status.note of %s/%s: %q", ns, name, got)
		}
	}

	before := fingerprintOf(t, a)
	dc := client(token)
	w1, err := dc.Resource(widgets).Namespace("shop").Get(ctx, "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := w1.DeepCopy()
	_ = unstructured.SetNestedField(spec.Object, int64(99), "spec", "size")
	fresh := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w9", "namespace": "shop"}, "spec": map[string]any{"size": int64(1)}}}
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"another kind's status", func() error { return writeStatus(token, gadgets, "shop", "g1", "forged") }},
		{"its kind's spec", func() error {
			_, err := dc.Resource(widgets).Namespace("shop").Update(ctx, spec, metav1.UpdateOptions{})
			return err
		}},
		{"a new object of its kind", func() error {
			_, err := dc.Resource(widgets).Namespace("shop").Create(ctx, fresh, metav1.CreateOptions{})
			return err
		}},
		{"a deletion of its kind", func() error {
			return dc.Resource(widgets).Namespace("shop").Delete(ctx, "w1", metav1.DeleteOptions{})
		}},
	} {
		t.Run("controller refused "+tc.name, func(t *testing.T) {
			if err := tc.do(); !apierrors.IsForbidden(err) {
				t.Fatalf("want 403 Forbidden, got %v", err)
			}
		})
	}
	unchanged(t, a, before)

	// A confined writer records status in its namespace only.
	if err := writeStatus("shop-writer-token", widgets, "shop", "w1", "by a writer"); err != nil {
		t.Fatalf("a writer confined to shop, status in shop: %v", err)
	}
	before = fingerprintOf(t, a)
	// Its reads outside shop are refused already; the write is tried with
	// the object read by the admin.
	w2, err := client("admin-token").Resource(widgets).Namespace("other").Get(ctx, "w2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(w2.Object, "forged", "status", "note")
	if _, err := client("shop-writer-token").Resource(widgets).Namespace("other").UpdateStatus(ctx, w2, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a writer confined to shop, status in other: want 403, got %v", err)
	}
	unchanged(t, a, before)

	// Revoked, the credential's tokens are refused.
	if err := a.Creds().Revoke("widgets"); err != nil {
		t.Fatal(err)
	}
	if code := call(t, a, token, http.MethodGet, "/apis/example.com/v1/namespaces/shop/widgets/w1", ""); code != http.StatusUnauthorized {
		t.Fatalf("a revoked controller's token: %d, want 401", code)
	}
}
