package gate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
)

// The controllers' door decides through Authorize, as every other writer
// does: a refusal is Authorize's (ErrForbidden) as well as the door's
// (events.ErrRefused), and the kind's controller is the one function both
// doors ask.
func TestControllersDecideThroughAuthorize(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.apply(t, "admin", configMap("web", "", "a: b"), "")
	runs := map[string]string{"ConfigMap": "widgets"}
	door, err := gate.NewControllers(gate.ControllerConfig{Log: e.log, State: e.store, Controller: func(kind string) string { return runs[kind] }})
	if err != nil {
		t.Fatal(err)
	}
	rv := e.store.GetRecord(webKey).GetMetadata().GetResourceVersion()
	entry := func(typ schemas.EventType, actor string, o *schemas.Object) events.Entry {
		return events.Entry{Expect: rv, Event: &schemas.Event{Type: typ, Key: webKey.Proto(), Actor: actor, Object: o}}
	}
	status := &schemas.Object{Status: &schemas.Status{Phase: "Ready"}}
	const actor = "reconciler/ConfigMap@widgets/i1"
	for _, tc := range []struct {
		name       string
		controller string
		entry      events.Entry
		ok         bool
		forbidden  bool // refused by Authorize, not by the door's own checks
	}{
		{"status of its kind", "widgets", entry(schemas.EventType_EVENT_TYPE_STATUS_CHANGED, actor, status), true, false},
		{"status of another controller's kind", "gadgets", entry(schemas.EventType_EVENT_TYPE_STATUS_CHANGED, "reconciler/ConfigMap@gadgets/i1", status), false, true},
		{"finalization before deletion was requested", "widgets", entry(schemas.EventType_EVENT_TYPE_FINALIZED, actor, nil), false, true},
		{"a delete request", "widgets", entry(schemas.EventType_EVENT_TYPE_DELETE_REQUESTED, actor, nil), false, true},
		{"a spec in a status change", "widgets", entry(schemas.EventType_EVENT_TYPE_STATUS_CHANGED, actor, &schemas.Object{Status: status.Status, Metadata: &schemas.ObjectMeta{Labels: map[string]string{"a": "b"}}}), false, true},
		{"another controller's actor", "widgets", entry(schemas.EventType_EVENT_TYPE_STATUS_CHANGED, "reconciler/ConfigMap@gadgets/i1", status), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.count(t)
			_, errs := door.Write(ctx, events.ControllerWrite{Controller: tc.controller, Entries: []events.Entry{tc.entry}})
			var err error
			if errs != nil {
				err = errs[0]
			}
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if e.count(t) != before+1 {
					t.Fatal("nothing written")
				}
				return
			}
			if !errors.Is(err, events.ErrRefused) || errors.Is(err, gate.ErrForbidden) != tc.forbidden {
				t.Fatalf("got %v; want refused, forbidden by Authorize %v", err, tc.forbidden)
			}
			if e.count(t) != before {
				t.Fatal("a refused write was written")
			}
		})
	}

	// A kind run in-process has no controller, whatever a credential says.
	delete(runs, "ConfigMap")
	rv = e.store.GetRecord(webKey).GetMetadata().GetResourceVersion()
	if _, errs := door.Write(ctx, events.ControllerWrite{Controller: "widgets", Entries: []events.Entry{entry(schemas.EventType_EVENT_TYPE_STATUS_CHANGED, actor, status)}}); errs == nil || !errors.Is(errs[0], gate.ErrForbidden) {
		t.Fatalf("status of a kind no controller runs: %v, want forbidden", errs)
	}
}
