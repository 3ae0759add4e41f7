package gate_test

import (
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
)

// TestIdempotencyKeyIsPerObject pins what the README says of an
// idempotency key: it is checked per object. A retry stores nothing twice;
// the same key on an apply of another object is not refused.
func TestIdempotencyKeyIsPerObject(t *testing.T) {
	e := newEnv(t)
	web := configMap("web", "app: web", "a: '1'")
	e.apply(t, "user/alice", web, "k1")
	before := e.count(t)
	if out := e.apply(t, "user/alice", web, "k1"); out[0].Action != gate.Unchanged {
		t.Errorf("retry: %s, want unchanged", out[0].Action)
	}
	if after := e.count(t); after != before {
		t.Errorf("the retry wrote %d events", after-before)
	}
	out := e.apply(t, "user/alice", docs(web, configMap("api", "app: api", "a: '1'")), "k1")
	if out[0].Action != gate.Unchanged || out[1].Action != gate.Created {
		t.Errorf("another object under the same key: %s, %s; want unchanged, created", out[0].Action, out[1].Action)
	}
	if e.store.Get(projections.Key{Kind: "ConfigMap", Namespace: webKey.Namespace, Name: "api"}) == nil {
		t.Error("the other object was not stored")
	}
}
