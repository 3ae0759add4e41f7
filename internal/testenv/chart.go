package testenv

import (
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
