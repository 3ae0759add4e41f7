package pod

import (
	"context"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

type stateFunc func(projections.Key) *schemas.Object

func (f stateFunc) Get(k projections.Key) *schemas.Object { return f(k) }

type workFunc func(node, ns, name string, data []byte)

func (f workFunc) PutWork(_ context.Context, node, ns, name string, data []byte) (bool, error) {
	f(node, ns, name, data)
	return true, nil
}
func (f workFunc) DeleteWork(context.Context, string, string, string) error { return nil }

func TestWithoutASchedulerAnUnboundPodWaits(t *testing.T) {
	var put int
	r, err := NewReconciler(Config{
		State: stateFunc(func(projections.Key) *schemas.Object { return nil }),
		Work:  workFunc(func(string, string, string, []byte) { put++ }),
	})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := structpb.NewStruct(map[string]any{"containers": []any{map[string]any{"name": "m", "image": "hello:v1"}}})
	res, err := r.Reconcile(context.Background(), &schemas.Object{ApiVersion: "v1", Kind: "Pod", Metadata: &schemas.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if res.Phase != PhasePending || res.Conditions[0].Reason != ReasonUnschedulable || res.KeepStatus || put != 0 {
		t.Fatalf("result %+v, %d work items", res, put)
	}
}
