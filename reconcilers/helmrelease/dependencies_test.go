package helmrelease_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/downloader"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/releaseutil"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/reconcilers/helmrelease"
)

// chartRepo is a Helm HTTP repository on 127.0.0.1: an index.yaml and
// the packaged charts it lists, with their digests.
type chartRepo struct {
	srv    *httptest.Server
	mu     sync.Mutex
	charts map[string][]byte // file name → archive
}

func newChartRepo(t *testing.T) *chartRepo {
	t.Helper()
	r := &chartRepo{charts: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repo/index.yaml", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, r.index()) })
	mux.HandleFunc("GET /repo/charts/{file}", func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		data, ok := r.charts[req.PathValue("file")]
		r.mu.Unlock()
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(data)
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *chartRepo) url() string { return r.srv.URL + "/repo" }

func (r *chartRepo) add(name, version string, archive []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.charts[name+"-"+version+".tgz"] = archive
}

func (r *chartRepo) index() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	byName := map[string][]string{}
	for file, data := range r.charts {
		name, version, _ := strings.Cut(strings.TrimSuffix(file, ".tgz"), "-")
		sum := sha256.Sum256(data)
		byName[name] = append(byName[name], fmt.Sprintf("  - {apiVersion: v2, name: %s, version: %s, urls: [charts/%s], digest: %s}\n", name, version, file, hex.EncodeToString(sum[:])))
	}
	out := "apiVersion: v1\nentries:\n"
	for name, entries := range byName {
		out += "  " + name + ":\n" + strings.Join(entries, "")
	}
	return out
}

// commonChart is a library-like subchart: a helper the parent includes,
// an object of its own, and defaults the parent overrides.
func commonChart(version string) map[string]string {
	return map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: common\nversion: " + version + "\n",
		"values.yaml": "greeting: hello\nsize: small\n",
		"templates/_helpers.tpl": `{{- define "common.labels" -}}
app.kubernetes.io/part-of: {{ .Release.Name }}
common.example/version: "` + version + `"
{{- end -}}`,
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-common
  labels: {{- include "common.labels" . | nindent 4 }}
data:
  greeting: {{ .Values.greeting | quote }}
  size: {{ .Values.size | quote }}
  parent: {{ .Values.global.parent | default "none" | quote }}
`,
	}
}

func webWithDependency(repository, constraint string) map[string]string {
	return map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n- name: common\n  version: " + constraint +
			"\n  repository: " + repository + "\n",
		"values.yaml": "common:\n  greeting: hi\nglobal:\n  parent: web\n",
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-settings
  labels: {{- include "common.labels" . | nindent 4 }}
data:
  mode: fast
`,
	}
}

// helmDependencyUpdate vendors the chart in dir's dependencies with
// helm's own downloader, as `helm dependency update` does: charts/ and
// Chart.lock.
func helmDependencyUpdate(t *testing.T, dir string) {
	t.Helper()
	home := t.TempDir()
	settings := cli.New()
	settings.RepositoryConfig = filepath.Join(home, "repositories.yaml")
	settings.RepositoryCache = filepath.Join(home, "cache")
	m := &downloader.Manager{
		Out: io.Discard, ChartPath: dir, Getters: getter.All(settings),
		RepositoryConfig: settings.RepositoryConfig, RepositoryCache: settings.RepositoryCache,
	}
	if err := m.Update(); err != nil {
		t.Fatalf("helm dependency update: %v", err)
	}
}

// helmTemplate renders c with the helm library, as helm template does,
// and returns its manifests by kind/name.
func helmTemplate(t *testing.T, c *chart.Chart) map[string]map[string]any {
	t.Helper()
	install := action.NewInstall(&action.Configuration{})
	install.ClientOnly, install.DryRun, install.ReleaseName, install.Namespace = true, true, "web", "shop"
	install.KubeVersion, _ = chartutil.ParseKubeVersion(render.DefaultKubeVersion)
	rel, err := install.Run(c, map[string]any{})
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	out := map[string]map[string]any{}
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		var m map[string]any
		if err := sigsyaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		md, _ := m["metadata"].(map[string]any)
		out[fmt.Sprintf("%s/%s", m["kind"], md["name"])] = m
	}
	return out
}

func manifests(t *testing.T, c *chart.Chart) map[string]map[string]any {
	t.Helper()
	res, err := render.Render(c, render.Options{ReleaseName: "web", Namespace: "shop"})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	out := map[string]map[string]any{}
	for _, o := range res.Objects {
		md, _ := o.Manifest["metadata"].(map[string]any)
		out[fmt.Sprintf("%s/%s", o.Manifest["kind"], md["name"])] = o.Manifest
	}
	return out
}

// TestVendorDependencies: a chart whose dependency lives in a Helm HTTP
// repository renders, fetched by jetplane, as helm renders it vendored by
// helm's own `helm dependency update`; Chart.lock pins the version a
// newer one in the repository would otherwise replace.
func TestVendorDependencies(t *testing.T) {
	repo := newChartRepo(t)
	repo.add("common", "1.2.0", testenv.Chart(t, commonChart("1.2.0")))
	dir := testenv.ChartDir(t, webWithDependency(repo.url(), `"^1.0.0"`))
	helmDependencyUpdate(t, dir)
	vendored, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if vendored.Lock == nil || len(vendored.Dependencies()) != 1 {
		t.Fatalf("helm dependency update left lock %v and %d subcharts", vendored.Lock, len(vendored.Dependencies()))
	}
	want := helmTemplate(t, vendored)
	if len(want) != 2 {
		t.Fatalf("helm rendered %d objects, want web-settings and web-common: %v", len(want), want)
	}

	// A newer version matching the constraint appears; the lock still
	// pins 1.2.0.
	repo.add("common", "1.3.0", testenv.Chart(t, commonChart("1.3.0")))
	if err := os.RemoveAll(filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	c, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := render.Render(c, render.Options{ReleaseName: "web"}); err == nil || !strings.Contains(err.Error(), "found in Chart.yaml, but missing in charts/ directory: common") {
		t.Fatalf("before fetching: %v, want helm's message", err)
	}
	deps, err := helmrelease.Vendor(t.Context(), nil, c, "")
	if err != nil {
		t.Fatalf("vendor: %v", err)
	}
	if fmt.Sprint(deps.Versions) != "[common 1.2.0]" {
		t.Fatalf("fetched %v, want the locked common 1.2.0", deps.Versions)
	}
	got := manifests(t, c)
	for key, w := range want {
		if g, ok := got[key]; !ok || !subsetOf(w, g) {
			t.Errorf("%s:\njetplane %v\n    helm %v", key, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("jetplane rendered %d objects, helm %d", len(got), len(want))
	}

	// Without the lock the highest match wins.
	if err := os.Remove(filepath.Join(dir, "Chart.lock")); err != nil {
		t.Fatal(err)
	}
	c, err = loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if deps, err = helmrelease.Vendor(t.Context(), nil, c, ""); err != nil || fmt.Sprint(deps.Versions) != "[common 1.3.0]" {
		t.Fatalf("without a lock: %v, %v; want common 1.3.0", deps.Versions, err)
	}
	if v := manifests(t, c)["ConfigMap/web-settings"]["metadata"].(map[string]any)["labels"].(map[string]any)["common.example/version"]; v != "1.3.0" {
		t.Fatalf("rendered with common %v, want 1.3.0", v)
	}
}

// subsetOf says every field of want is in got with the same value: helm's
// manifests are compared with jetplane's, which add the namespace.
func subsetOf(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wm {
		if !subsetOf(v, gm[k]) {
			return false
		}
	}
	return true
}

// TestVendorDependenciesRefused: a repository that does not answer, a
// repository named by a `helm repo add` name, a Chart.lock out of step
// with Chart.yaml: each is refused with helm's message and why.
func TestVendorDependenciesRefused(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + "/repo"
	down.Close()
	repo := newChartRepo(t)
	repo.add("common", "1.2.0", testenv.Chart(t, commonChart("1.2.0")))
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"unreachable", webWithDependency(downURL, `"^1.0.0"`),
			[]string{"found in Chart.yaml, but missing in charts/ directory: common", "fetching common ^1.0.0: repository " + downURL + `: Get "` + downURL + `/index.yaml"`}},
		{"no such version", webWithDependency(repo.url(), `"^2.0.0"`),
			[]string{"missing in charts/ directory: common", "has no version ^2.0.0 of chart common (it has 1.2.0)"}},
		{"bad constraint", webWithDependency(repo.url(), `"not a version"`),
			[]string{"missing in charts/ directory: common", `common: version "not a version"`}},
		{"repository name", webWithDependency(`"@stable"`, `"^1.0.0"`),
			[]string{"missing in charts/ directory: common", `repository "@stable" is not an http(s) URL jetplane can fetch from`}},
		{"lock out of sync", func() map[string]string {
			f := webWithDependency(repo.url(), `"^1.0.0"`)
			f["Chart.lock"] = "dependencies:\n- {name: common, repository: " + repo.url() + ", version: 1.2.0}\ndigest: sha256:0000\ngenerated: \"2026-01-01T00:00:00Z\"\n"
			return f
		}(), []string{"Chart.lock: the lock file (Chart.lock) is out of sync with the dependencies file (Chart.yaml). Please update the dependencies"}},
		{"requirements.lock out of sync", map[string]string{
			"Chart.yaml":        "apiVersion: v1\nname: web\nversion: 0.1.0\n",
			"requirements.yaml": "dependencies:\n- {name: common, version: ^1.0.0, repository: \"" + repo.url() + "\"}\n",
			"requirements.lock": "dependencies:\n- {name: common, repository: \"" + repo.url() + "\", version: 1.2.0}\ndigest: sha256:0000\ngenerated: \"2026-01-01T00:00:00Z\"\n",
		}, []string{"requirements.lock: the lock file (requirements.lock) is out of sync with the dependencies file (requirements.yaml)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loader.LoadDir(testenv.ChartDir(t, tt.files))
			if err != nil {
				t.Fatal(err)
			}
			_, err = helmrelease.Vendor(t.Context(), nil, c, "")
			if err == nil {
				t.Fatal("vendored")
			}
			t.Log(err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestVendorDependencyAliases: one chart named twice under two aliases is
// fetched once and rendered twice, as helm renders it vendored by helm.
func TestVendorDependencyAliases(t *testing.T) {
	repo := newChartRepo(t)
	repo.add("named", "1.0.0", testenv.Chart(t, map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: named\nversion: 1.0.0\n",
		"values.yaml":              "size: small\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Chart.Name }}\ndata:\n  size: {{ .Values.size | quote }}\n",
	}))
	dir := testenv.ChartDir(t, map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n" +
			"- {name: named, alias: first, version: 1.0.0, repository: \"" + repo.url() + "\"}\n" +
			"- {name: named, alias: second, version: 1.0.0, repository: \"" + repo.url() + "\"}\n",
		"values.yaml": "second:\n  size: large\n",
	})
	helmDependencyUpdate(t, dir)
	vendored, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := helmTemplate(t, vendored)
	if err := os.RemoveAll(filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	c, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := helmrelease.Vendor(t.Context(), nil, c, ""); err != nil {
		t.Fatalf("vendor: %v", err)
	}
	got := manifests(t, c)
	if len(want) != 2 || len(got) != len(want) {
		t.Fatalf("jetplane %v\nhelm %v", got, want)
	}
	for key, w := range want {
		if g, ok := got[key]; !ok || !subsetOf(w, g) {
			t.Errorf("%s:\njetplane %v\n    helm %v", key, g, w)
		}
	}
}

// TestVendorRequirementsLock: a chart of apiVersion v1 names its
// dependencies in requirements.yaml; the requirements.lock helm writes
// for it pins the version, as Chart.lock does.
func TestVendorRequirementsLock(t *testing.T) {
	repo := newChartRepo(t)
	repo.add("common", "1.2.0", testenv.Chart(t, commonChart("1.2.0")))
	files := webWithDependency(repo.url(), `"^1.0.0"`)
	files["Chart.yaml"] = "apiVersion: v1\nname: web\nversion: 0.1.0\n"
	files["requirements.yaml"] = "dependencies:\n- {name: common, version: ^1.0.0, repository: \"" + repo.url() + "\"}\n"
	dir := testenv.ChartDir(t, files)
	helmDependencyUpdate(t, dir)
	repo.add("common", "1.3.0", testenv.Chart(t, commonChart("1.3.0")))
	if err := os.RemoveAll(filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	c, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Lock == nil {
		t.Fatal("helm wrote no requirements.lock")
	}
	deps, err := helmrelease.Vendor(t.Context(), nil, c, "")
	if err != nil || fmt.Sprint(deps.Versions) != "[common 1.2.0]" {
		t.Fatalf("vendor: %v, %v; want the locked common 1.2.0", deps.Versions, err)
	}
}

// TestVendorLocalDependency: a file:// dependency of a chart read from a
// directory is read from the path relative to it, and renders as helm
// renders it vendored by helm; without the directory it is refused.
func TestVendorLocalDependency(t *testing.T) {
	root := t.TempDir()
	write := func(dir string, files map[string]string) {
		for name, content := range files {
			p := filepath.Join(root, dir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("common", commonChart("1.2.0"))
	write("web", webWithDependency("file://../common", `"~1.2"`))
	dir := filepath.Join(root, "web")
	load := func() *chart.Chart {
		t.Helper()
		c, err := loader.LoadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := helmrelease.Vendor(t.Context(), nil, load(), ""); err == nil || !strings.Contains(err.Error(), `repository "file://../common" is not an http(s) URL`) {
		t.Fatalf("file:// without the chart's directory: %v", err)
	}
	c := load()
	if deps, err := helmrelease.Vendor(t.Context(), nil, c, dir); err != nil || fmt.Sprint(deps.Versions) != "[common 1.2.0]" {
		t.Fatalf("vendor: %v, %v", deps.Versions, err)
	}
	got := manifests(t, c)

	helmDependencyUpdate(t, dir)
	want := helmTemplate(t, load())
	if len(want) != 2 || len(got) != len(want) {
		t.Fatalf("jetplane %v\nhelm %v", got, want)
	}
	for key, w := range want {
		if g, ok := got[key]; !ok || !subsetOf(w, g) {
			t.Errorf("%s:\njetplane %v\n    helm %v", key, g, w)
		}
	}

	write("web", webWithDependency("file://../common", `"^2.0.0"`))
	if err := os.RemoveAll(filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "Chart.lock")); err != nil {
		t.Fatal(err)
	}
	if _, err := helmrelease.Vendor(t.Context(), nil, load(), dir); err == nil || !strings.Contains(err.Error(), "holds version 1.2.0, not ^2.0.0") {
		t.Fatalf("a version the constraint refuses: %v", err)
	}
}
