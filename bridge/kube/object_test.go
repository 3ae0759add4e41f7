package kube

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

func deployment(uid, rv string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata": map[string]any{
			"name": "web", "namespace": "shop", "uid": uid, "resourceVersion": rv,
			"creationTimestamp": "2026-11-22T10:00:00Z",
			"labels":            map[string]any{"app": "web"},
			"annotations":       map[string]any{"team": "a"},
			"managedFields":     []any{map[string]any{"manager": "kubectl"}},
		},
		"spec": map[string]any{"replicas": int64(3)},
	}}
}

func TestObservedEvent(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC)
	u := deployment("u1", "42")
	before := u.DeepCopy()
	ev, err := observedEvent("prod", u, now)
	if err != nil {
		t.Fatal(err)
	}
	want := &schemas.Event{
		Id:    "k8s/prod/u1/42/Observed",
		Type:  schemas.EventType_EVENT_TYPE_OBSERVED,
		Key:   &schemas.ObjectKey{Kind: "Deployment.apps", Namespace: "prod/shop", Name: "web"},
		Actor: "bridge/prod",
	}
	if ev.Id != want.Id || ev.Type != want.Type || !proto.Equal(ev.Key, want.Key) || ev.Actor != want.Actor || !ev.Time.AsTime().Equal(now) {
		t.Fatalf("event %v, want %v at %s", ev, want, now)
	}
	md := ev.Object.Metadata
	if md.Name != "web" || md.Namespace != "prod/shop" || md.Uid != "u1" || md.Labels["app"] != "web" ||
		md.Annotations[AnnotationCluster] != "prod" || md.Annotations[projections.AnnotationUID] != "u1" ||
		md.Annotations[projections.AnnotationResourceVersion] != "42" || len(md.Annotations) != 3 ||
		!md.CreationTime.AsTime().Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("metadata %v", md)
	}
	spec := ev.Object.Spec.AsMap()
	if spec["metadata"].(map[string]any)["managedFields"] != nil || spec["spec"].(map[string]any)["replicas"] != float64(3) ||
		spec["metadata"].(map[string]any)["annotations"].(map[string]any)["team"] != "a" {
		t.Fatalf("spec %v", spec)
	}
	if len(u.GetManagedFields()) != 1 || !equalUnstructured(u, before) {
		t.Fatal("observedEvent modified the informer's object")
	}

	// The same change seen by another bridge, or in a relist, has the same id.
	again, _ := observedEvent("prod", deployment("u1", "42"), now.Add(time.Hour))
	if again.Id != ev.Id {
		t.Fatalf("ids %s and %s of one change differ", again.Id, ev.Id)
	}
}

func equalUnstructured(a, b *unstructured.Unstructured) bool {
	ja, _ := a.MarshalJSON()
	jb, _ := b.MarshalJSON()
	return string(ja) == string(jb)
}

func TestDeletedAndGoneEvents(t *testing.T) {
	now := time.Now()
	ev := deletedEvent("prod", deployment("u1", "43"), now)
	if ev.Id != "k8s/prod/u1/43/Deleted" || ev.Type != schemas.EventType_EVENT_TYPE_FINALIZED || ev.Actor != "bridge/prod" || ev.Object.Spec != nil ||
		ev.Object.Metadata.Annotations[projections.AnnotationUID] != "u1" {
		t.Fatalf("deleted event %v", ev)
	}
	k := Key("prod", "Deployment.apps", "shop", "web")
	rec := &schemas.ObjectRecord{ApiVersion: "apps/v1", Kind: "Deployment", Metadata: &schemas.ObjectMeta{ResourceVersion: 9,
		Annotations: map[string]string{projections.AnnotationUID: "u1", projections.AnnotationResourceVersion: "42"}}}
	if ev := goneEvent("prod", k, rec, now); ev.Id != "k8s/prod/u1/42/Deleted" || !proto.Equal(ev.Key, k.Proto()) || ev.Type != schemas.EventType_EVENT_TYPE_FINALIZED {
		t.Fatalf("gone event %v", ev)
	}
	// A record no bridge wrote is named by its key and log version.
	rec.Metadata.Annotations = nil
	if ev := goneEvent("prod", k, rec, now); ev.Id != "k8s/prod/Deployment.apps/prod/shop/web/9/Deleted" {
		t.Fatalf("gone event of a foreign record: id %s", ev.Id)
	}
}

// TestDeleteHandler: a delete the watch saw and one a relist inferred
// (DeletedFinalStateUnknown) both queue a Finalized event.
func TestDeleteHandler(t *testing.T) {
	cfg := Config{Clusters: Clusters{{Name: "prod", Resources: []Resource{{Version: "v1", Resource: "configmaps"}}}}, Log: nopLog{}, State: projections.NewStore(projections.StoreOptions{})}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	c := newCluster(cfg.Clusters[0], &cfg)
	c.deleted(deployment("u1", "43"))
	c.deleted(cache.DeletedFinalStateUnknown{Key: "shop/web", Obj: deployment("u2", "50")})
	c.deleted(cache.DeletedFinalStateUnknown{Key: "shop/odd", Obj: "not an object"})
	for _, want := range []string{"k8s/prod/u1/43/Deleted", "k8s/prod/u2/50/Deleted"} {
		select {
		case it := <-c.queue:
			if it.ev.GetId() != want || it.ev.GetType() != schemas.EventType_EVENT_TYPE_FINALIZED {
				t.Fatalf("queued %v, want Finalized %s", it.ev, want)
			}
		default:
			t.Fatalf("nothing queued, want %s", want)
		}
	}
	if len(c.queue) != 0 {
		t.Fatalf("%d more events queued", len(c.queue))
	}
}

func TestAlreadyHeld(t *testing.T) {
	rec := func(uid, rv string) *schemas.ObjectRecord {
		return &schemas.ObjectRecord{Metadata: &schemas.ObjectMeta{Annotations: map[string]string{projections.AnnotationUID: uid, projections.AnnotationResourceVersion: rv}}}
	}
	tests := []struct {
		name string
		rec  *schemas.ObjectRecord
		u    *unstructured.Unstructured
		want bool
	}{
		{"nothing held", nil, deployment("u1", "42"), false},
		{"same version", rec("u1", "42"), deployment("u1", "42"), true},
		{"newer held", rec("u1", "50"), deployment("u1", "42"), true},
		{"older held", rec("u1", "41"), deployment("u1", "42"), false},
		{"other object", rec("u0", "50"), deployment("u1", "42"), false},
		{"unparsable", rec("u1", "x"), deployment("u1", "42"), false},
	}
	for _, tt := range tests {
		if got := alreadyHeld(tt.rec, tt.u); got != tt.want {
			t.Errorf("%s: alreadyHeld = %v, want %v", tt.name, got, tt.want)
		}
	}
}
