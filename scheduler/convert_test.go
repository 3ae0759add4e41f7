package scheduler

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	v1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/schemas"
)

// The struct → JSON writer reads back as protojson's output does.
func TestStructJSONMatchesProtojson(t *testing.T) {
	s, err := structpb.NewStruct(map[string]any{
		"containers": []any{map[string]any{"name": "a\"b\\c\n\t\r\x01é✓", "image": "pause",
			"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "500Mi"}}}},
		"priority": 1e21, "small": 1e-7, "int": 1000000, "neg": -12.5, "zero": 0,
		"ok": true, "no": false, "none": nil, "empty": map[string]any{}, "list": []any{},
		"key \"quoted\"\u2028": "<html>&",
	})
	if err != nil {
		t.Fatal(err)
	}
	want, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendStructJSON(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(want, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &b); err != nil {
		t.Fatalf("%v in %s", err, got)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	for _, bad := range []*structpb.Struct{
		{Fields: map[string]*structpb.Value{"n": structpb.NewNumberValue(math.NaN())}},
		{Fields: map[string]*structpb.Value{"n": structpb.NewNumberValue(math.Inf(1))}},
		{Fields: map[string]*structpb.Value{"s": structpb.NewStringValue("\xff")}},
		{Fields: map[string]*structpb.Value{"k": {}}},
	} {
		if out, err := appendStructJSON(nil, bad); err == nil {
			t.Errorf("%v written as %s, want an error", bad, out)
		}
	}
}

// podSpecSlow is the JSON path podSpecFast must equal.
func podSpecSlow(s *structpb.Struct) (v1.PodSpec, error) {
	var spec v1.PodSpec
	err := structInto(s, &spec)
	return spec, err
}

// checkPodSpecFast: whenever the direct conversion accepts s, the JSON
// path accepts it too and gives an equal spec.
func checkPodSpecFast(t *testing.T, s *structpb.Struct) bool {
	t.Helper()
	var fast v1.PodSpec
	if !podSpecFast(s, &fast) {
		return false
	}
	slow, err := podSpecSlow(s)
	if err != nil {
		t.Fatalf("direct conversion accepted %v, JSON refused it: %v", s, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%v converts directly to\n%#v\nthrough JSON to\n%#v", s, fast, slow)
	}
	return true
}

func TestPodSpecFastMatchesJSON(t *testing.T) {
	mk := func(m map[string]any) *structpb.Struct {
		s, err := structpb.NewStruct(m)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	container := func(extra map[string]any) map[string]any {
		c := map[string]any{"name": "pause", "image": "pause",
			"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "500Mi"}, "limits": map[string]any{"cpu": " 1 "}}}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	accepted := []*structpb.Struct{
		nil, mk(nil),
		mk(map[string]any{"containers": []any{container(nil)}}),
		mk(map[string]any{"containers": []any{container(nil), container(map[string]any{"name": "b"})}, "nodeName": "n1",
			"schedulerName": "s", "nodeSelector": map[string]any{"zone": "a", "é": "✓"}, "restartPolicy": "Never", "serviceAccountName": "sa"}),
		mk(map[string]any{"containers": []any{}, "nodeSelector": map[string]any{}}),
		mk(map[string]any{"containers": []any{map[string]any{"resources": map[string]any{}}}}),
	}
	for i, s := range accepted {
		if !checkPodSpecFast(t, s) {
			t.Errorf("spec %d (%v) not converted directly", i, s)
		}
	}
	// Everything else goes through JSON, which gives the same answers as
	// before (errors included).
	refused := []*structpb.Struct{
		mk(map[string]any{"containers": []any{container(map[string]any{"ports": []any{}})}}),
		mk(map[string]any{"NodeName": "n1"}),
		mk(map[string]any{"nodeName": 3}),
		mk(map[string]any{"nodeName": nil}),
		mk(map[string]any{"nodeName": "a\"b"}),
		mk(map[string]any{"containers": []any{container(map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": 2}}})}}),
		mk(map[string]any{"containers": []any{container(map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "x"}}})}}),
		mk(map[string]any{"containers": []any{container(map[string]any{"resources": map[string]any{"claims": []any{}}})}}),
		mk(map[string]any{"containers": []any{"pause"}}),
		mk(map[string]any{"tolerations": []any{}}),
		{Fields: map[string]*structpb.Value{"nodeName": structpb.NewStringValue("\xff")}},
	}
	for i, s := range refused {
		if checkPodSpecFast(t, s) {
			t.Errorf("spec %d (%v) converted directly", i, s)
		}
	}
}

// FuzzPodSpecFast builds specs of the direct conversion's shape from any
// strings, with keys and kinds it does not take mixed in, and checks it
// against the JSON path.
func FuzzPodSpecFast(f *testing.F) {
	f.Add("pause", "pause", "100m", "500Mi", "node-1", "zone", uint8(0))
	f.Add("a\"b", "\x01", " 1 ", "1e3", "", "é", uint8(1))
	f.Add("x", "y", "1.5Gi", "-1", "n", "k", uint8(7))
	f.Fuzz(func(t *testing.T, name, image, cpu, memory, node, label string, odd uint8) {
		c := map[string]*structpb.Value{
			"name": structpb.NewStringValue(name), "image": structpb.NewStringValue(image),
			"resources": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
				"requests": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
					"cpu": structpb.NewStringValue(cpu), memory: structpb.NewStringValue(memory)}}),
			}}),
		}
		spec := map[string]*structpb.Value{
			"containers":   structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStructValue(&structpb.Struct{Fields: c})}}),
			"nodeName":     structpb.NewStringValue(node),
			"nodeSelector": structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{label: structpb.NewStringValue(name)}}),
		}
		switch odd % 8 {
		case 1:
			spec["nodeName"] = structpb.NewNumberValue(float64(len(node)))
		case 2:
			c["ports"] = structpb.NewListValue(&structpb.ListValue{})
		case 3:
			spec[label] = structpb.NewStringValue(node)
		case 4:
			c[label] = structpb.NewStringValue(image)
		case 5:
			spec["schedulerName"] = structpb.NewNullValue()
		}
		checkPodSpecFast(t, &structpb.Struct{Fields: spec})
	})
}

// A node converted for placement gets the hostname label on its own
// labels: the stored object's map, shared by the projection's readers,
// is left as it was.
func TestNodeFromObjectLeavesTheStoredLabels(t *testing.T) {
	labels := map[string]string{"zone": "a"}
	o := &schemas.Object{Kind: "Node", Metadata: &schemas.ObjectMeta{Name: "n1", Labels: labels}}
	node, err := NodeFromObject(o)
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[v1.LabelHostname] != "n1" || node.Labels["zone"] != "a" {
		t.Fatalf("converted labels %v", node.Labels)
	}
	if len(labels) != 1 {
		t.Fatalf("the stored object's labels changed: %v", labels)
	}
}
