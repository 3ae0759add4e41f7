package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A chart directory packages to the same bytes each time, so pushing it
// again is the same version.
func TestPackagedChartsAreReproducible(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	a, err := packageChart(dir)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // helm stamps entries with the second they are written
	b, err := packageChart(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("the same chart directory packaged to other bytes a second later")
	}
}
