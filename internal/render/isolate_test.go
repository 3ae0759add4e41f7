package render

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/jetplane/jetplane/internal/testenv"
)

func loadFiles(tb testing.TB, files map[string]string) *chart.Chart {
	tb.Helper()
	c, err := loader.LoadDir(testenv.ChartDir(tb, files))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// ordinaryChart has a subchart, values of every type, a CRD, a Namespace,
// a hook, a Secret, NOTES.txt, .Files, tpl and lookups.
func ordinaryChart() map[string]string {
	return map[string]string{
		"Chart.yaml":             "apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n- name: db\n  version: 0.1.0\n",
		"values.yaml":            "replicas: 3\nratio: 0.5\nenabled: true\nname: shop\nlist: [a, b]\nnested: {k: v}\ngreeting: 'hi {{ .Release.Name }}'\ndb: {size: 7}\n",
		"files/conf.ini":         "[main]\nx = 1\n",
		"crds/widget.yaml":       "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\nspec:\n  group: example.com\n  names: {kind: Widget, plural: widgets}\n  scope: Namespaced\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]\n",
		"templates/ns.yaml":      "apiVersion: v1\nkind: Namespace\nmetadata: {name: {{ .Values.name }}}\n",
		"templates/_helpers.tpl": `{{- define "web.labels" -}}app: {{ .Chart.Name }}{{- end -}}`,
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels: {{- include \"web.labels\" . | nindent 4 }}\n" +
			"  annotations: {jetplane.dev/depends-on: Secret/s}\ndata:\n  replicas: {{ .Values.replicas | quote }}\n  ratio: {{ .Values.ratio | quote }}\n" +
			"  printf: {{ printf \"%v-%v-%T-%T\" .Values.replicas .Values.enabled .Values.replicas .Values.count | quote }}\n  list: {{ join \",\" .Values.list | quote }}\n" +
			"  nested: {{ .Values.nested | toJson | quote }}\n  conf: {{ .Files.Get \"files/conf.ini\" | quote }}\n  tpl: {{ tpl .Values.greeting . | quote }}\n" +
			"  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n  apps: {{ .Capabilities.APIVersions.Has \"apps/v1\" | quote }}\n" +
			"  found: {{ (lookup \"v1\" \"Secret\" .Release.Namespace \"s\").data | toJson | quote }}\n" +
			"  gen: {{ printf \"%T %v\" (lookup \"v1\" \"Secret\" .Release.Namespace \"s\").metadata.generation (lookup \"v1\" \"Secret\" .Release.Namespace \"s\").metadata.generation | quote }}\n" +
			"  missing: {{ lookup \"v1\" \"Secret\" .Release.Namespace \"nope\" | toJson | quote }}\n" +
			"  list: {{ len (lookup \"v1\" \"Secret\" \"\" \"\").items | quote }}\n",
		"templates/secret.yaml":       "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {password: {{ .Values.name | b64enc }}}\n",
		"templates/hook.yaml":         "apiVersion: v1\nkind: Pod\nmetadata:\n  name: migrate\n  annotations: {helm.sh/hook: pre-install}\nspec: {containers: [{name: m, image: m:v1}]}\n",
		"templates/NOTES.txt":         "Installed {{ .Release.Name }} in {{ .Release.Namespace }}.\n",
		"charts/db/Chart.yaml":        "apiVersion: v2\nname: db\nversion: 0.1.0\n",
		"charts/db/values.yaml":       "size: 1\n",
		"charts/db/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\ndata: {size: {{ .Values.size | quote }}, release: {{ .Release.Name }}}\n",
	}
}

// objectsLookup answers lookup from a few Secrets, with the int64 a
// Kubernetes client reads numbers as; kind "Broken" fails.
type objectsLookup struct{ objs []map[string]any }

func (l objectsLookup) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if kind == "Broken" {
		return nil, false, errors.New("no such kind: Broken")
	}
	return objectsResource{l: l, kind: kind}, true, nil
}

type objectsResource struct {
	dynamic.NamespaceableResourceInterface
	l        objectsLookup
	kind, ns string
}

func (r objectsResource) Namespace(ns string) dynamic.ResourceInterface { r.ns = ns; return r }

func (r objectsResource) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	for _, o := range r.l.objs {
		u := unstructured.Unstructured{Object: o}
		if u.GetKind() == r.kind && u.GetName() == name && (r.ns == "" || u.GetNamespace() == r.ns) {
			return u.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(r.kind) + "s"}, name)
}

func (r objectsResource) List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	l := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{"resourceVersion": "7"}}}
	for _, o := range r.l.objs {
		l.Items = append(l.Items, *(&unstructured.Unstructured{Object: o}).DeepCopy())
	}
	return l, nil
}

func testLookup() objectsLookup {
	return objectsLookup{objs: []map[string]any{
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "shop", "generation": int64(4)}, "data": map[string]any{"password": "c2VjcmV0"}},
		{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "t", "namespace": "other"}},
	}}
}

// TestIsolatedRenderIsIdentical renders an ordinary chart in this process
// and through the render child: the same objects, manifests, hooks and
// notes, lookups answered alike, and the same errors.
func TestIsolatedRenderIsIdentical(t *testing.T) {
	opts := Options{ReleaseName: "web", Namespace: "shop", Revision: 2, IsUpgrade: true, Lookup: testLookup(),
		Values: map[string]any{"replicas": int64(5), "count": 2, "list": []any{"x"}}}
	want, err := render(loadFiles(t, ordinaryChart()), opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(loadFiles(t, ordinaryChart()), opts)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, got, want []Object) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d through the child, %d in process", what, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if g.Template != w.Template || g.Line != w.Line || !proto.Equal(g.Object, w.Object) || !reflect.DeepEqual(g.Manifest, w.Manifest) {
				t.Errorf("%s %d differs:\nchild:      %s %d %v %v\nin process: %s %d %v %v", what, i, g.Template, g.Line, g.Object, g.Manifest, w.Template, w.Line, w.Object, w.Manifest)
			}
		}
	}
	same("object", got.Objects, want.Objects)
	same("hook", got.Hooks, want.Hooks)
	if len(want.Objects) < 5 || len(want.Hooks) != 1 {
		t.Fatalf("%d objects, %d hooks", len(want.Objects), len(want.Hooks))
	}
	if !reflect.DeepEqual(got.Unsupported, want.Unsupported) || got.Notes != want.Notes {
		t.Errorf("child: %q %q; in process: %q %q", got.Unsupported, got.Notes, want.Unsupported, want.Notes)
	}
	var cm map[string]any
	for _, o := range got.Objects {
		if o.Key().Name == "cm" {
			cm, _ = o.Manifest["data"].(map[string]any)
		}
	}
	for k, v := range map[string]string{"printf": "5-true-int64-int", "found": `{"password":"c2VjcmV0"}`, "gen": "int64 4", "missing": "{}", "list": "2"} {
		if cm[k] != v {
			t.Errorf("data.%s = %q, want %q", k, cm[k], v)
		}
	}

	for name, tmpl := range map[string]string{
		"fail":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {x: {{ fail \"no\" }}}\n",
		"lookup": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {x: {{ lookup \"v1\" \"Broken\" \"\" \"x\" | quote }}}\n",
		"object": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n",
	} {
		bad := ordinaryChart()
		bad["templates/bad.yaml"] = tmpl
		_, werr := render(loadFiles(t, bad), opts)
		_, gerr := Render(loadFiles(t, bad), opts)
		if werr == nil || !reflect.DeepEqual(gerr, werr) {
			t.Errorf("%s: child error %#v, in process %#v", name, gerr, werr)
		}
	}
}

// exponentialChart doubles a string once per level of a named template
// that includes itself: 2^28 bytes from a few hundred.
func exponentialChart() map[string]string {
	return map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: boom\nversion: 0.1.0\n",
		"templates/_x.tpl":  `{{- define "x" -}}{{- if gt (int .) 0 -}}{{- $s := include "x" (sub . 1) -}}{{ $s }}{{ $s }}{{- else -}}a{{- end -}}{{- end -}}`,
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: boom}\ndata:\n  v: {{ include \"x\" 28 | quote }}\n",
	}
}

// TestRenderLimits: a chart over the memory limit and one over the time
// limit are refused naming the limit, each quickly.
func TestRenderLimits(t *testing.T) {
	start := time.Now()
	_, err := Render(loadFiles(t, exponentialChart()), Options{ReleaseName: "boom"})
	var rerr *Error
	if !errors.As(err, &rerr) || !strings.Contains(err.Error(), "rendering stopped: the chart used more than the render memory limit (32 MiB)") {
		t.Fatalf("exponential chart: %v", err)
	}
	t.Logf("exponential chart refused in %s: %v", time.Since(start).Round(time.Millisecond), err)

	slow := map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: slow\nversion: 0.1.0\n",
		"templates/cm.yaml": "{{- range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}\n",
	}
	start = time.Now()
	_, err = renderChild(loadFiles(t, slow), Options{ReleaseName: "slow"}, MaxRenderMemory, 2*time.Second)
	if !errors.As(err, &rerr) || !strings.Contains(err.Error(), "rendering stopped: the chart took longer than the render time limit (2s)") {
		t.Fatalf("slow chart: %v", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the slow chart was stopped after %s", took)
	}
}

// bigChart renders n ConfigMaps of about 1 KiB each.
func bigChart(n int) map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: big\nversion: 0.1.0\n",
		"values.yaml": fmt.Sprintf("count: %d\nfill: %s\n", n, strings.Repeat("x", 1000)),
		"templates/cms.yaml": `{{- range $i := until (int .Values.count) }}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm-{{ $i }}, labels: {app: big}}
data: {fill: {{ $.Values.fill | quote }}}
{{- end }}
`,
	}
}

// TestLargeChartFitsTheLimit: a release of 1,000 objects (1 MiB of YAML)
// renders within the render memory limit.
func TestLargeChartFitsTheLimit(t *testing.T) {
	res, err := Render(loadFiles(t, bigChart(1000)), Options{ReleaseName: "big", Namespace: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1000 {
		t.Fatalf("%d objects", len(res.Objects))
	}
}

// BenchmarkRender renders a 100-template chart in this process (the
// reference) and through the render child.
func BenchmarkRender(b *testing.B) {
	files := map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: bench\nversion: 1.0.0\n",
		"values.yaml":              "changed: a\nsize: small\n",
		"templates/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: {{ .Release.Namespace }}}\n",
	}
	for i := range 99 {
		files[fmt.Sprintf("templates/cm-%d.yaml", i)] = fmt.Sprintf(
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  labels: {app: bench}\ndata:\n  index: \"%d\"\n  value: {{ .Values.size | quote }}\n", i, i)
	}
	c := loadFiles(b, files)
	opts := Options{ReleaseName: "r", Namespace: "r"}
	b.Run("in-process", func(b *testing.B) {
		for b.Loop() {
			if _, err := render(c, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("child", func(b *testing.B) {
		for b.Loop() {
			if _, err := Render(c, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
}
