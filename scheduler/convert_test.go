package scheduler

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
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
