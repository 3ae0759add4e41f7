package helmrelease

import (
	"context"
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/schemas"
)

func TestRevisionRecordRoundTrip(t *testing.T) {
	rec := revisionRecord{Revision: 7, Inputs: "abc", Chart: "1.2.3", Hooks: []string{"t: Pod/a/b (test)"}, Children: []string{"Secret/shop/a", "ConfigMap/shop/b"}}
	got := recordedRevision(&schemas.Object{Status: &schemas.Status{Details: rec.details()}})
	if !reflect.DeepEqual(got, rec) {
		t.Fatalf("got %+v, want %+v", got, rec)
	}
	if got := recordedRevision(&schemas.Object{}); got.Revision != 0 || got.Inputs != "" || len(got.Children) != 0 {
		t.Fatal("no status: no record")
	}
}

func TestKeptAndLookup(t *testing.T) {
	spec := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	secret := &schemas.Object{ApiVersion: "v1", Kind: "Secret",
		Metadata: &schemas.ObjectMeta{Name: "auth", Namespace: "shop", Annotations: map[string]string{AnnotationResourcePolicy: "keep", gatePrefix + "owner": "x"}},
		Spec:     spec(map[string]any{"data": map[string]any{"password": "cHc="}, "type": "Opaque"})}
	apply := &schemas.Object{ApiVersion: "v1", Kind: "Apply", Metadata: &schemas.ObjectMeta{Name: "a", Namespace: "apps"},
		Spec: spec(map[string]any{"cluster": "prod", "manifest": map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "cm", "namespace": "shop"}, "data": map[string]any{"k": "v"}}})}
	if !kept(secret) || kept(apply) || kept(&schemas.Object{Kind: "Apply"}) {
		t.Fatal("kept")
	}
	l := lookupObjects{objs: []map[string]any{kubeManifest(secret), kubeManifest(apply)}}
	c, namespaced, err := l.GetClientFor("v1", "Secret")
	if err != nil || !namespaced {
		t.Fatal(namespaced, err)
	}
	u, err := c.Namespace("shop").Get(context.Background(), "auth", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u.Object["data"].(map[string]any)["password"] != "cHc=" || u.GetAnnotations()[gatePrefix+"owner"] != "" {
		t.Fatalf("looked up: %v", u.Object)
	}
	if _, err := c.Namespace("other").Get(context.Background(), "auth", metav1.GetOptions{}); err == nil {
		t.Fatal("found in another namespace")
	}
	c, _, _ = l.GetClientFor("v1", "ConfigMap")
	list, err := c.Namespace("shop").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "cm" {
		t.Fatalf("list: %v %v", list, err)
	}
}
