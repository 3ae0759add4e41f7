package deploy

import (
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImage builds an image with the tool scripts/image runs, from a small
// static binary built here, and checks the OCI layout: the digest printed
// is the layout's, the binary is static and at /jetplane, the user is not
// root, and a second build gives the same digest.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	image := func(out string) string {
		t.Helper()
		cmd := exec.Command("go", "-C", "../internal/tools/image", "run", ".", "--binary", bin, "--out", out, "--tag", "jetplane:test")
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("image tool: %v\n%s", err, b)
		}
		return strings.TrimSpace(string(b))
	}
	out := filepath.Join(dir, "layout")
	digest := image(out)
	if again := image(filepath.Join(dir, "again")); again != digest {
		t.Fatalf("two builds of one binary: %s and %s", digest, again)
	}
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	readJSON(t, filepath.Join(out, "index.json"), &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Digest != digest || index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "jetplane:test" {
		t.Fatalf("index.json: %+v, printed digest %s", index, digest)
	}
	var manifest struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	readJSON(t, blob(out, digest), &manifest)
	var config struct {
		OS     string `json:"os"`
		Config struct {
			User       string   `json:"User"`
			Entrypoint []string `json:"Entrypoint"`
		} `json:"config"`
	}
	readJSON(t, blob(out, manifest.Config.Digest), &config)
	if config.OS != "linux" || config.Config.User != "65532:65532" || strings.Join(config.Config.Entrypoint, " ") != "/jetplane" {
		t.Fatalf("config: %+v", config)
	}
	if len(manifest.Layers) != 1 {
		t.Fatalf("layers: %d, want one on an empty base", len(manifest.Layers))
	}
	// The binary the image was built from is static: no interpreter.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary asks for a dynamic loader; build with CGO_ENABLED=0")
		}
	}
}

func blob(layout, digest string) string {
	return filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
