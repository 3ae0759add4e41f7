package security

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

const widgetKind, gadgetKind = "Widget.example.com", "Gadget.example.com"

// connectController creates controller name's credential for kinds and
// connects with it.
func connectController(t *testing.T, a *app.App, name string, kinds ...string) (*events.ControllerLog, *nats.Conn, *violations) {
	t.Helper()
	nc, v := connectWith(t, a.NATSURL(), credFile(t, a, auth.RoleController, name, kinds...))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	l, err := events.OpenController(ctx, nc, name)
	if err != nil {
		t.Fatal(err)
	}
	return l, nc, v
}

// A controller credential writes the status and the finalization of its
// own kinds, and nothing else: not a spec, not another kind's status,
// not a deletion, not another controller's subject or the instances'
// buckets.
func TestControllerWritesOnlyItsKindsStatus(t *testing.T) {
	a := start(t, app.Config{})
	c := &api.Client{BaseURL: a.URL()}
	seed(t, c)
	ctx := context.Background()
	doc := `apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: shop}
spec: {size: 1}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g1, namespace: shop}
spec: {size: 1}
`
	// The controllers' credentials name their kinds, which defines them.
	widgets, nc, v := connectController(t, a, "widgets", widgetKind)
	_, _, _ = connectController(t, a, "gadgets", gadgetKind)
	if _, err := c.Apply(ctx, "objs.yaml", []byte(doc), ""); err != nil {
		t.Fatal(err)
	}

	// One kind has one controller.
	if _, err := a.Creds().CreateWithKinds(auth.RoleController, "rival", []string{widgetKind}); err == nil || !strings.Contains(err.Error(), "runs it already") {
		t.Fatalf("a second controller of %s: %v", widgetKind, err)
	}

	w1 := projections.Key{Kind: widgetKind, Namespace: "shop", Name: "w1"}
	g1 := projections.Key{Kind: gadgetKind, Namespace: "shop", Name: "g1"}
	cm := projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web"}
	rv := func(k projections.Key) uint64 {
		t.Helper()
		o := a.Store().Get(k)
		if o == nil {
			t.Fatalf("%s is gone", k)
		}
		return o.GetMetadata().GetResourceVersion()
	}
	actor := func(k projections.Key) string { return "reconciler/" + k.Kind + "@widgets/test" }
	status := func(k projections.Key) events.Entry {
		return events.Entry{Expect: rv(k), Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: k.Proto(), Actor: actor(k),
			Time: timestamppb.Now(), Object: &schemas.Object{Status: &schemas.Status{Phase: "Ready", Message: "forged"}}}}
	}
	before := fingerprintOf(t, a)
	spec, _ := structpb.NewStruct(map[string]any{"size": 99})
	withSpec := status(w1)
	withSpec.Event.Object.Spec = spec
	withMeta := status(w1)
	withMeta.Event.Object.Metadata = &schemas.ObjectMeta{Labels: map[string]string{"owner": "me"}}
	applied := events.Entry{Expect: rv(w1), Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: w1.Proto(), Actor: actor(w1),
		Object: &schemas.Object{Spec: spec}}}
	deleteReq := events.Entry{Expect: rv(w1), Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_DELETE_REQUESTED, Key: w1.Proto(), Actor: actor(w1)}}
	finalize := func(k projections.Key) events.Entry {
		return events.Entry{Expect: rv(k), Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_FINALIZED, Key: k.Proto(), Actor: actor(k)}}
	}
	forgedActor := status(w1)
	forgedActor.Event.Actor = "reconciler/" + widgetKind + "@gadgets/test"
	unchecked := status(w1)
	unchecked.Expect = events.AnyVersion
	for _, tc := range []struct {
		name  string
		entry events.Entry
		want  string
	}{
		{"spec in a status change", withSpec, "sets more than its status"},
		{"metadata in a status change", withMeta, "sets more than its status"},
		{"an apply of its own kind", applied, "desired state passes Gate.Apply"},
		{"a delete request of its own kind", deleteReq, "writes nothing else"},
		{"status of another controller's kind", status(g1), "controller gadgets runs its kind"},
		{"status of a built-in kind", status(cm), "no controller runs its kind"},
		{"finalization of another controller's kind", finalize(g1), "controller gadgets runs its kind"},
		{"finalization of a built-in kind", finalize(cm), "no controller runs its kind"},
		{"finalization of its kind not being deleted", finalize(w1), "deletion was not requested"},
		{"status under another controller's actor", forgedActor, "a controller writes as"},
		{"status without a concurrency check", unchecked, "names the version it read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := widgets.Append(ctx, tc.entry)
			if !errors.Is(err, events.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want refused (%s), got %v", tc.want, err)
			}
			// In a batch, one refused entry refuses the batch.
			if _, err := widgets.AppendBatch(ctx, []events.Entry{status(w1), tc.entry}); !errors.Is(err, events.ErrRefused) {
				t.Fatalf("batch: want refused, got %v", err)
			}
		})
	}
	unchanged(t, a, before)

	// NATS itself refuses everything but its own door.
	for _, subj := range []string{
		events.InputPrefix + ".Widget%2Eexample%2Ecom.shop.w1",
		events.ControllerSubject("gadgets"),
		"$KV." + events.MembersBucket + ".member.x",
		"$KV." + events.ControllerBucket("gadgets") + ".member.x",
		"$JS.API.CONSUMER.CREATE." + events.StreamName + "." + events.PartitionConsumer("", 0),
		"$JS.API.CONSUMER.DELETE." + events.StreamName + "." + events.PartitionConsumer("", 1),
		"$JS.API.CONSUMER.UNPIN." + events.StreamName + "." + events.PartitionConsumer("", 2),
		// Acknowledgements on the instances' consumers, and on another
		// controller's, each of which covers every delivery below it.
		"$JS.ACK." + events.StreamName + "." + events.PartitionConsumer("", 0) + ".1.9.9.1.0",
		"$JS.ACK." + events.StreamName + "." + events.PartitionConsumer(events.ControllerConsumerPrefix+"gadgets", 0) + ".1.9.9.1.0",
	} {
		if err := nc.Publish(subj, []byte("forged")); err != nil {
			t.Fatal(err)
		}
		v.waitFor(t, subj)
	}
	unchanged(t, a, before)

	// What it may do: its kind's status, then, once deletion is
	// requested, its kind's finalization.
	if _, err := widgets.Append(ctx, status(w1)); err != nil {
		t.Fatalf("status of its own kind: %v", err)
	}
	waitState(t, a, func() bool { return a.Store().Get(w1).GetStatus().GetMessage() == "forged" })
	if _, err := c.Delete(ctx, api.Key{Kind: widgetKind, Namespace: "shop", Name: "w1"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, a, func() bool { return a.Store().Get(w1).GetStatus().GetGoal() == projections.GoalDeleted })
	if a.Store().Get(w1) == nil {
		t.Fatal("a kind with a controller was finalized without it")
	}
	if _, err := widgets.Append(ctx, finalize(w1)); err != nil {
		t.Fatalf("finalization of its own kind: %v", err)
	}
	waitState(t, a, func() bool { return a.Store().Get(w1) == nil })
}

func waitState(t *testing.T, a *app.App, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("state never got there")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
