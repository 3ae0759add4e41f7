package workload_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/schemas"
)

// kubectlAt runs kubectl v1.36.3 (built from source, cached) against c's
// Kubernetes API, without credentials (the cluster takes none).
func kubectlAt(t *testing.T, c *cluster) func(stdin string, args ...string) (string, error) {
	t.Helper()
	bin, err := kubeenv.EnsureKubectl(context.Background(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: jetplane, cluster: {server: %q}}]
users: [{name: me, user: {}}]
contexts: [{name: jetplane, context: {cluster: jetplane, user: me, namespace: default}}]
current-context: jetplane
`, c.app.URL())
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(stdin string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+filepath.Join(dir, "cache"))
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// TestKubectlRolloutStatus follows a Deployment's rollouts with kubectl
// rollout status, which reads observedGeneration, the replica counts and
// the Progressing condition the workload reconciler reports.
func TestKubectlRolloutStatus(t *testing.T) {
	c := startCluster(t, nil)
	kubectl := kubectlAt(t, c)
	if out, err := kubectl(deploymentYAML(2, "module:v1", "a"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	rollout := func(what string) string {
		t.Helper()
		out, err := kubectl("", "rollout", "status", "deployment/web", "--timeout=2m")
		if err != nil || !strings.Contains(out, `deployment "web" successfully rolled out`) {
			t.Fatalf("rollout status (%s): %v\n%s", what, err, out)
		}
		return out
	}
	rollout("first rollout")
	c.waitRunning(webKey, 2, time.Minute, nil)
	if out, err := kubectl(deploymentYAML(2, "module:v2", "b"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply v2: %v\n%s", err, out)
	}
	out := rollout("new template")
	if !strings.Contains(out, "Waiting for deployment \"web\" rollout to finish") {
		t.Logf("rollout status did not wait (the rollout was done first):\n%s", out)
	}
	c.waitRunning(webKey, 2, time.Minute, func(p *schemas.Object) bool { return argsOf(p) == "serve b" })
	if out, err := kubectl("", "scale", "deployment/web", "--replicas=3"); err != nil || !strings.Contains(out, "deployment.apps/web scaled") {
		t.Fatalf("scale: %v\n%s", err, out)
	}
	rollout("scaled")
	c.waitRunning(webKey, 3, time.Minute, nil)
	if out, err := kubectl("", "get", "deployment", "web", "-o", "jsonpath={.status.observedGeneration} {.metadata.generation} {.status.updatedReplicas} {.status.availableReplicas}"); err != nil || out != "3 3 3 3" {
		t.Fatalf("status: %v\n%s", err, out)
	}
}
