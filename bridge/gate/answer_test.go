package gate_test

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/bridge/gate"
)

// What Apply answers for each object is what the projection holds after
// the write: created, configured (a new spec), configured again with the
// spec unchanged, emptied, and in a request of several objects.
func TestApplyAnswersTheStoredObject(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, y := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: ns}\ndata: {a: b}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: ns}\ndata: {a: c, n: '1'}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: ns, labels: {x: y}}\ndata: {a: c, n: '1'}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: ns}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: ns}\ndata: {a: d}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: api, namespace: ns}\ndata: {a: e}\n",
	} {
		out, err := e.gate.Apply(ctx, gate.Admin("admin"), decode(t, y), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			if stored := e.store.Get(o.Key); !proto.Equal(o.Object, stored) {
				t.Fatalf("%s %s: answered %v, stored %v", o.Key, o.Action, o.Object, stored)
			}
		}
	}
}
