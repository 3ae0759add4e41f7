package scheduler

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
)

// A decision's assumed pods read back as they were recorded, from the
// pod → node object and from the list of {pod, node} that earlier records
// hold.
func TestRecordAssumedPods(t *testing.T) {
	d := &Decision{Pod: "ns/p", Profile: DefaultSchedulerName, Node: "n1", Rejections: map[string]int{}, RejectedBy: map[string]int{}}
	assumed := []AssumedPod{{Pod: "ns/a", Node: "n2"}, {Pod: "ns/b", Node: "n1"}}
	rec, err := Record(d, 3, assumed)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Assumed, assumed) || got.Cycle != 3 || got.Node != "n1" {
		t.Fatalf("read back %+v, cycle %d, node %s", got.Assumed, got.Cycle, got.Node)
	}

	old, err := structpb.NewStruct(map[string]any{"pod": "ns/p", "profile": DefaultSchedulerName, "node": "n1",
		"assumed": []any{map[string]any{"pod": "ns/b", "node": "n1"}, map[string]any{"pod": "ns/a", "node": "n2"}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err = ParseRecord(old)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Assumed, assumed) {
		t.Fatalf("earlier record read back %+v", got.Assumed)
	}
}
