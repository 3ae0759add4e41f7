package podspec

import (
	"encoding/json"
	"reflect"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/schemas/builtin"
)

// fastSpecs are pod specs as JSON: the first ones have the shape podFast
// reads (wantFast), the rest each step out of it once.
var fastSpecs = []struct {
	json     string
	wantFast bool
}{
	{`{"nodeName":"n1","restartPolicy":"Never","containers":[{"name":"main","image":"workload:v1","args":["hello"]}]}`, true},
	{`{"containers":[{"name":"web","image":"module:v1","args":["serve","a"]}]}`, true},
	{`{"nodeName":"n1","schedulerName":"jetplane","serviceAccountName":"sa","nodeSelector":{"disk":"ssd","zone":"a"},
	  "containers":[{"name":"a","image":"m@sha256:0123","command":["/bin/x"],"args":[],"workingDir":"/w","imagePullPolicy":"Always",
	  "env":[{"name":"A","value":"1"},{"name":"B"},{}],
	  "resources":{"limits":{"memory":"64Mi","cpu":"500m"},"requests":{"cpu":" 100m ","memory":"1e3"}}},
	  {"name":"b","image":"m:2","resources":{}}]}`, true},
	{`{"containers":[],"nodeSelector":{}}`, true},
	{`{}`, true},
	{`{"containers":[{"name":"é","image":"ü:v1","args":["\"quoted\"","back\\slash","tab\t","<html>&","\u2028"]}]}`, true},
	{`{"containers":[{"name":"a","image":"m:1","resources":{"limits":{"memory":"64Mi"},"requests":{}}}]}`, true},

	{`{"containers":[{"name":"a","image":"m:1","ports":[{"containerPort":80}]}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","Image":"m:2"}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","comand":["x"]}]}`, false},
	{`{"containers":[{"name":"a","image":null}]}`, false},
	{`{"containers":[{"name":"a","image":5}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","args":"x"}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","args":[1]}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","args":null}]}`, false},
	{`{"containers":["x"]}`, false},
	{`{"containers":{"name":"a"}}`, false},
	{`{"containers":null}`, false},
	{`{"nodeName":7}`, false},
	{`{"nodeSelector":{"a":1}}`, false},
	{`{"nodeSelector":[]}`, false},
	{`{"hostNetwork":true,"containers":[{"name":"a","image":"m:1"}]}`, false},
	{`{"restartPolicy":"Sometimes","containers":[{"name":"a","image":"m:1"}]}`, true},
	{`{"containers":[{"name":"a","image":"m:1","env":[{"name":"A","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}}]}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","env":[{"name":"A","value":2}]}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","env":{}}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","resources":{"limits":{"memory":64}}}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","resources":{"limits":{"memory":"lots"}}}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","resources":{"limits":{"memory":"\t64Mi"}}}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","resources":{"limits":{"memory":"64Mi\n"}}}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","resources":{"limits":{"memory":"6\\4"}}}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","resources":{"claims":[]}}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","resources":{"limits":null}}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1","resources":[]}]}`, false},
	{`{"containers":[{"name":"a","image":"m:1"}],"volumes":[{"name":"v","emptyDir":{}}]}`, false},
}

func structOf(tb testing.TB, js string) *structpb.Struct {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		tb.Fatal(err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// sameAsStrict fails unless podFast, where it accepts s, decodes exactly
// what strict decodes, and strict accepts it too; it says whether podFast
// accepted.
func sameAsStrict(tb testing.TB, s *structpb.Struct) bool {
	tb.Helper()
	var fast, slow corev1.PodSpec
	ok := podFast(s, &fast)
	err := strict(s, &slow)
	if !ok {
		return false
	}
	if err != nil {
		tb.Fatalf("read directly, refused through JSON (%v): %v", err, s)
	}
	if !reflect.DeepEqual(fast, slow) {
		tb.Fatalf("read directly %#v\nthrough JSON %#v", fast, slow)
	}
	// The manifest checker skips builtin.Check for such a spec.
	if err := builtin.Check("v1", KindPod, s); err != nil {
		tb.Fatalf("read directly, refused as a v1 Pod (%v): %v", err, s)
	}
	if !ReadDirectly(s) {
		tb.Fatal("ReadDirectly differs from podFast")
	}
	return true
}

func TestPodFastAsStrict(t *testing.T) {
	for _, tc := range fastSpecs {
		if got := sameAsStrict(t, structOf(t, tc.json)); got != tc.wantFast {
			t.Errorf("%s: read directly %v, want %v", tc.json, got, tc.wantFast)
		}
	}
	// Strings that are not valid UTF-8 (a Struct can hold them; JSON
	// cannot) are left to strict, which refuses them.
	for _, at := range []func(*structpb.Struct, *structpb.Value){
		func(s *structpb.Struct, v *structpb.Value) { s.Fields["nodeName"] = v },
		func(s *structpb.Struct, v *structpb.Value) {
			s.Fields["containers"].GetListValue().Values[0].GetStructValue().Fields["image"] = v
		},
		func(s *structpb.Struct, v *structpb.Value) {
			s.Fields["containers"].GetListValue().Values[0].GetStructValue().Fields["args"] = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
		},
	} {
		s := structOf(t, fastSpecs[0].json)
		at(s, structpb.NewStringValue("bad \xff"))
		if sameAsStrict(t, s) {
			t.Error("invalid UTF-8 read directly")
		}
		if _, err := Pod(s); err == nil {
			t.Error("invalid UTF-8 accepted")
		}
	}
}

// Pod reads every spec as strict and checkPod do, whichever way it reads
// it.
func TestPodAsThroughJSON(t *testing.T) {
	for _, tc := range fastSpecs {
		s := structOf(t, tc.json)
		got, err := Pod(s)
		want := new(corev1.PodSpec)
		werr := strict(s, want)
		if werr == nil {
			werr = checkPod(want)
		}
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("%s: %v, through JSON %v", tc.json, err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %#v, through JSON %#v", tc.json, got, want)
		}
	}
}

func FuzzPodFastAsStrict(f *testing.F) {
	for _, tc := range fastSpecs {
		f.Add(tc.json)
	}
	f.Fuzz(func(t *testing.T, js string) {
		var m map[string]any
		if json.Unmarshal([]byte(js), &m) != nil {
			return
		}
		s, err := structpb.NewStruct(m)
		if err != nil {
			return
		}
		sameAsStrict(t, s)
	})
}

// BenchmarkPod is a pod's spec decoded and checked, as the gate and the
// pod reconciler do for each pod: directly, and through JSON as before.
func BenchmarkPod(b *testing.B) {
	s := structOf(b, fastSpecs[0].json)
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Pod(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ps := new(corev1.PodSpec)
			if err := strict(s, ps); err != nil {
				b.Fatal(err)
			}
			if err := checkPod(ps); err != nil {
				b.Fatal(err)
			}
		}
	})
}
