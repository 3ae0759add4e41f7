package manifest

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// FuzzDecode checks that no input makes Decode panic, that a failure is
// always a non-empty Errors, and that every object it accepts can be encoded
// for the log and the API.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		deploymentYAML,
		svcDoc + "---\n" + svcYAML("b"),
		`{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}, "spec": {"n": 1.5}}`,
		`[{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}, {"kind": "X"}]`,
		"apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: Service, metadata: {name: a}}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  a: &a {x: [1, 2]}\n  b: {<<: *a, y: 0x10}\n",
		"apiVersion: v1\nkind: Service\nmetadata:\n\tname: a\n",
		"a: &a [*a]\n",
		"[",
		"---\n---\n",
		"\xef\xbb\xbf{\"a\": \"\\ud800\"}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Decode("fuzz", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 || len(es) > MaxErrors {
				t.Fatalf("error is %T with %d entries, want Errors with 1 to %d: %v", err, len(es), MaxErrors, err)
			}
			if objs != nil {
				t.Fatalf("got %d objects alongside an error", len(objs))
			}
			return
		}
		for _, o := range objs {
			if _, err := protojson.Marshal(o); err != nil {
				t.Fatalf("protojson.Marshal(%v): %v", o, err)
			}
			if _, err := proto.Marshal(o); err != nil {
				t.Fatalf("proto.Marshal(%v): %v", o, err)
			}
			if o.Metadata.GetName() == "" || o.Kind == "" || o.ApiVersion == "" || o.Spec == nil {
				t.Fatalf("accepted an incomplete object: %v", o)
			}
		}
	})
}
