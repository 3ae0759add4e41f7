package node_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/node"
	"github.com/jetplane/jetplane/schemas"
)

// fakes: one heartbeat, a projection of one pod, a log that records.
type beats struct{ at time.Time }

func (b *beats) Heartbeat(context.Context, string) (events.Heartbeat, error) {
	return events.Heartbeat{Node: "n2", Time: b.at, Data: []byte(`{"node":"n2"}`)}, nil
}
func (b *beats) WatchHeartbeats(context.Context, func(events.Heartbeat)) error { return nil }

type state struct{ pod *schemas.Object }

func (s *state) Get(projections.Key) *schemas.Object { return s.pod }
func (s *state) List(projections.Query) ([]*schemas.Object, uint64) {
	return []*schemas.Object{proto.CloneOf(s.pod)}, 0
}

type log struct {
	history  []*schemas.Event
	appended []*schemas.Event
}

func (l *log) Append(_ context.Context, e events.Entry) (events.Result, error) {
	l.appended = append(l.appended, e.Event)
	return events.Result{Sequence: uint64(len(l.appended))}, nil
}
func (l *log) History(context.Context, *schemas.ObjectKey) ([]*schemas.Event, error) {
	return l.history, nil
}

// A NotReady node's running pod is reported Unknown once, however often
// the node is checked; when the node is back, the pod gets its agent's
// last report back.
func TestALostNodesPodsAreUnknownThenRestored(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	det, _ := structpb.NewStruct(map[string]any{"phase": "Running", "containerStatuses": []any{map[string]any{"name": "c", "ready": true}}})
	running := &schemas.Status{Phase: "Running", Details: det, Conditions: []*schemas.Condition{{Type: "Ready", Status: "True", Reason: "Running"}}}
	spec, _ := structpb.NewStruct(map[string]any{"nodeName": "n2"})
	pod := &schemas.Object{Kind: "Pod", Metadata: &schemas.ObjectMeta{Name: "p", Namespace: "default", ResourceVersion: 7}, Spec: spec, Status: running}
	hb := &beats{at: now.Add(-2 * time.Second)}
	st := &state{pod: pod}
	lg := &log{history: []*schemas.Event{{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Actor: "node/n2", Object: &schemas.Object{Status: proto.CloneOf(running)}}}}
	r, err := node.NewReconciler(node.Config{Heartbeats: hb, State: st, Log: lg, Grace: time.Second, Eviction: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	n := &schemas.Object{Kind: "Node", Metadata: &schemas.ObjectMeta{Name: "n2"}, Status: &schemas.Status{Phase: node.PhaseReady}}
	res, err := r.Reconcile(context.Background(), n)
	if err != nil || res.Phase != node.PhaseNotReady {
		t.Fatalf("Reconcile = %v, %v; want NotReady", res.Phase, err)
	}
	if len(lg.appended) != 1 {
		t.Fatalf("%d events, want the pod's Unknown status", len(lg.appended))
	}
	lost := lg.appended[0].GetObject().GetStatus()
	if lost.GetPhase() != "Unknown" || lost.GetConditions()[0].GetStatus() != "Unknown" || lost.GetConditions()[0].GetReason() != "NodeLost" {
		t.Fatalf("lost pod's status %v", lost)
	}
	// Checked again while still NotReady: nothing new.
	pod.Status, n.Status = lost, &schemas.Status{Phase: node.PhaseNotReady}
	if _, err := r.Reconcile(context.Background(), n); err != nil || len(lg.appended) != 1 {
		t.Fatalf("a second check wrote %d events (%v)", len(lg.appended)-1, err)
	}
	// Back: the agent's last report returns.
	hb.at = now
	if res, err := r.Reconcile(context.Background(), n); err != nil || res.Phase != node.PhaseReady {
		t.Fatalf("Reconcile = %v, %v; want Ready", res.Phase, err)
	}
	if len(lg.appended) != 2 || !proto.Equal(lg.appended[1].GetObject().GetStatus(), running) {
		t.Fatalf("restored %v, want %v", lg.appended[len(lg.appended)-1].GetObject().GetStatus(), running)
	}
}

// A pod restored after its node came back gets its own node's last
// report on it: never a report of another node (an earlier pod of the
// same name, bound elsewhere), nor one from before the key's last
// finalization.
func TestRestoreTakesOnlyItsNodesReportOfThisPod(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	status := func(phase string) *schemas.Status {
		det, _ := structpb.NewStruct(map[string]any{"phase": phase})
		return &schemas.Status{Phase: phase, Details: det}
	}
	spec, _ := structpb.NewStruct(map[string]any{"nodeName": "n2"})
	lostDet, _ := structpb.NewStruct(map[string]any{"phase": "Unknown", "reason": node.ReasonLost})
	pod := &schemas.Object{Kind: "Pod", Metadata: &schemas.ObjectMeta{Name: "p", Namespace: "default", ResourceVersion: 9}, Spec: spec,
		Status: &schemas.Status{Phase: "Unknown", Details: lostDet}}
	report := func(actor, phase string) *schemas.Event {
		return &schemas.Event{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Actor: actor, Object: &schemas.Object{Status: status(phase)}}
	}
	for _, tc := range []struct {
		name    string
		history []*schemas.Event
		want    string // the phase restored, "" for none
	}{
		{"its own node's", []*schemas.Event{report("node/n2", "Running"), report("node/n9", "Succeeded")}, "Running"},
		{"only another node's", []*schemas.Event{report("node/n9", "Succeeded")}, ""},
		{"an earlier pod's", []*schemas.Event{report("node/n2", "Failed"), {Type: schemas.EventType_EVENT_TYPE_FINALIZED}, {Type: schemas.EventType_EVENT_TYPE_APPLIED}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lg := &log{history: tc.history}
			r, err := node.NewReconciler(node.Config{Heartbeats: &beats{at: now}, State: &state{pod: proto.CloneOf(pod)}, Log: lg, Grace: time.Second, Eviction: time.Minute, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			n := &schemas.Object{Kind: "Node", Metadata: &schemas.ObjectMeta{Name: "n2"}, Status: &schemas.Status{Phase: node.PhaseNotReady}}
			if _, err := r.Reconcile(context.Background(), n); err != nil {
				t.Fatal(err)
			}
			got := ""
			if len(lg.appended) > 0 {
				got = lg.appended[0].GetObject().GetStatus().GetPhase()
			}
			if got != tc.want {
				t.Fatalf("restored phase %q, want %q", got, tc.want)
			}
		})
	}
}
