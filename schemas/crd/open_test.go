package crd

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/manifest"
)

const probes = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: probes.bench.example.dev}
spec:
  group: bench.example.dev
  scope: Namespaced
  names: {kind: Probe, plural: probes}
  versions:
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, description: an open schema, x-kubernetes-preserve-unknown-fields: true}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`

func compileYAML(t *testing.T, y string) *Definition {
	t.Helper()
	objs, err := manifest.Decode("crd.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Compile(objs[0])
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// An open schema's objects skip pruning, defaulting and validation, none
// of which can change or refuse them: what Admit stores and refuses is
// what the full path stores and refuses, for every spec.
func TestAdmitOpenIsTheFullPath(t *testing.T) {
	fast := compileYAML(t, probes)
	full := compileYAML(t, probes)
	if !fast.versions["v1"].open || !fast.versions["v1beta1"].open || fast.versions["v2"].open {
		t.Fatalf("open versions: v1 %v, v1beta1 %v, v2 %v; want true, true, false",
			fast.versions["v1"].open, fast.versions["v1beta1"].open, fast.versions["v2"].open)
	}
	for _, v := range full.versions {
		v.open = false
	}
	specs := []any{
		nil,
		map[string]any{},
		map[string]any{"size": 3.0},
		map[string]any{"n": []any{1.0, math.Copysign(0, -1), 0.5, 1e300, -1e-300, math.Pow(2, 53), math.Pow(2, 53) + 2, math.Pow(2, 64), -math.Pow(2, 63)}},
		map[string]any{"s": "ünïcödé \u2028 <&>", "b": true, "z": nil, "l": []any{map[string]any{"a": []any{}}, nil, "x"}},
		map[string]any{"metadata": map[string]any{"name": "inner"}, "apiVersion": "v9", "kind": "Other", "status": map[string]any{"phase": "X"}},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		specs = append(specs, randomValue(r, 0))
	}
	for i, spec := range specs {
		for _, apiVersion := range []string{"bench.example.dev/v1", "bench.example.dev/v1beta1", "bench.example.dev/v2", "bench.example.dev/v3"} {
			for _, ns := range []string{"shop", ""} {
				o := &schemas.Object{ApiVersion: apiVersion, Kind: "Probe", Metadata: &schemas.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: ns, Labels: map[string]string{"a": "b"}},
					Status: &schemas.Status{Phase: "Ready"}}
				if m, ok := spec.(map[string]any); ok {
					s, err := structpb.NewStruct(m)
					if err != nil {
						t.Fatal(err)
					}
					o.Spec = s
				}
				before := proto.CloneOf(o)
				got, gotErr := fast.Admit(o, nil)
				want, wantErr := full.Admit(proto.CloneOf(o), nil)
				if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
					t.Fatalf("spec %d %s %q: error %v, the full path's %v", i, apiVersion, ns, gotErr, wantErr)
				}
				// proto.Equal holds -0 and 0 equal; their bytes differ.
				gb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(got)
				wb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(want)
				if !proto.Equal(got, want) || !bytes.Equal(gb, wb) {
					t.Fatalf("spec %d %s %q: admitted %v, the full path %v", i, apiVersion, ns, got, want)
				}
				if !proto.Equal(o, before) {
					t.Fatalf("spec %d: Admit changed its input", i)
				}
			}
		}
	}
}

func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(8); {
	case depth > 3 || k < 2:
		switch r.IntN(6) {
		case 0:
			return nil
		case 1:
			return r.IntN(2) == 0
		case 2:
			return float64(r.Int64N(1<<60) - 1<<59)
		case 3:
			return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
		case 4:
			return float64(r.IntN(1000))
		}
		return string(rune('a'+r.IntN(26))) + "\u00e9"
	case k < 5:
		m := map[string]any{}
		for range r.IntN(5) {
			m[string(rune('a'+r.IntN(26)))] = randomValue(r, depth+1)
		}
		return m
	default:
		l := []any{}
		for range r.IntN(4) {
			l = append(l, randomValue(r, depth+1))
		}
		return l
	}
}

// openSchema takes only the open schema, described or not.
func TestOpenSchema(t *testing.T) {
	for _, tc := range []struct {
		schema string
		open   bool
	}{
		{"{type: object, x-kubernetes-preserve-unknown-fields: true}", true},
		{"{type: object, description: d, x-kubernetes-preserve-unknown-fields: true}", true},
		{"{type: object}", false},
		{"{type: object, x-kubernetes-preserve-unknown-fields: true, properties: {spec: {type: object, x-kubernetes-preserve-unknown-fields: true}}}", false},
		{"{type: object, x-kubernetes-preserve-unknown-fields: true, maxProperties: 3}", false},
		{"{type: object, x-kubernetes-preserve-unknown-fields: true, x-kubernetes-validations: [{rule: 'self == self'}]}", false},
		{"{type: object, x-kubernetes-preserve-unknown-fields: true, required: [spec]}", false},
	} {
		d := compileYAML(t, fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: probes.bench.example.dev}
spec:
  group: bench.example.dev
  scope: Namespaced
  names: {kind: Probe, plural: probes}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: %s
`, tc.schema))
		if got := d.versions["v1"].open; got != tc.open {
			t.Errorf("%s: open %v, want %v", tc.schema, got, tc.open)
		}
	}
}
