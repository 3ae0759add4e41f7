package security

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Every write the gate does not compose itself passes its door: forged
// status changes, evictions, finalizations and other events are refused
// for whoever is not allowed them, with the version they name current (so
// the log's own concurrency check would have let them in), and nothing is
// written. A rightful eviction then passes.
func TestDoorRefusesForgedWrites(t *testing.T) {
	a, c := boundPods(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	door := a.Door()
	cur := func(name string) *schemas.Object { return a.Store().Get(podKey(name)) }
	failed := func(name, actor string) events.Entry {
		return events.Entry{Expect: cur(name).GetMetadata().GetResourceVersion(), Event: &schemas.Event{
			Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: podKey(name).Proto(), Actor: actor, Time: timestamppb.Now(),
			Object: &schemas.Object{Status: &schemas.Status{Phase: "Failed", Message: "forged"}},
		}}
	}
	evict := func(name, actor string) events.Entry {
		return events.Entry{Expect: cur(name).GetMetadata().GetResourceVersion(), Event: &schemas.Event{
			Type: schemas.EventType_EVENT_TYPE_DELETE_REQUESTED, Key: podKey(name).Proto(), Actor: actor, Time: timestamppb.Now(),
		}}
	}
	typed := func(e events.Entry, typ schemas.EventType) events.Entry {
		e.Event = proto.CloneOf(e.Event)
		e.Event.Type, e.Event.Object = typ, nil
		return e
	}
	n1 := gate.Principal{Name: "node/n1", Role: gate.RoleNode, Self: "n1"}
	lostN1 := gate.Controller("reconciler/Node", a.Store().Get(projections.Key{Kind: "Node", Name: "n1"}))
	lostN1.Owner = gate.OwnerRef(projections.Key{Kind: "Node", Name: "n1"})
	withSpec := failed("web-n1", "node/n1")
	withSpec.Event.Object.Spec, _ = structpb.NewStruct(map[string]any{"nodeName": "n2"})
	cm := failed("web-n1", "reconciler/Pod@x")
	cm.Event.Key = projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web"}.Proto()
	cm.Expect = a.Store().Get(projections.KeyOf(cm.Event.Key)).GetMetadata().GetResourceVersion()

	before := fingerprintOf(t, a)
	for _, tc := range []struct {
		name  string
		w     *gate.Writer
		entry events.Entry
	}{
		{"node fails another node's pod", door.As(n1), failed("web-n2", "node/n1")},
		{"node deletes its own pod", door.As(n1), evict("web-n1", "node/n1")},
		{"node finalizes its own pod", door.As(n1), typed(evict("web-n1", "node/n1"), schemas.EventType_EVENT_TYPE_FINALIZED)},
		{"node rebinds its own pod", door.As(n1), typed(evict("web-n1", "node/n1"), schemas.EventType_EVENT_TYPE_BOUND)},
		{"node's status change sets the spec", door.As(n1), withSpec},
		{"node applies through the door", door.As(n1), typed(failed("web-n1", "node/n1"), schemas.EventType_EVENT_TYPE_APPLIED)},
		{"lost n1 fails n2's pod", door.As(lostN1), failed("web-n2", "reconciler/Node")},
		{"lost n1 evicts n2's pod", door.As(lostN1), evict("web-n2", "reconciler/Node")},
		{"scheduler fails a pod", door.As(gate.Principal{Name: "scheduler", Role: gate.RoleScheduler}), failed("web-n1", "scheduler")},
		{"a reconciler writes another kind's status", door.Reconcilers(), cm},
		{"a reconciler deletes its pod", door.Reconcilers(), evict("web-n1", "reconciler/Pod@x")},
		{"an actor that names no kind", door.Reconcilers(), failed("web-n1", "node/n1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.w.Append(ctx, tc.entry)
			if !errors.Is(err, gate.ErrForbidden) && !errors.Is(err, gate.ErrAdoption) {
				t.Fatalf("Append: %v, want refused", err)
			}
			_, errs := tc.w.AppendAsync(ctx, []events.Entry{tc.entry})
			if !errors.Is(errs[0], gate.ErrForbidden) && !errors.Is(errs[0], gate.ErrAdoption) {
				t.Fatalf("AppendAsync: %v, want refused", errs[0])
			}
			if _, err := tc.w.AppendBatch(ctx, []events.Entry{tc.entry}); err == nil {
				t.Fatal("AppendBatch: written")
			}
		})
	}
	unchanged(t, a, before)

	// The rightful eviction of n2's pod by n2's controller passes.
	lostN2 := gate.Principal{Name: "reconciler/Node", Role: gate.RoleController, Owner: gate.OwnerRef(projections.Key{Kind: "Node", Name: "n2"})}
	// (The pod reconciler may write between two writes: each is made
	// against the version just read, as the Node reconciler makes them.)
	for _, write := range []func() events.Entry{
		func() events.Entry { return failed("web-n2", "reconciler/Node") },
		func() events.Entry { return evict("web-n2", "reconciler/Node") },
	} {
		deadline := time.Now().Add(wait)
		for {
			fingerprintOf(t, a)
			_, err := door.As(lostN2).Append(ctx, write())
			if err == nil {
				break
			}
			if !errors.Is(err, events.ErrConflict) || time.Now().After(deadline) {
				t.Fatalf("n2's controller evicts its pod: %v", err)
			}
		}
	}
	fingerprintOf(t, a)
	if o := cur("web-n2"); o != nil && o.GetStatus().GetGoal() != projections.GoalDeleted {
		t.Fatalf("n2's pod after its eviction: %v", o.GetStatus())
	}
	serving(t, c)
}
