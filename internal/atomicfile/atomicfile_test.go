package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// A secret written over a file anyone could read is readable by its
// owner only afterwards, and nothing is left beside it.
func TestWriteOverAReadableFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "widgets.creds")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new seed"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); string(b) != "new seed" {
		t.Fatalf("content %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files in the directory, want 1", len(ents))
	}
}
