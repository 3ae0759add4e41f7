package workload

import (
	"context"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

func TestFenceposts(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	n := func(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }
	for _, tc := range []struct {
		name                  string
		surge, unavail        *intstr.IntOrString
		desired               int32
		wantSurge, wantUnavil int32
	}{
		{name: "defaults of 4", desired: 4, wantSurge: 1, wantUnavil: 1},
		{name: "defaults of 10: surge rounds up, unavailable down", desired: 10, wantSurge: 3, wantUnavil: 2},
		{name: "both zero moves one at a time", surge: n(0), unavail: n(0), desired: 3, wantSurge: 0, wantUnavil: 1},
		{name: "percent of 1", surge: pct("50%"), unavail: pct("50%"), desired: 1, wantSurge: 1, wantUnavil: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, u, err := Fenceposts(tc.surge, tc.unavail, tc.desired)
			if err != nil || s != tc.wantSurge || u != tc.wantUnavil {
				t.Fatalf("Fenceposts = %d, %d, %v; want %d, %d", s, u, err, tc.wantSurge, tc.wantUnavil)
			}
		})
	}
}

// TestRollingUpdateSteps walks a rollout of 4 replicas (surge 1,
// unavailable 1) step by step, with every pod available as soon as it
// exists, and checks each step stays within the bounds.
func TestRollingUpdateSteps(t *testing.T) {
	const desired, surge, unavail = 4, 1, 1
	newRS := &rsView{}
	oldRS := &rsView{replicas: 4}
	oldRS.status.AvailableReplicas = 4
	for step := 0; step < 10; step++ {
		newRS.before, oldRS.before = newRS.replicas, oldRS.replicas
		rollingUpdate(desired, surge, unavail, newRS, []*rsView{oldRS})
		if total := newRS.replicas + oldRS.replicas; total > desired+surge {
			t.Fatalf("step %d: %d pods, more than desired+surge", step, total)
		}
		// Pods come and go; the available ones are those that remain.
		avail := min(newRS.before, newRS.replicas) + min(oldRS.before, oldRS.replicas)
		if avail < desired-unavail {
			t.Fatalf("step %d: %d available, fewer than desired-unavailable", step, avail)
		}
		newRS.status.AvailableReplicas, oldRS.status.AvailableReplicas = newRS.replicas, oldRS.replicas
		if newRS.replicas == desired && oldRS.replicas == 0 {
			return
		}
	}
	t.Fatalf("no progress: new %d, old %d", newRS.replicas, oldRS.replicas)
}

// A Deployment the bridge observed in a Kubernetes cluster is that
// cluster's to run: nothing is written for it, and its status is kept.
func TestObservedWorkloadsAreLeftToTheirCluster(t *testing.T) {
	r, err := New(Config{State: noState{}, Writer: noWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := structpb.NewStruct(map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "spec": map[string]any{"replicas": 3}})
	obj := &schemas.Object{ApiVersion: "apps/v1", Kind: "Deployment", Metadata: &schemas.ObjectMeta{Name: "web", Namespace: "prod/shop"}, Spec: spec}
	res, err := r.Reconcile(context.Background(), obj)
	if err != nil || !res.KeepStatus {
		t.Fatalf("Reconcile = %+v, %v; want nothing recorded", res, err)
	}
	if _, err := r.Finalize(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

type noState struct{}

func (noState) Get(projections.Key) *schemas.Object                { return nil }
func (noState) List(projections.Query) ([]*schemas.Object, uint64) { return nil, 0 }

type noWriter struct{ t *testing.T }

func (w noWriter) Apply(context.Context, *schemas.Object, string, []*schemas.Object) error {
	w.t.Error("wrote children for an observed object")
	return nil
}
func (w noWriter) Delete(context.Context, *schemas.Object, string, projections.Key) error {
	w.t.Error("deleted for an observed object")
	return nil
}
func (w noWriter) Expire(context.Context, *schemas.Object, string) error {
	w.t.Error("expired an observed object")
	return nil
}
func (w noWriter) DeleteWith(context.Context, *schemas.Object, string, projections.Key, metav1.DeletionPropagation) error {
	w.t.Error("deleted for an observed object")
	return nil
}
func (w noWriter) Release(context.Context, *schemas.Object, string, projections.Key) error {
	w.t.Error("released for an observed object")
	return nil
}
