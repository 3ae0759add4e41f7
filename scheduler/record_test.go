package scheduler

import (
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
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

// A decision's scores read back as they were recorded, best first, from
// "node=score" strings and from the {node, score} objects earlier records
// hold.
func TestRecordScores(t *testing.T) {
	d := &Decision{Pod: "ns/p", Profile: DefaultSchedulerName, Node: "n-2", Rejections: map[string]int{"r": 1}, RejectedBy: map[string]int{"F": 1},
		Scores: []PluginScores{{Plugin: "A", Weight: 2, Top: []NodeScore{{Name: "n-2", Score: 200}, {Name: "n-1", Score: -4}}}, {Plugin: "B", Weight: 1}},
		Totals: []NodeScore{{Name: "n-2", Score: 201}, {Name: "n-1", Score: 0}}}
	rec, err := Record(d, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.Fields["totals"].GetListValue().GetValues()[0].GetStringValue(); got != "n-2=201" {
		t.Fatalf("recorded total %q", got)
	}
	got, err := ParseRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Scores[0], d.Scores[0]) || got.Scores[1].Plugin != "B" || len(got.Scores[1].Top) != 0 || !reflect.DeepEqual(got.Totals, d.Totals) {
		t.Fatalf("read back %+v, totals %+v", got.Scores, got.Totals)
	}

	old, err := structpb.NewStruct(map[string]any{"pod": "ns/p", "profile": DefaultSchedulerName, "node": "n-2",
		"scores": []any{map[string]any{"plugin": "A", "weight": 2.0, "top": []any{map[string]any{"node": "n-2", "score": 200.0}, map[string]any{"node": "n-1", "score": -4.0}}}},
		"totals": []any{map[string]any{"node": "n-2", "score": 201.0}, map[string]any{"node": "n-1", "score": 0.0}}})
	if err != nil {
		t.Fatal(err)
	}
	got, err = ParseRecord(old)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Scores[0], d.Scores[0]) || !reflect.DeepEqual(got.Totals, d.Totals) {
		t.Fatalf("earlier record read back %+v, totals %+v", got.Scores, got.Totals)
	}
}

// A Bound event's detail, encoded directly, is Record's Struct on the wire
// and reads back as the decision, before and after a round trip through
// the encoding.
func TestEncodedRecordIsRecord(t *testing.T) {
	d := &Decision{Pod: "ns/p", Profile: DefaultSchedulerName, Node: "n-2", SnapshotSequence: 1 << 40, StartIndex: 7, NumNodes: 5000, Evaluated: 600, Feasible: 500,
		Rejections: map[string]int{"node(s) were unschedulable": 3, "Insufficient cpu": 97}, RejectedBy: map[string]int{"NodeUnschedulable": 3, "NodeResourcesFit": 97},
		Versions: map[string]string{"labelfilter": "sha256:ab", "nodenumber": "sha256:cd"},
		Scores:   []PluginScores{{Plugin: "A", Weight: 2, Top: []NodeScore{{Name: "n-2", Score: 200}, {Name: "n-1", Score: -4}}}, {Plugin: "B", Weight: 1}},
		Totals:   []NodeScore{{Name: "n-2", Score: 201}, {Name: "n-1", Score: 0}}}
	assumed := []AssumedPod{{Pod: "ns/a", Node: "n-1"}, {Pod: "ns/b", Node: "n-2"}}
	for _, d := range []*Decision{d, {Pod: "ns/q", Profile: "p"}} {
		want, err := Record(d, 9, assumed)
		if err != nil {
			t.Fatal(err)
		}
		enc := encodedRecord(d, 9, assumed)
		data, err := proto.Marshal(enc)
		if err != nil {
			t.Fatal(err)
		}
		got := new(structpb.Struct)
		if err := proto.Unmarshal(data, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("encoded record decodes as\n%v\nRecord built\n%v", got, want)
		}
		fromStruct, err := ParseRecord(want)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []*structpb.Struct{enc, got} {
			parsed, err := ParseRecord(s)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(parsed, fromStruct) {
				t.Fatalf("read back %+v, want %+v", parsed, fromStruct)
			}
		}
	}
}

// The status a scheduling attempt reports holds the v1 phase and
// PodScheduled condition as the map form would build them.
func TestPodScheduledDetails(t *testing.T) {
	for _, ok := range []bool{true, false} {
		r := podScheduled(ok, "Unschedulable", "0/3 nodes are available")
		status := "False"
		if ok {
			status = "True"
		}
		want, err := structpb.NewStruct(map[string]any{"phase": "Pending",
			"conditions": []any{map[string]any{"type": PodScheduled, "status": status, "reason": "Unschedulable", "message": "0/3 nodes are available"}}})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(r.Details, want) {
			t.Fatalf("details %v, want %v", r.Details, want)
		}
	}
}

// A rejection reason a guest cut inside a character (the host keeps
// at most 1,024 bytes) or sent as arbitrary bytes still makes a Bound
// event every reader decodes, with the bad bytes replaced.
func TestBoundEventWithBrokenReasonDecodes(t *testing.T) {
	obj := &schemas.Object{ApiVersion: "v1", Kind: "Pod", Metadata: &schemas.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: &structpb.Struct{Fields: map[string]*structpb.Value{}}}
	cut := (strings.Repeat("a", 1022) + "日本")[:1024]
	d := &Decision{Pod: "ns/p", Profile: DefaultSchedulerName, Node: "n1", Rejections: map[string]int{cut: 1, "\xff\xfe": 2},
		Versions: map[string]string{"guest": "v\xc3"}, Totals: []NodeScore{{Name: "n\xe6", Score: 1}}}
	ev, err := BoundEvent(obj, d, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := events.DecodeRecord(data, 1); err != nil {
		t.Fatalf("the fold's decoding: %v", err)
	}
	full, err := events.Decode(data, 1)
	if err != nil {
		t.Fatalf("history's decoding: %v", err)
	}
	parsed, err := ParseRecord(full.GetDetail())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := parsed.Rejections[strings.Repeat("a", 1022)+"\uFFFD"]; !ok {
		t.Fatalf("rejections read back as %v", parsed.Rejections)
	}
}
