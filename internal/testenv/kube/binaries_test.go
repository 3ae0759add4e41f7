package kubeenv

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A new build removes builds of the same binary unused for 30 days, and
// keeps recent ones, other binaries and builds in progress.
func TestPruneUnusedBuilds(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, age time.Duration) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keep := write("etcd-v3.5.21-aaaa", 0)
	write("etcd-v3.5.20-bbbb", 40*24*time.Hour)
	write("etcd-v3.5.20-bbbb.lock", 40*24*time.Hour)
	write("etcd-v3.5.21-cccc", 2*24*time.Hour)
	write("etcd-v3.5.19-dddd.tmp", 40*24*time.Hour)
	write("kube-apiserver-v1.36.3-eeee", 40*24*time.Hour)
	prune("etcd", keep, t.Logf)
	var left []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		left = append(left, e.Name())
	}
	want := []string{"etcd-v3.5.19-dddd.tmp", "etcd-v3.5.21-aaaa", "etcd-v3.5.21-cccc", "kube-apiserver-v1.36.3-eeee"}
	if !slices.Equal(left, want) {
		t.Fatalf("left %v, want %v", left, want)
	}
}
