package crd_test

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/crd"
)

// FuzzAdmit checks objects of arbitrary content against a CRD with every
// kind of rule: the answer is a stored object at the storage version or
// errors naming fields, never a panic caught on the way out.
func FuzzAdmit(f *testing.F) {
	for _, seed := range []string{
		`{"size": 3}`, `{"size": 1000, "maxSize": 2000}`, `{"size": "x"}`, `{"ports": [{"port": 1}, {"port": 1}]}`,
		`{"extra": {"a": [1, {"b": null}]}, "size": 1}`, `{"name": "ABC", "color": "pink", "size": 0}`, `{"size": 1e300}`,
		`{"ports": [null, 3, "x"]}`, `{"size": 2, "notes": null}`,
	} {
		f.Add(seed, "v1")
		f.Add(seed, "v1alpha1")
	}
	d, err := crd.Compile(widgetCRD(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, spec, version string) {
		var m map[string]any
		if json.Unmarshal([]byte(spec), &m) != nil {
			return
		}
		s, err := structpb.NewStruct(m)
		if err != nil {
			return
		}
		o := &schemas.Object{ApiVersion: "example.com/" + version, Kind: "Widget",
			Metadata: &schemas.ObjectMeta{Name: "w", Namespace: "ns"}, Spec: s}
		out, err := d.Admit(o, o)
		if err != nil {
			if strings.Contains(err.Error(), "cannot be checked") {
				t.Fatalf("the libraries panicked on %s: %v", spec, err)
			}
			return
		}
		if out.GetApiVersion() != "example.com/v1" {
			t.Fatalf("stored at %s, want the storage version", out.GetApiVersion())
		}
	})
}
