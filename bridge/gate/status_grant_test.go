package gate_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// A status write decided once (GrantStatus) is written without deciding
// again while the object is at the version the decision was made for,
// and returns what the projection holds; once the object has moved on,
// the write is decided again on what is stored now, so a grant never
// lets a principal write what WriteStatus would refuse.
func TestWriteGrantedStatusDecidesAgainOnceTheObjectMoves(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	pod := `apiVersion: v1
kind: Pod
metadata: {name: p, namespace: shop}
spec: {nodeName: NODE, containers: [{name: main, image: app:v1}]}
`
	bound := func(node string) string {
		out := []byte(pod)
		i := len("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: shop}\nspec: {nodeName: ")
		return string(out[:i]) + node + string(out[i+len("NODE"):])
	}
	e.apply(t, "admin", bound("n1"), "")
	k := projections.Key{Kind: "Pod", Namespace: "shop", Name: "p"}
	n1 := gate.Principal{Name: "node/n1", Role: gate.RoleNode, Self: "n1"}

	// Refused at the decision: no grant.
	if _, err := e.gate.GrantStatus(gate.Principal{Name: "node/n2", Role: gate.RoleNode, Self: "n2"}, k, e.store.Get(k)); !errors.Is(err, gate.ErrForbidden) {
		t.Fatalf("grant to another node: %v, want forbidden", err)
	}
	if _, err := e.gate.WriteGrantedStatus(ctx, nil, &schemas.Status{Phase: "Running"}, 0); !errors.Is(err, gate.ErrForbidden) {
		t.Fatalf("a write without a grant: %v, want forbidden", err)
	}
	if _, err := e.gate.WriteGrantedStatus(ctx, &gate.StatusGrant{}, &schemas.Status{Phase: "Running"}, 0); !errors.Is(err, gate.ErrForbidden) {
		t.Fatalf("a write with the zero grant: %v, want forbidden", err)
	}

	// Granted and written at the version decided on: the answer is the
	// stored object.
	cur := e.store.Get(k)
	grant, err := e.gate.GrantStatus(n1, k, cur)
	if err != nil {
		t.Fatal(err)
	}
	o, err := e.gate.WriteGrantedStatus(ctx, grant, &schemas.Status{Phase: "Running"}, cur.GetMetadata().GetResourceVersion())
	if err != nil {
		t.Fatal(err)
	}
	if stored := e.store.Get(k); !proto.Equal(o, stored) || o.GetStatus().GetPhase() != "Running" {
		t.Fatalf("answer %v, stored %v", o, stored)
	}

	// A grant for a version since written over: with that version named,
	// a conflict; without, decided again and written.
	cur = e.store.Get(k)
	grant, err = e.gate.GrantStatus(n1, k, cur)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.gate.WriteStatus(ctx, n1, k, &schemas.Status{Phase: "Running", Message: "between"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.gate.WriteGrantedStatus(ctx, grant, &schemas.Status{Phase: "Running", Message: "late"}, cur.GetMetadata().GetResourceVersion()); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("a write naming a version written over: %v, want a conflict", err)
	}
	o, err = e.gate.WriteGrantedStatus(ctx, grant, &schemas.Status{Phase: "Running", Message: "late"}, 0)
	if err != nil || o.GetStatus().GetMessage() != "late" {
		t.Fatalf("an unconditional write after another: %v, %v", o.GetStatus(), err)
	}
	if stored := e.store.Get(k); !proto.Equal(o, stored) {
		t.Fatalf("answer %v, stored %v", o, stored)
	}

	// The pod made again, bound to another node: the grant made for the
	// first one writes nothing.
	cur = e.store.Get(k)
	grant, err = e.gate.GrantStatus(n1, k, cur)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.gate.Delete(ctx, gate.Admin("admin"), k, ""); err != nil {
		t.Fatal(err)
	}
	e.apply(t, "admin", bound("n2"), "")
	before := e.store.Get(k).GetMetadata().GetResourceVersion()
	if _, err := e.gate.WriteGrantedStatus(ctx, grant, &schemas.Status{Phase: "Failed"}, 0); !errors.Is(err, gate.ErrForbidden) {
		t.Fatalf("a grant for the pod bound to n1, written over the one bound to n2: %v, want forbidden", err)
	}
	if after := e.store.Get(k).GetMetadata().GetResourceVersion(); after != before {
		t.Fatalf("a refused status write moved %s from %d to %d", k, before, after)
	}
}

// A grant holds only while the kind's controller credential is the one
// the decision took: a credential that no longer runs the kind records
// nothing with it.
func TestWriteGrantedStatusFollowsTheKindsController(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.apply(t, "admin", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: ns}\ndata: {a: b}\n", "")
	k := projections.Key{Kind: "ConfigMap", Namespace: "ns", Name: "web"}
	runs := "configmaps"
	g, err := gate.New(gate.Config{Log: e.log, State: e.store, Controller: func(kind string) string {
		if kind == "ConfigMap" {
			return runs
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	controller := gate.Principal{Name: "controller/configmaps", Role: gate.RoleController, Self: "configmaps"}
	grant, err := g.GrantStatus(controller, k, e.store.Get(k))
	if err != nil {
		t.Fatal(err)
	}
	runs = "others"
	if _, err := g.WriteGrantedStatus(ctx, grant, &schemas.Status{Phase: "Ready"}, 0); !errors.Is(err, gate.ErrForbidden) {
		t.Fatalf("a grant of a credential that no longer runs the kind: %v, want forbidden", err)
	}
	runs = "configmaps"
	st := &schemas.Status{Phase: "Ready"}
	o, err := g.WriteGrantedStatus(ctx, grant, st, 0)
	if err != nil || o.GetStatus().GetPhase() != "Ready" {
		t.Fatalf("the grant's own credential: %v, %v", o.GetStatus(), err)
	}
	// Unchanged: nothing written, the object as it is stored.
	rv := o.GetMetadata().GetResourceVersion()
	grant, err = g.GrantStatus(controller, k, e.store.Get(k))
	if err != nil {
		t.Fatal(err)
	}
	o, err = g.WriteGrantedStatus(ctx, grant, &schemas.Status{Phase: "Ready"}, 0)
	if err != nil || o.GetMetadata().GetResourceVersion() != rv {
		t.Fatalf("an unchanged status: version %d (was %d), %v", o.GetMetadata().GetResourceVersion(), rv, err)
	}
}
