package main_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/internal/testenv"
)

// TestTemplateDependencies: jetplane template fetches a dependency
// missing from charts/ from the repository Chart.yaml names, unless
// --offline, or reads it from a file:// path relative to the chart's
// directory; an unreachable repository is named in helm's message.
func TestTemplateDependencies(t *testing.T) {
	common := testenv.Chart(t, map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: common\nversion: 1.0.0\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-common\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
	})
	mux := http.NewServeMux()
	testenv.ServeChartRepository(mux, "/repo", "common", "1.0.0", common)
	repo := httptest.NewServer(mux)
	t.Cleanup(repo.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	chartDir := func(repository string) string {
		return testenv.ChartDir(t, map[string]string{
			"Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n- {name: common, version: \"1.x\", repository: \"" + repository + "\"}\n",
			"values.yaml": "common:\n  greeting: hi\n",
		})
	}
	bin := buildBinary(t)
	none := &server{url: "http://127.0.0.1:1"}

	dir := chartDir(repo.URL + "/repo")
	out, err := runErr(bin, none, "template", "web", dir, "-n", "shop")
	if err != nil || !strings.Contains(out, "name: from-common") || !strings.Contains(out, "greeting: hi") {
		t.Fatalf("template: %v\n%s", err, out)
	}
	out, err = runErr(bin, none, "template", "web", dir, "--offline")
	if err == nil || !strings.Contains(out, "found in Chart.yaml, but missing in charts/ directory: common") {
		t.Fatalf("template --offline: %v\n%s", err, out)
	}
	// file://, relative to the chart's directory.
	root := t.TempDir()
	for name, content := range map[string]string{
		"common/Chart.yaml":               "apiVersion: v2\nname: common\nversion: 1.0.0\n",
		"common/templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: local-common\n",
		"web/Chart.yaml":                  "apiVersion: v2\nname: web\nversion: 0.1.0\ndependencies:\n- {name: common, version: 1.x, repository: \"file://../common\"}\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err = runErr(bin, none, "template", "web", filepath.Join(root, "web"))
	if err != nil || !strings.Contains(out, "name: local-common") {
		t.Fatalf("template, file:// dependency: %v\n%s", err, out)
	}
	out, err = runErr(bin, none, "template", "web", chartDir(down.URL+"/repo"))
	if err == nil || !strings.Contains(out, "missing in charts/ directory: common") || !strings.Contains(out, "repository "+down.URL+"/repo") {
		t.Fatalf("template, repository down: %v\n%s", err, out)
	}
}
