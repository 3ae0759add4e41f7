package app_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/helmrelease"
	"github.com/jetplane/jetplane/schemas"
)

// chartFiles is a one-template chart named name with extra files.
func chartFiles(name string, extra map[string]string) map[string]string {
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n",
		"values.yaml": "mode: slow\n",
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-settings
data:
  mode: {{ .Values.mode | quote }}
`,
	}
	for k, v := range extra {
		files[k] = v
	}
	return files
}

// groupVersions maps each child of the release to its resourceVersion.
func groupVersions(a *app.App) map[projections.Key]uint64 {
	objs, _ := a.Store().List(projections.Query{Group: helmrelease.Group(releaseKey)})
	out := map[projections.Key]uint64{}
	for _, o := range objs {
		out[projections.ObjectKey(o)] = o.GetMetadata().GetResourceVersion()
	}
	return out
}

// TestHelmReleaseBadInput: each bad chart or values is a clear error in
// the release's status, naming the template and line where there is one;
// nothing is applied and the previous revision's objects stay as they were.
func TestHelmReleaseBadInput(t *testing.T) {
	a, c := startApp(t, app.Config{})
	ctx := t.Context()
	push := func(name string, files map[string]string) {
		t.Helper()
		if _, err := c.PushChart(ctx, name, "0.1.0", testenv.Chart(t, files)); err != nil {
			t.Fatalf("push %s: %v", name, err)
		}
	}
	push("web", chartFiles("web", nil))
	push("broken", chartFiles("broken", map[string]string{"templates/broken.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: {{ .Values.mode | nosuchfunction }}\n"}))
	push("typed", chartFiles("typed", map[string]string{"values.schema.json": `{"type": "object", "properties": {"replicas": {"type": "integer"}}}`}))
	push("invalid", chartFiles("invalid", map[string]string{"templates/bad.yaml": "# the object's name is not DNS-1123\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Web_Settings\n"}))
	// A named template that includes itself and doubles the result: 2^30
	// bytes from a few hundred; rendering stops at the render memory limit.
	push("boom", chartFiles("boom", map[string]string{
		"templates/_x.tpl":    "{{- define \"x\" -}}{{- if gt (int .) 0 -}}{{- $s := include \"x\" (sub . 1) -}}{{ $s }}{{ $s }}{{- else -}}a{{- end -}}{{- end -}}",
		"templates/boom.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: boom}\ndata:\n  v: {{ include \"x\" 30 | quote }}\n",
	}))
	push("dangling", chartFiles("dangling", map[string]string{"templates/dep.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n  annotations: {jetplane.dev/depends-on: ConfigMap/missing}\n"}))

	spec := func(chart, version, values string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec:\n  chart: {name: %s, version: %q}\n  releaseNamespace: shop\n  values: %s\n", chart, version, values)
	}
	applyYAML(t, c, spec("web", "0.1.0", "{mode: fast}"))
	waitRelease(t, a, "revision 1 Ready", isReady)
	good := groupVersions(a)
	if len(good) != 1 {
		t.Fatalf("children: %v", good)
	}

	for _, tc := range []struct {
		name, release string
		phase         string
		want          []string
	}{
		{"template error", spec("broken", "0.1.0", "{}"), "Failed", []string{"broken/templates/broken.yaml:6", `function "nosuchfunction" not defined`}},
		{"values of the wrong type", spec("typed", "0.1.0", "{replicas: three}"), "Failed", []string{"values don't meet the specifications of the schema", "replicas", "want integer"}},
		{"values not an object", spec("web", "0.1.0", "[1, 2]"), "Failed", []string{"spec.values: must be an object (the chart's values), not a list"}},
		{"missing chart version", spec("web", "9.9.9", "{}"), "Error", []string{"spec.chart: web:9.9.9 has not been pushed; push it with `jetplane chart push PATH web:9.9.9`"}},
		{"invalid object", spec("invalid", "0.1.0", "{}"), "Failed", []string{"invalid/templates/bad.yaml:5", `metadata.name: "Web_Settings" is not a valid name`}},
		{"render over the memory limit", spec("boom", "0.1.0", "{}"), "Failed", []string{"rendering stopped: the chart used more than the render memory limit (32 MiB)"}},
		{"dangling depends-on", spec("dangling", "0.1.0", "{}"), "Failed", []string{"dangling/templates/dep.yaml:1", "annotation jetplane.dev/depends-on: ConfigMap/shop/missing is not rendered by this release"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			applyYAML(t, c, tc.release)
			rel := waitRelease(t, a, tc.name+" in status", func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == tc.phase })
			for _, w := range tc.want {
				if !strings.Contains(rel.GetStatus().GetMessage(), w) {
					t.Errorf("status message %q lacks %q", rel.GetStatus().GetMessage(), w)
				}
			}
			if got := groupVersions(a); fmt.Sprint(got) != fmt.Sprint(good) {
				t.Errorf("children changed: %v, want %v", got, good)
			}
		})
	}
	// A good spec again recovers.
	applyYAML(t, c, spec("web", "0.1.0", "{mode: fast}"))
	waitRelease(t, a, "Ready again", isReady)
	// A version not pushed yet is retried: pushing it completes the release.
	applyYAML(t, c, spec("web", "0.2.0", "{mode: later}"))
	waitRelease(t, a, "a missing version", func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Error" })
	if _, err := c.PushChart(ctx, "web", "0.2.0", testenv.Chart(t, chartFiles("web", nil))); err != nil {
		t.Fatal(err)
	}
	waitRelease(t, a, "Ready once the version is pushed", isReady)
}

// TestHelmRepository installs charts from a Helm HTTP repository (an
// index.yaml and packaged charts) by name and version.
func TestHelmRepository(t *testing.T) {
	charts := map[string][]byte{
		"web-0.1.0.tgz": testenv.Chart(t, chartFiles("web", nil)),
		"web-0.2.0.tgz": testenv.Chart(t, chartFiles("web", map[string]string{
			"Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.2.0\n", "values.yaml": "mode: second\n"})),
	}
	// Random bytes do not compress: three files of 4 MiB of hex pack to
	// more than the 4 MiB limit.
	noise := map[string]string{}
	for i := range 3 {
		b := make([]byte, 2<<20)
		_, _ = rand.Read(b)
		noise[fmt.Sprintf("files/noise%d", i)] = hex.EncodeToString(b)
	}
	charts["huge-1.0.0.tgz"] = testenv.Chart(t, chartFiles("huge", noise))
	index := "apiVersion: v1\nentries:\n"
	for _, name := range []string{"web", "huge"} {
		index += "  " + name + ":\n"
		for file, data := range charts {
			if !strings.HasPrefix(file, name+"-") {
				continue
			}
			version := strings.TrimSuffix(strings.TrimPrefix(file, name+"-"), ".tgz")
			sum := sha256.Sum256(data)
			index += fmt.Sprintf("  - {name: %s, version: %s, urls: [charts/%s], digest: %s}\n", name, version, file, hex.EncodeToString(sum[:]))
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repo/index.yaml", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(index)) })
	mux.HandleFunc("GET /repo/charts/{file}", func(w http.ResponseWriter, r *http.Request) {
		data, ok := charts[r.PathValue("file")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	})
	repo := httptest.NewServer(mux)
	t.Cleanup(repo.Close)

	a, c := startApp(t, app.Config{})
	spec := func(chart, version string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec:\n  chart: {name: %s, version: %q, repository: %q}\n  releaseNamespace: shop\n", chart, version, repo.URL+"/repo")
	}
	mode := func() string {
		cm := a.Store().Get(projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web-settings"})
		return cm.GetSpec().GetFields()["data"].GetStructValue().GetFields()["mode"].GetStringValue()
	}
	applyYAML(t, c, spec("web", "0.1.0"))
	waitRelease(t, a, "0.1.0 Ready", isReady)
	if m := mode(); m != "slow" {
		t.Fatalf("mode %q, want the 0.1.0 default slow", m)
	}
	applyYAML(t, c, spec("web", ">=0.1.0"))
	rel := waitRelease(t, a, "the highest match Ready", isReady)
	if m := mode(); m != "second" || !strings.Contains(rel.GetStatus().GetMessage(), "chart web 0.2.0") {
		t.Fatalf("mode %q, status %q; want 0.2.0's", m, rel.GetStatus().GetMessage())
	}
	applyYAML(t, c, spec("web", "0.3.0"))
	rel = waitRelease(t, a, "a missing version reported", func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Error" })
	if msg := rel.GetStatus().GetMessage(); !strings.Contains(msg, "has no version 0.3.0 of chart web (it has 0.1.0, 0.2.0)") {
		t.Fatalf("status: %q", msg)
	}
	applyYAML(t, c, spec("huge", "1.0.0"))
	rel = waitRelease(t, a, "a chart over the limit reported", func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Failed" })
	if msg := rel.GetStatus().GetMessage(); !strings.Contains(msg, "chart too large") {
		t.Fatalf("status: %q", msg)
	}
	if m := mode(); m != "second" {
		t.Fatalf("a failed revision changed the running one: mode %q", m)
	}
}

// TestHelmReleaseValuesFrom: values come from ConfigMaps and Secrets in
// order, inline values win, and a change of a values object renders the
// release again.
func TestHelmReleaseValuesFrom(t *testing.T) {
	a, c := startApp(t, app.Config{})
	if _, err := c.PushChart(t.Context(), "web", "0.1.0", testenv.Chart(t, chartFiles("web", nil))); err != nil {
		t.Fatal(err)
	}
	mode := func() string {
		cm := a.Store().Get(projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web-settings"})
		return cm.GetSpec().GetFields()["data"].GetStructValue().GetFields()["mode"].GetStringValue()
	}
	const rel = "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec:\n  chart: {name: web, version: 0.1.0}\n  releaseNamespace: shop\n  valuesFrom:\n  - {kind: ConfigMap, name: web-values}\n"
	applyYAML(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-values, namespace: apps}\ndata:\n  values.yaml: 'mode: cm'\n")
	applyYAML(t, c, rel)
	waitRelease(t, a, "Ready", isReady)
	if m := mode(); m != "cm" {
		t.Fatalf("mode %q, want cm", m)
	}
	applyYAML(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-values, namespace: apps}\ndata:\n  values.yaml: 'mode: cm2'\n")
	eventuallyApp(t, "the release follows its ConfigMap", func() bool { return mode() == "cm2" })
	// "mode: secret", base64.
	applyYAML(t, c, "apiVersion: v1\nkind: Secret\nmetadata: {name: web-secret, namespace: apps}\ndata:\n  values.yaml: bW9kZTogc2VjcmV0\n")
	applyYAML(t, c, rel+"  - {kind: Secret, name: web-secret}\n")
	eventuallyApp(t, "the Secret wins over the ConfigMap", func() bool { return mode() == "secret" })
	applyYAML(t, c, rel+"  - {kind: Secret, name: web-secret}\n  values: {mode: inline}\n")
	eventuallyApp(t, "inline values win", func() bool { return mode() == "inline" })
	applyYAML(t, c, rel+"  - {kind: Secret, name: absent}\n")
	o := waitRelease(t, a, "a missing values object reported", func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Error" })
	if msg := o.GetStatus().GetMessage(); !strings.Contains(msg, "spec.valuesFrom[1]: Secret apps/absent does not exist") {
		t.Fatalf("status: %q", msg)
	}
	applyYAML(t, c, rel+"  - {kind: Secret, name: absent, optional: true}\n")
	eventuallyApp(t, "an optional missing object is skipped", func() bool { return mode() == "cm2" })
}
