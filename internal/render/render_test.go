package render_test

import (
	"errors"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
)

func load(t *testing.T, files map[string]string) *render.Result {
	t.Helper()
	res, err := renderFiles(t, files, render.Options{ReleaseName: "web", Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func renderFiles(t *testing.T, files map[string]string, opts render.Options) (*render.Result, error) {
	t.Helper()
	if _, ok := files["Chart.yaml"]; !ok {
		files["Chart.yaml"] = "apiVersion: v2\nname: web\nversion: 0.1.0\n"
	}
	c, err := loader.LoadDir(testenv.ChartDir(t, files))
	if err != nil {
		t.Fatal(err)
	}
	return render.Render(c, opts)
}

func keys(res *render.Result) []string {
	var out []string
	for _, o := range res.Objects {
		out = append(out, o.Key().String())
	}
	return out
}

func TestOrderAndDependencies(t *testing.T) {
	res := load(t, map[string]string{
		"crds/widget.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: widgets.example.com}\n",
		"templates/all.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {jetplane.dev/depends-on: "ConfigMap/settings, Secret/shop/token"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
---
apiVersion: v1
kind: Secret
metadata: {name: token}
---
apiVersion: v1
kind: Namespace
metadata: {name: {{ .Release.Namespace }}}
`,
	})
	want := "CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com Namespace/shop Secret/shop/token ConfigMap/shop/settings Deployment.apps/shop/web"
	if got := strings.Join(keys(res), " "); got != want {
		t.Fatalf("order:\n got %s\nwant %s", got, want)
	}
	deps := func(i int) string {
		var out []string
		for _, d := range res.Objects[i].Object.GetMetadata().GetDependsOn() {
			out = append(out, projections.KeyOf(d).String())
		}
		return strings.Join(out, " ")
	}
	if got := deps(4); got != "CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com Namespace/shop ConfigMap/shop/settings Secret/shop/token" {
		t.Fatalf("deployment dependsOn: %s", got)
	}
	if got := deps(1); got != "" {
		t.Fatalf("namespace dependsOn: %q", got)
	}
	if ns := res.Objects[3].Manifest["metadata"].(map[string]any)["namespace"]; ns != "shop" {
		t.Fatalf("a manifest without a namespace gets the release's: %v", ns)
	}
}

func TestHooksAreReported(t *testing.T) {
	res := load(t, map[string]string{
		"templates/job.yaml":   "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations: {helm.sh/hook: pre-install}\n",
		"templates/test.yaml":  "apiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n  annotations: {helm.sh/hook: test}\nspec:\n  containers: [{name: smoke, image: smoke:1}]\n",
		"templates/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"templates/NOTES.txt":  "thanks for installing {{ .Release.Name }}",
		"templates/_help.tpl":  "{{ define \"x\" }}y{{ end }}",
		"templates/empty.yaml": "# nothing\n",
	})
	if got := strings.Join(keys(res), " "); got != "ConfigMap/shop/a" {
		t.Fatalf("objects: %s", got)
	}
	want := "web/templates/job.yaml: Job.batch/shop/migrate (pre-install); web/templates/test.yaml: Pod/shop/smoke (test)"
	if got := strings.Join(res.Unsupported, "; "); got != want {
		t.Fatalf("unsupported:\n got %s\nwant %s", got, want)
	}
	if res.Notes != "thanks for installing web" {
		t.Fatalf("notes: %q", res.Notes)
	}
}

func TestCapabilities(t *testing.T) {
	files := map[string]string{"templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: caps}
data:
  version: {{ .Capabilities.KubeVersion.Version | quote }}
  widgets: {{ .Capabilities.APIVersions.Has "example.com/v1/Widget" | quote }}
  revision: {{ .Release.Revision | quote }}
  upgrade: {{ .Release.IsUpgrade | quote }}
`}
	data := func(res *render.Result) map[string]any {
		return res.Objects[0].Manifest["data"].(map[string]any)
	}
	d := data(load(t, files))
	if d["version"] != render.DefaultKubeVersion || d["widgets"] != "false" || d["revision"] != "1" || d["upgrade"] != "false" {
		t.Fatalf("defaults: %v", d)
	}
	res, err := renderFiles(t, files, render.Options{ReleaseName: "web", Namespace: "shop", Revision: 3, IsUpgrade: true,
		KubeVersion: "v1.35.1", APIVersions: []string{"v1", "example.com/v1", "example.com/v1/Widget"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := data(res); d["version"] != "v1.35.1" || d["widgets"] != "true" || d["revision"] != "3" || d["upgrade"] != "true" {
		t.Fatalf("from a cluster: %v", d)
	}
	files["Chart.yaml"] = "apiVersion: v2\nname: web\nversion: 0.1.0\nkubeVersion: '>=1.40.0-0'\n"
	if _, err := renderFiles(t, files, render.Options{}); err == nil || !strings.Contains(err.Error(), "Chart.yaml: kubeVersion: chart requires >=1.40.0-0; the target is v1.36.3") {
		t.Fatalf("kubeVersion constraint: %v", err)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  map[string]string
		values map[string]any
		want   string
	}{
		{"parse error", map[string]string{"templates/a.yaml": "x: {{ .Values.a "}, nil, "web/templates/a.yaml:1"},
		{"required value", map[string]string{"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ required \"name is required\" .Values.name }}\n"}, nil, "web/templates/a.yaml:4:11"},
		{"not YAML", map[string]string{"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n\tkey: [\n"}, nil, "web/templates/a.yaml:5"},
		{"invalid name", map[string]string{"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name}\n"}, nil, `web/templates/a.yaml:3: metadata.name: "Bad_Name" is not a valid name`},
		{"template line", map[string]string{"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\n{{- if true }}\n{{- end }}\nmetadata:\n  name: {{ \"Bad_Name\" }}\n"}, nil, `web/templates/a.yaml:6: metadata.name`},
		{"YAML error line", map[string]string{"templates/a.yaml": "{{- /* a comment */}}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {{ \"[\" }}\n"}, nil, `web/templates/a.yaml:6: invalid YAML`},
		{"duplicate", map[string]string{"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "templates/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"}, nil, "web/templates/b.yaml:1: ConfigMap/shop/a is also rendered by web/templates/a.yaml:1"},
		{"bad reference", map[string]string{"templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations: {jetplane.dev/depends-on: nonsense}\n"}, nil, "write Kind/name or Kind/namespace/name"},
		{"schema", map[string]string{"values.schema.json": `{"properties": {"replicas": {"type": "integer"}}}`, "templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"}, map[string]any{"replicas": "two"}, "values: values don't meet the specifications"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderFiles(t, tc.files, render.Options{ReleaseName: "web", Namespace: "shop", Values: tc.values})
			var rerr *render.Error
			if !errors.As(err, &rerr) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want a *render.Error containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadLimit(t *testing.T) {
	if _, err := render.Load(make([]byte, render.MaxChartBytes+1)); !errors.Is(err, render.ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := render.Load([]byte("not a tgz")); err == nil {
		t.Fatal("garbage loaded")
	}
}

// A chart's Pods are jetplane's to run unless the release names a
// cluster; hooks and tests are set aside before any check, as helm sets
// them aside.
func TestPodRulesOnlyForPodsJetplaneRuns(t *testing.T) {
	files := map[string]string{
		"templates/pod.yaml": `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: web, image: web:1}]
  volumes: [{name: conf, configMap: {name: conf}}]
`,
		"templates/tests/test.yaml": `apiVersion: v1
kind: Pod
metadata:
  name: web-test
  annotations: {helm.sh/hook: test}
spec:
  containers: [{name: t, image: busybox, volumeMounts: [{name: conf, mountPath: /c}]}]
  volumes: [{name: conf, configMap: {name: conf}}]
`,
	}
	_, err := renderFiles(t, files, render.Options{ReleaseName: "web", Namespace: "shop"})
	if err == nil || !strings.Contains(err.Error(), "web/templates/pod.yaml:6: spec.volumes[0]") || !strings.Contains(err.Error(), "jetplane runs this Pod itself") {
		t.Fatalf("a Pod jetplane runs: %v", err)
	}
	res, err := renderFiles(t, files, render.Options{ReleaseName: "web", Namespace: "shop", ForCluster: true})
	if err != nil {
		t.Fatalf("bound for a cluster: %v", err)
	}
	if got := strings.Join(keys(res), " "); got != "Pod/shop/web" || len(res.Hooks) != 1 || res.Hooks[0].Key().String() != "Pod/shop/web-test" {
		t.Fatalf("objects %s, hooks %v", got, res.Hooks)
	}
	delete(files, "templates/pod.yaml")
	if _, err := renderFiles(t, files, render.Options{ReleaseName: "web", Namespace: "shop"}); err != nil {
		t.Fatalf("a test hook is not checked as a Pod jetplane runs: %v", err)
	}
}
