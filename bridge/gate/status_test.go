package gate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// WriteStatus, the status subresource's way in, decides as the door does
// for a status change (VerbStatus): a reconciler records its own
// object's status and no other, a writer records status within its
// namespaces only, and neither reaches the spec.
func TestWriteStatusAuthorizesAsTheDoor(t *testing.T) {
	e := newEnv(t)
	e.apply(t, "user/admin", `apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: ns}
data: {a: b}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: other}
data: {a: b}
`, "")
	ctx := context.Background()
	web := projections.Key{Kind: "ConfigMap", Namespace: "ns", Name: "web"}
	otherWeb := projections.Key{Kind: "ConfigMap", Namespace: "other", Name: "web"}
	// The kind's controller credential is "configmaps" here; jetplane
	// runs no kind in this test.
	g, err := gate.New(gate.Config{Log: e.log, State: e.store, Controller: func(kind string) string {
		if kind == "ConfigMap" {
			return "configmaps"
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.apply(t, "user/admin", "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\n", "")
	secret := projections.Key{Kind: "Secret", Namespace: "ns", Name: "s"}
	controller := gate.Principal{Name: "controller/configmaps", Role: gate.RoleController, Self: "configmaps"}
	rival := gate.Principal{Name: "controller/secrets", Role: gate.RoleController, Self: "secrets"}
	reconciler := gate.Principal{Name: "reconciler/ConfigMap@test", Role: gate.RoleController, Owner: "ConfigMap/ns/web"}
	writer := gate.Principal{Name: "user/shopci", Role: gate.RoleWriter, Namespaces: []string{"ns"}}
	for _, tc := range []struct {
		name    string
		p       gate.Principal
		k       projections.Key
		wantErr error
	}{
		{"a reconciler records its own object's status", reconciler, web, nil},
		{"a reconciler records no other object's status", reconciler, otherWeb, gate.ErrForbidden},
		{"a confined writer records status in its namespace", writer, web, nil},
		{"a confined writer records no status outside it", writer, otherWeb, gate.ErrForbidden},
		{"a controller credential records its kind's status", controller, web, nil},
		{"in every namespace", controller, otherWeb, nil},
		{"a controller credential records no other kind's status", controller, secret, gate.ErrForbidden},
		{"nor does another controller credential record its kind's", rival, web, gate.ErrForbidden},
		{"a reader records no status", gate.Principal{Name: "user/audit", Role: gate.RoleReader}, web, gate.ErrForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.store.Get(tc.k)
			st := &schemas.Status{Phase: "Ready", Message: tc.name}
			o, err := g.WriteStatus(ctx, tc.p, tc.k, st, 0)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("WriteStatus: %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				if got := e.store.Get(tc.k); got.GetMetadata().GetResourceVersion() != before.GetMetadata().GetResourceVersion() {
					t.Fatalf("a refused status write changed %s", tc.k)
				}
				return
			}
			if o.GetStatus().GetMessage() != tc.name {
				t.Fatalf("status after the write: %v", o.GetStatus())
			}
		})
	}
}
