package render

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

func loadChart(tb testing.TB, files map[string]string) *chart.Chart {
	tb.Helper()
	dir := tb.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	c, err := loader.LoadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// ordinaryChart has a subchart, values of every JSON type, a CRD, a
// Namespace, a hook, a Secret, NOTES.txt, .Files and tpl.
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
			"  printf: {{ printf \"%v-%v\" .Values.replicas .Values.enabled | quote }}\n  list: {{ join \",\" .Values.list | quote }}\n" +
			"  nested: {{ .Values.nested | toJson | quote }}\n  conf: {{ .Files.Get \"files/conf.ini\" | quote }}\n  tpl: {{ tpl .Values.greeting . | quote }}\n" +
			"  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n  apps: {{ .Capabilities.APIVersions.Has \"apps/v1\" | quote }}\n",
		"templates/secret.yaml":       "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {password: {{ .Values.name | b64enc }}}\n",
		"templates/hook.yaml":         "apiVersion: v1\nkind: Pod\nmetadata:\n  name: migrate\n  annotations: {helm.sh/hook: pre-install}\nspec: {containers: [{name: m, image: m:v1}]}\n",
		"templates/NOTES.txt":         "Installed {{ .Release.Name }} in {{ .Release.Namespace }}.\n",
		"charts/db/Chart.yaml":        "apiVersion: v2\nname: db\nversion: 0.1.0\n",
		"charts/db/values.yaml":       "size: 1\n",
		"charts/db/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db}\ndata: {size: {{ .Values.size | quote }}, release: {{ .Release.Name }}}\n",
	}
}

// TestIsolatedRenderIsIdentical renders an ordinary chart in this process
// and through the render child: the same objects, manifests, hooks and
// notes, and the same errors.
func TestIsolatedRenderIsIdentical(t *testing.T) {
	opts := Options{ReleaseName: "web", Namespace: "shop", Revision: 2, IsUpgrade: true,
		Values: map[string]any{"replicas": float64(5), "list": []any{"x"}}}
	want, err := render(loadChart(t, ordinaryChart()), opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Render(loadChart(t, ordinaryChart()), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Objects) != len(want.Objects) || len(want.Objects) < 4 {
		t.Fatalf("%d objects through the child, %d in process", len(got.Objects), len(want.Objects))
	}
	for i := range want.Objects {
		g, w := got.Objects[i], want.Objects[i]
		if g.Template != w.Template || g.Line != w.Line || !proto.Equal(g.Object, w.Object) || !reflect.DeepEqual(g.Manifest, w.Manifest) {
			t.Errorf("object %d differs:\nchild:      %s %d %v %v\nin process: %s %d %v %v", i, g.Template, g.Line, g.Object, g.Manifest, w.Template, w.Line, w.Object, w.Manifest)
		}
	}
	if !reflect.DeepEqual(got.Unsupported, want.Unsupported) || got.Notes != want.Notes {
		t.Errorf("child: %q %q; in process: %q %q", got.Unsupported, got.Notes, want.Unsupported, want.Notes)
	}

	bad := ordinaryChart()
	bad["templates/bad.yaml"] = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndata: {x: {{ fail \"no\" }}}\n"
	_, werr := render(loadChart(t, bad), opts)
	_, gerr := Render(loadChart(t, bad), opts)
	if werr == nil || !reflect.DeepEqual(gerr, werr) {
		t.Fatalf("child error %#v, in process %#v", gerr, werr)
	}
}

// bigChart renders n ConfigMaps of about 1 KiB each.
func bigChart(n int) map[string]string {
	files := map[string]string{
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
	return files
}

// TestLargeChartFitsTheLimit: a release of 2,500 objects (2.5 MiB of YAML)
// renders within the render memory limit.
func TestLargeChartFitsTheLimit(t *testing.T) {
	res, err := Render(loadChart(t, bigChart(2500)), Options{ReleaseName: "big", Namespace: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 2500 {
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
	c := loadChart(b, files)
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
