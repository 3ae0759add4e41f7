package controller_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's "Write a controller" snippet builds as a module of its own
// that requires jetplane (the example's go.mod, with its replace pointing
// at this checkout).
func TestReadmeControllerBuilds(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Write a controller\n")
	if !ok {
		t.Fatal(`README.md has no "Write a controller" section`)
	}
	_, code, ok := strings.Cut(section, "```go\n")
	if ok {
		code, _, ok = strings.Cut(code, "```")
	}
	if !ok {
		t.Fatal(`"Write a controller" has no Go snippet`)
	}
	if n := strings.Count(code, "\n"); n > 60 {
		t.Errorf("the snippet has %d lines; it is meant to be short", n)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	example := filepath.Join(root, "deploy", "examples", "controller")
	mod, err := os.ReadFile(filepath.Join(example, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(example, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	gomod := strings.Replace(string(mod), "module example.com/cloudctl", "module example.com/readme", 1)
	gomod = strings.Replace(gomod, "=> ../../..", "=> "+root, 1)
	dir := t.TempDir()
	for name, data := range map[string]string{"main.go": code, "go.mod": gomod, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "readme"), ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the README's controller: %v\n%s\n%s", err, out, code)
	}
}
