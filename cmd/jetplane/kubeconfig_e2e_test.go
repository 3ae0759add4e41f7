package main_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

// TestKubeconfig writes a kubeconfig with `jetplane kubeconfig` and drives
// the server with kubectl through it.
func TestKubeconfig(t *testing.T) {
	kubectl, err := kubeenv.EnsureKubectl(context.Background(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	s := serve(t, bin, t.TempDir())
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if out, err := exec.Command(bin, "kubeconfig", "--server", s.url, "-n", "shop", "-o", path).CombinedOutput(); err != nil {
		t.Fatalf("jetplane kubeconfig: %v\n%s", err, out)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig file: %v %v", fi, err)
	}
	kc := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"--kubeconfig", path}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	kc(threeManifests, "apply", "-f", "-")
	// The context's namespace is the default one.
	if out := kc("", "get", "configmap", "settings", "-o", "jsonpath={.data.LOG_LEVEL}"); out != "info" {
		t.Fatalf("kubectl get: %q", out)
	}
	// What kubectl wrote, jetplane's CLI reads: one store, one shape.
	if out := run(t, bin, s, "get", "configmap/settings", "-n", "shop", "-o", "yaml"); !strings.Contains(out, "LOG_LEVEL: info") {
		t.Fatalf("jetplane get: %q", out)
	}

	// A server that is not there fails at once, with what to do.
	out, err := exec.Command(bin, "kubeconfig", "--server", "http://127.0.0.1:1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is 'jetplane serve' running there?") {
		t.Fatalf("kubeconfig of no server: %v\n%s", err, out)
	}
}
