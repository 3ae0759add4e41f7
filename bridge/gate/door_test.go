package gate_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// The door appends what its principal may write and refuses the rest,
// entry by entry when pipelined and whole when atomic.
func TestDoorWritesWhatThePrincipalMay(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	out := e.apply(t, "admin", `apiVersion: v1
kind: Pod
metadata: {name: a, namespace: shop}
spec: {nodeName: n1, containers: [{name: main, image: app:v1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: shop}
spec: {nodeName: n2, containers: [{name: main, image: app:v1}]}
`, "")
	status := func(o gate.Outcome) events.Entry {
		return events.Entry{Expect: o.Object.GetMetadata().GetResourceVersion(), Event: &schemas.Event{
			Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: o.Key.Proto(), Actor: "node/n1",
			Object: &schemas.Object{Status: &schemas.Status{Phase: "Running"}},
		}}
	}
	door := gate.NewDoor(e.log, e.store)
	n1 := door.As(gate.Principal{Name: "node/n1", Role: gate.RoleNode, Self: "n1"})
	before := e.count(t)

	if _, err := n1.AppendBatch(ctx, []events.Entry{status(out[0]), status(out[1])}); !errors.Is(err, gate.ErrForbidden) {
		t.Fatalf("atomic batch with another node's pod: %v, want forbidden", err)
	}
	if n := e.count(t); n != before {
		t.Fatalf("a refused batch wrote %d events", n-before)
	}
	res, errs := n1.AppendAsync(ctx, []events.Entry{status(out[0]), status(out[1])})
	if errs[0] != nil || !errors.Is(errs[1], gate.ErrForbidden) {
		t.Fatalf("pipelined: %v, want [nil forbidden]", errs)
	}
	if res[0].Sequence == 0 {
		t.Fatal("the allowed entry has no sequence")
	}
	if n := e.count(t); n != before+1 {
		t.Fatalf("pipelined wrote %d events, want 1", n-before)
	}

	// In the log's group commit shared with other writers (AppendEach),
	// refusals stay per entry too.
	a := status(out[0])
	a.Expect = events.AnyVersion
	res, errs = n1.AppendEach(ctx, []events.Entry{a, status(out[1])})
	if errs == nil || errs[0] != nil || !errors.Is(errs[1], gate.ErrForbidden) || res[0].Sequence == 0 {
		t.Fatalf("grouped: %v %v, want [nil forbidden]", res, errs)
	}
	if n := e.count(t); n != before+2 {
		t.Fatalf("grouped wrote %d events in all, want 2", n-before)
	}

	// A reconciler's writer records its own object's status, by the
	// kind its actor names.
	rec := door.Reconcilers()
	own := status(out[1])
	own.Expect = e.store.Get(projections.Key{Kind: "Pod", Namespace: "shop", Name: "b"}).GetMetadata().GetResourceVersion()
	own.Event.Actor = "reconciler/Pod@i1"
	if _, err := rec.Append(ctx, own); err != nil {
		t.Fatalf("a reconciler's own status: %v", err)
	}
	own.Event.Actor = "reconciler/ConfigMap@i1"
	if _, err := rec.Append(ctx, own); !errors.Is(err, gate.ErrForbidden) {
		t.Fatalf("a ConfigMap reconciler writing a Pod's status: %v, want forbidden", err)
	}
}

// BenchmarkAuthorizeEvent is the door's cost per entry beside its append:
// a node's status report on its pod, and a reconciler's status of its
// object.
func BenchmarkAuthorizeEvent(b *testing.B) {
	pod := &schemas.Object{ApiVersion: "v1", Kind: "Pod", Metadata: &schemas.ObjectMeta{Name: "web", Namespace: "shop", ResourceVersion: 7}}
	spec, err := structpb.NewStruct(map[string]any{"nodeName": "n1"})
	if err != nil {
		b.Fatal(err)
	}
	pod.Spec = spec
	ev := &schemas.Event{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: projections.ObjectKey(pod).Proto(), Actor: "reconciler/Pod@i1",
		Object: &schemas.Object{Status: &schemas.Status{Phase: "Running"}}}
	node := gate.Principal{Name: "node/n1", Role: gate.RoleNode, Self: "n1"}
	rec := gate.Principal{Name: ev.Actor, Role: gate.RoleController, Owner: "Pod/shop/web"}
	for name, p := range map[string]gate.Principal{"node": node, "reconciler": rec} {
		b.Run(name, func(b *testing.B) {
			// CPU time, the steady figure on a shared machine: waiting for
			// a core costs none.
			start := cpuTime()
			for range b.N {
				if err := gate.AuthorizeEvent(p, ev, pod); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
