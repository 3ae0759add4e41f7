package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// ChartDir writes a chart's files (path relative to the chart's root →
// content; Chart.yaml included) into a new temporary directory and returns
// the chart's directory.
func ChartDir(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "chart")
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// Chart packages a chart made of files (see ChartDir) as helm package
// does, and returns the .tgz.
func Chart(tb testing.TB, files map[string]string) []byte {
	tb.Helper()
	c, err := loader.LoadDir(ChartDir(tb, files))
	if err != nil {
		tb.Fatal(err)
	}
	path, err := chartutil.Save(c, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// ServeChartRepository serves chart, packaged (see Chart), as version of
// name in a Helm HTTP repository at prefix on mux: index.yaml with the
// chart's digest, and NAME-VERSION.tgz.
func ServeChartRepository(mux *http.ServeMux, prefix, name, version string, chart []byte) {
	sum := sha256.Sum256(chart)
	file := name + "-" + version + ".tgz"
	index := fmt.Sprintf("apiVersion: v1\nentries:\n  %s:\n  - {name: %s, version: %s, urls: [%s], digest: %s}\n",
		name, name, version, file, hex.EncodeToString(sum[:]))
	mux.HandleFunc("GET "+prefix+"/index.yaml", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(index)) })
	mux.HandleFunc("GET "+prefix+"/"+file, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(chart) })
}
