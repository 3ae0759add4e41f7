package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeBuildsASchedulerPlugin builds the README's scheduler plugin
// as a reader would: its Go code in a module of its own, with the README's
// go.mod commands (the replace line pointing at this checkout) and build
// line. Modules come from the local module cache only (the repository's
// own build filled it), so the test needs no network.
func TestReadmeBuildsASchedulerPlugin(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	start := strings.Index(readme, "```go\n//go:build wasip1\n")
	if start < 0 {
		t.Fatal("README has no plugin code block")
	}
	code, _, _ := strings.Cut(readme[start+len("```go\n"):], "```")
	rest := readme[start:]
	var cmds []string
	for _, line := range strings.Split(rest, "\n") {
		if strings.HasPrefix(line, "go mod ") || strings.HasPrefix(line, "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared") {
			cmds = append(cmds, line)
		}
		if strings.HasPrefix(line, "GOOS=") {
			break
		}
	}
	if len(cmds) != 4 || !strings.Contains(cmds[1], "-replace github.com/jetplane/jetplane=../jetplane") {
		t.Fatalf("README's plugin build: %q, want go mod init, go mod edit with the replace line, go mod tidy, go build", cmds)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range cmds {
		c = strings.Replace(c, "=../jetplane", "="+root, 1)
		f := strings.Fields(c)
		var env []string
		for len(f) > 0 && strings.Contains(f[0], "=") {
			env, f = append(env, f[0]), f[1:]
		}
		cmd := exec.Command(f[0], f[1:]...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "GOPROXY=off", "GOSUMDB=off", "GOFLAGS="), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "onlyssd.wasm")); err != nil || st.Size() == 0 {
		t.Fatalf("onlyssd.wasm: %v", err)
	}
}
