package crd_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/crd"
	"github.com/jetplane/jetplane/schemas/manifest"
)

func decode(t testing.TB, y string) []*schemas.Object {
	t.Helper()
	objs, err := manifest.Decode("test.yaml", []byte(y))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return objs
}

func widgetCRD(t testing.TB) *schemas.Object {
	t.Helper()
	data, err := os.ReadFile("testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, string(data))[0]
}

func widget(spec string) string {
	return "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: ns}\nspec: " + spec + "\n"
}

func TestAdmit(t *testing.T) {
	cat := crd.NewCatalog([]*schemas.Object{widgetCRD(t)})
	for _, tc := range []struct {
		name, input string
		old         string // the object stored now, if any
		wantErr     string
		check       func(t *testing.T, o *schemas.Object)
	}{
		{name: "defaults", input: widget("{size: 3}"), check: func(t *testing.T, o *schemas.Object) {
			f := o.Spec.GetFields()
			if f["color"].GetStringValue() != "blue" || f["maxSize"].GetNumberValue() != 10 {
				t.Errorf("defaults missing: %v", o.Spec)
			}
			if o.ApiVersion != "example.com/v1" {
				t.Errorf("apiVersion %s", o.ApiVersion)
			}
		}},
		{name: "nested defaults", input: widget("{size: 3, ports: [{port: 80}]}"), check: func(t *testing.T, o *schemas.Object) {
			p := o.Spec.GetFields()["ports"].GetListValue().GetValues()[0].GetStructValue().GetFields()
			if p["protocol"].GetStringValue() != "TCP" {
				t.Errorf("item default missing: %v", p)
			}
		}},
		{name: "stored at the storage version", input: "apiVersion: example.com/v1alpha1\nkind: Widget\nmetadata: {name: w, namespace: ns}\nspec: {size: 3, anything: [1]}\n",
			check: func(t *testing.T, o *schemas.Object) {
				if o.ApiVersion != "example.com/v1" {
					t.Errorf("apiVersion %s, want the storage version example.com/v1", o.ApiVersion)
				}
			}},
		{name: "preserve unknown fields", input: widget("{size: 3, extra: {any: {thing: [1, 2]}}}")},
		{name: "unknown field", input: widget("{size: 3, colour: red}"), wantErr: "Widget.example.com/ns/w: spec.colour: unknown field: not declared in the schema of Widget.example.com v1; did you mean color?"},
		{name: "required", input: widget("{color: red}"), wantErr: "spec.size: Required value"},
		{name: "wrong type", input: widget("{size: big}"), wantErr: `spec.size: Invalid value: "string": spec.size in body must be of type integer`},
		{name: "bounds", input: widget("{size: 1000, maxSize: 2000}"), wantErr: "spec.size: Invalid value: 1000: spec.size in body should be less than or equal to 100"},
		{name: "enum", input: widget("{size: 1, color: pink}"), wantErr: `spec.color: Unsupported value: "pink": supported values: "red", "green", "blue"`},
		{name: "pattern", input: widget("{size: 1, name: Bad1}"), wantErr: "spec.name: Invalid value: \"Bad1\": spec.name in body should match '^[a-z]+$'"},
		{name: "list map keys", input: widget("{size: 1, ports: [{port: 80}, {port: 80}]}"), wantErr: "spec.ports[1]: Duplicate value"},
		{name: "CEL rule", input: widget("{size: 20}"), wantErr: "Widget.example.com/ns/w: spec: Invalid value: size must not exceed maxSize"},
		{name: "CEL transition rule", input: widget("{size: 2, color: red}"), old: widget("{size: 2, color: green}"), wantErr: "color is immutable"},
		{name: "version not served", input: "apiVersion: example.com/v2\nkind: Widget\nmetadata: {name: w, namespace: ns}\n", wantErr: `apiVersion: "example.com/v2" is not served for Widget; served: example.com/v1alpha1, example.com/v1`},
		{name: "namespaced", input: "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 1}\n", wantErr: "metadata.namespace: is required"},
		{name: "undefined kind", input: "apiVersion: example.com/v1\nkind: Sprocket\nmetadata: {name: w, namespace: ns}\n", wantErr: "kind Sprocket.example.com is not defined (apply a CustomResourceDefinition"},
		{name: "typo of a defined kind", input: "apiVersion: example.com/v1\nkind: Widgte\nmetadata: {name: w, namespace: ns}\n", wantErr: "kind Widgte.example.com is not defined; did you mean Widget.example.com?"},
		{name: "typo of a built-in kind", input: "apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: w, namespace: ns}\n", wantErr: "kind Deploymnet.apps is not defined; did you mean Deployment.apps?"},
		{name: "built-in kind in the wrong group", input: "apiVersion: app/v1\nkind: Deployment\nmetadata: {name: w, namespace: ns}\n", wantErr: "did you mean Deployment.apps?"},
		{name: "built-in kind", input: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w, namespace: ns}\nspec: {replicas: 1}\n"},
		{name: "jetplane kind", input: "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: w, namespace: ns}\nspec: {chart: {name: x}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := decode(t, tc.input)
			a := crd.Admission{Current: func(projections.Key) *schemas.Object {
				if tc.old == "" {
					return nil
				}
				return decode(t, tc.old)[0]
			}}
			out, err := cat.Admit(objs, a)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Admit = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Admit: %v", err)
			}
			if tc.check != nil {
				tc.check(t, out[0])
			}
		})
	}
}

// A kind nothing defines is accepted while objects of it exist, so a data
// directory written before kinds were checked keeps working.
func TestAdmitGrandfathered(t *testing.T) {
	objs := decode(t, "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: ns}\nspec: {free: form}\n")
	inUse := func(k string) bool { return k == "Gadget.example.com" }
	if _, err := crd.NewCatalog(nil).Admit(objs, crd.Admission{InUse: inUse}); err != nil {
		t.Fatalf("grandfathered kind refused: %v", err)
	}
	if _, err := crd.NewCatalog(nil).Admit(objs, crd.Admission{}); !errors.Is(err, crd.ErrUndefined) {
		t.Fatalf("Admit = %v, want ErrUndefined", err)
	}
}

// A CRD and objects of its kind may come in one request.
func TestAdmitDefinitionInRequest(t *testing.T) {
	objs := append([]*schemas.Object{widgetCRD(t)}, decode(t, widget("{size: 2}"))...)
	out, err := crd.NewCatalog(nil).Admit(objs, crd.Admission{})
	if err != nil {
		t.Fatal(err)
	}
	if out[1].Spec.GetFields()["color"].GetStringValue() != "blue" {
		t.Fatalf("not defaulted: %v", out[1].Spec)
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, input, wantErr string
	}{
		{"name", strings.Replace(crdYAML(t), "name: widgets.example.com", "name: widgets.other.com", 1), `metadata.name: Invalid value: "widgets.other.com": must be spec.names.plural+"."+spec.group`},
		{"not structural", strings.Replace(crdYAML(t), "size: {type: integer, minimum: 1, maximum: 100}", "size: {minimum: 1}", 1), "type: Required value: must not be empty for specified object fields"},
		{"bad CEL", strings.Replace(crdYAML(t), "self.size <= self.maxSize", "self.size <= self.nosuch", 1), "undefined field 'nosuch'"},
		{"redefines a built-in kind", strings.NewReplacer("widgets.example.com", "deployments.apps", "group: example.com", "group: apps", "kind: Widget, plural: widgets, singular: widget, shortNames: [wd]", "kind: Deployment, plural: deployments").Replace(crdYAML(t)), "Deployment.apps is a built-in kind and cannot be redefined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := crd.NewCatalog(nil).Admit(decode(t, tc.input), crd.Admission{})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Admit = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func crdYAML(t *testing.T) string {
	data, err := os.ReadFile("testdata/widgets.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestColumns(t *testing.T) {
	d := crd.NewCatalog([]*schemas.Object{widgetCRD(t)}).Lookup("Widget.example.com")
	cols := d.Columns("example.com/v1")
	if len(cols) != 3 || cols[0].Name != "Size" || cols[0].JSONPath != ".spec.size" || cols[2].Priority != 1 {
		t.Fatalf("columns %+v", cols)
	}
	if d.Columns("example.com/v1alpha1") != nil {
		t.Fatal("v1alpha1 has no columns")
	}
}

// A kind a reconciler compiled into the server handles is that code's own.
func TestAdmitCompiled(t *testing.T) {
	objs := decode(t, "apiVersion: v1\nkind: Probe\nmetadata: {name: p, namespace: ns}\nspec: {n: 1}\n")
	compiled := func(k string) bool { return k == "Probe" }
	if _, err := crd.NewCatalog(nil).Admit(objs, crd.Admission{Compiled: compiled}); err != nil {
		t.Fatalf("compiled kind refused: %v", err)
	}
}

// A schema every version shares is moved by the conversion to the
// internal type; a CRD with one version is the common case.
func TestCompileOneVersion(t *testing.T) {
	o := decode(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Gadget, plural: gadgets}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns: [{name: Size, type: integer, jsonPath: .spec.size}]
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {size: {type: integer, default: 1}}}
`)[0]
	d, err := crd.Compile(o)
	if err != nil {
		t.Fatal(err)
	}
	if cols := d.Columns("v1"); len(cols) != 1 || cols[0].Name != "Size" {
		t.Fatalf("columns %+v", cols)
	}
	out, err := d.Admit(decode(t, "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\nspec: {size: 2}\n")[0], nil)
	if err != nil || out.GetSpec().GetFields()["size"].GetNumberValue() != 2 {
		t.Fatalf("Admit = %v, %v", out, err)
	}
}

// The admitted object is the input with its spec pruned, defaulted and at
// the storage version, and nothing else changed; the input is left as it
// was.
func TestAdmitLeavesTheInputAndKeepsTheRest(t *testing.T) {
	cat := crd.NewCatalog([]*schemas.Object{widgetCRD(t)})
	in := decode(t, "apiVersion: example.com/v1alpha1\nkind: Widget\nmetadata: {name: w, namespace: ns, labels: {a: b}, annotations: {c: d}}\nspec: {size: 3}\n")[0]
	in.Status = &schemas.Status{Phase: "Ready"}
	in.ProtoReflect().SetUnknown(protowire.AppendTag(nil, 99, protowire.VarintType))
	before := proto.CloneOf(in)
	out, err := cat.Admit([]*schemas.Object{in}, crd.Admission{})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(in, before) {
		t.Fatalf("Admit changed its input: %v, was %v", in, before)
	}
	want := proto.CloneOf(before)
	want.ApiVersion, want.Spec = "example.com/v1", out[0].Spec
	if !proto.Equal(out[0], want) {
		t.Fatalf("admitted %v, want %v", out[0], want)
	}
	if f := out[0].Spec.GetFields(); f["color"].GetStringValue() != "blue" || f["size"].GetNumberValue() != 3 {
		t.Fatalf("spec %v", out[0].Spec)
	}
}
