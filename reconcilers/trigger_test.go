package reconcilers

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/schemas"
)

// scanHead reads exactly what a full decode would, for the fields it
// reads.
func TestScanHeadMatchesDecode(t *testing.T) {
	spec, _ := structpb.NewStruct(map[string]any{"size": "xl", "list": []any{1, "two"}})
	at := time.Date(2026, 11, 23, 11, 0, 0, 123456789, time.UTC)
	for _, ev := range []*schemas.Event{
		{Id: "abc", Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Actor: "reconciler/Widget@a",
			Key: &schemas.ObjectKey{Kind: "Widget", Namespace: "ns", Name: "w"}, Time: timestamppb.New(at), Cause: "x",
			Object: &schemas.Object{Spec: spec, Status: &schemas.Status{Phase: "Ready"}}},
		{Type: schemas.EventType_EVENT_TYPE_APPLIED},
		{Id: "only-id", Time: timestamppb.New(time.Unix(-5, 0))},
	} {
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		h, err := scanHead(b)
		if err != nil {
			t.Fatal(err)
		}
		var wantAt time.Time
		if ev.Time != nil {
			wantAt = ev.Time.AsTime()
		}
		if h.id != ev.Id || h.typ != ev.Type || string(h.actor) != ev.Actor || !h.at.Equal(wantAt) && !(ev.Time == nil && h.at.Equal(time.Unix(0, 0))) {
			t.Fatalf("scanHead = %+v, want %v", h, ev)
		}
		if len(b) > 2 {
			if _, err := scanHead(b[:len(b)-1]); err == nil && ev.Object != nil {
				t.Fatal("a truncated event scanned without error")
			}
		}
	}
}
