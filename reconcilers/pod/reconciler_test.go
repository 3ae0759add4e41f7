package pod

import (
	"context"
	"testing"
	"time"

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

// createFunc is a Work that also creates.
type createFunc struct {
	workFunc
	create func(node, ns, name string, data []byte)
}

func (c createFunc) CreateWork(_ context.Context, node, ns, name string, data []byte) (bool, error) {
	c.create(node, ns, name, data)
	return true, nil
}

func boundPod(t *testing.T, generation int64, st *schemas.Status) *schemas.Object {
	t.Helper()
	spec, err := structpb.NewStruct(map[string]any{"nodeName": "n1", "containers": []any{map[string]any{"name": "m", "image": "hello:v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	return &schemas.Object{ApiVersion: "v1", Kind: "Pod", Metadata: &schemas.ObjectMeta{Name: "p", Namespace: "ns", Uid: "u1", Generation: generation}, Spec: spec, Status: st}
}

// agentStatus is a status as the agent reports entering state, for
// generation.
func agentStatus(t *testing.T, state string, phase string, generation int64) *schemas.Status {
	t.Helper()
	d, err := structpb.NewStruct(map[string]any{"phase": phase})
	if err != nil {
		t.Fatal(err)
	}
	return &schemas.Status{Goal: projections.GoalExists, Phase: phase, ObservedGeneration: generation, Details: d,
		Conditions: []*schemas.Condition{{Type: ConditionReady, Status: "False", Reason: state}}}
}

// A pod's status reports run it, four for a start: once its agent runs
// the pod's generation, a run writes nothing to the node; before that, for
// a new generation, and once it ended for good (the item says Finished),
// it writes the item.
func TestReportsOfAHandedOverPodWriteNoWork(t *testing.T) {
	node := &schemas.Object{Kind: "Node", Metadata: &schemas.ObjectMeta{Name: "n1"}, Status: &schemas.Status{Phase: "Ready"}}
	var puts []string
	r, err := NewReconciler(Config{
		State: stateFunc(func(k projections.Key) *schemas.Object {
			if k.Kind == "Node" {
				return node
			}
			return nil
		}),
		Work: workFunc(func(_, _, _ string, data []byte) { puts = append(puts, string(data)) }),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pod  *schemas.Object
		put  bool
	}{
		{"bound, no report yet", boundPod(t, 1, &schemas.Status{Goal: projections.GoalExists}), true},
		{"Registered", boundPod(t, 1, agentStatus(t, "Registered", "Pending", 1)), false},
		{"Running", boundPod(t, 1, agentStatus(t, "Running", "Running", 1)), false},
		{"a new generation", boundPod(t, 2, agentStatus(t, "Running", "Running", 1)), true},
		{"Completed for good", boundPod(t, 1, agentStatus(t, "Completed", "Succeeded", 1)), true},
		{"Terminated", boundPod(t, 1, agentStatus(t, "Terminated", "Failed", 1)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			puts = nil
			res, err := r.Reconcile(context.Background(), tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(puts) > 0; got != tc.put || !res.KeepStatus {
				t.Fatalf("wrote the work item: %v, want %v (result %+v)", got, tc.put, res)
			}
		})
	}
}

// Bound creates the work item of a pod just bound, at once and only by
// creating; a pod that cannot be handed over yet (its node unknown) is
// left to its run.
func TestBoundHandsThePodOver(t *testing.T) {
	var node *schemas.Object
	created := make(chan string, 2)
	r, err := NewReconciler(Config{
		State: stateFunc(func(k projections.Key) *schemas.Object {
			if k.Kind == "Node" && node != nil {
				return node
			}
			return nil
		}),
		Work: createFunc{
			workFunc: workFunc(func(string, string, string, []byte) { t.Error("Bound put a work item; it may only create") }),
			create:   func(n, ns, name string, _ []byte) { created <- n + "/" + ns + "/" + name },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r.Bound(boundPod(t, 1, nil))
	r.Bound(boundPod(t, 1, nil)) // no node yet: nothing
	r.inflight.Wait()
	if len(created) != 0 {
		t.Fatalf("handed over %s to an unknown node", <-created)
	}
	node = &schemas.Object{Kind: "Node", Metadata: &schemas.ObjectMeta{Name: "n1"}, Status: &schemas.Status{Phase: "Ready"}}
	r.Bound(boundPod(t, 1, nil))
	select {
	case got := <-created:
		if got != "n1/ns/p" {
			t.Fatalf("created %s, want n1/ns/p", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bound pod was not handed over")
	}
}
