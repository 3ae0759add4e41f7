package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
)

var partitionLine = regexp.MustCompile(`partition (taken|released).* partition=(\d+)`)

// held is the set of partitions a controller's log says it holds.
func held(log string) map[int]bool {
	out := map[int]bool{}
	for _, m := range partitionLine.FindAllStringSubmatch(log, -1) {
		p, _ := strconv.Atoi(m[2])
		out[p] = m[1] == "taken"
		if !out[p] {
			delete(out, p)
		}
	}
	return out
}

// buildModule builds a controller module of its own (a go.mod that
// requires jetplane through a replace) into a temporary directory.
func buildModule(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(dir))
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", dir, err, out)
	}
	return bin
}

// The controller example, built as its own module and run as two
// processes against jetplane serve: its objects become Ready in
// dependency order through a cloud that fails half its calls, every run
// shows in history, a SIGKILLed replica's partitions move to the other
// within 5 s with no key ever run twice at once, and deleting the tree
// deletes it in reverse order.
func TestControllerExample(t *testing.T) {
	const example = "../../deploy/examples/controller"
	bin := buildBinary(t)
	ctlBin := buildModule(t, example)
	dir := t.TempDir()
	port := freePort(t)
	s := serve(t, bin, dir, "--nats-port", fmt.Sprint(port))
	creds := filepath.Join(t.TempDir(), "cloud.creds")
	if out, err := exec.Command(bin, "creds", "create", "--data", dir, "--role", "controller",
		"--kinds", "Network.example.com,Cluster.example.com,App.example.com", "cloud", "-o", creds).CombinedOutput(); err != nil {
		t.Fatalf("creds create: %v\n%s", err, out)
	}
	cloudDir := t.TempDir()
	start := func(name string) (*exec.Cmd, *syncBuffer) {
		cmd := exec.Command(ctlBin, "--nats", fmt.Sprintf("nats://127.0.0.1:%d", port), "--creds", creds, "--instance", name,
			"--cloud-dir", cloudDir, "--fail-rate", "0.5", "--latency", "20ms", "--resync", "3s")
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		return cmd, out
	}
	a, aLog := start("a")
	b, bLog := start("b")
	waitUntil(t, 30*time.Second, "both replicas hold partitions", func() bool {
		return len(held(aLog.String())) > 0 && len(held(bLog.String())) > 0
	}, func() string { return "a:\n" + aLog.String() + "\nb:\n" + bLog.String() })

	run(t, bin, s, "apply", "-f", example+"/crds.yaml")
	run(t, bin, s, "apply", "-f", example+"/tree.yaml")
	c := &api.Client{BaseURL: s.url}
	keys := []api.Key{
		{Kind: "Network.example.com", Namespace: "infra", Name: "net1"},
		{Kind: "Cluster.example.com", Namespace: "infra", Name: "c1"},
		{Kind: "App.example.com", Namespace: "infra", Name: "web"},
		{Kind: "App.example.com", Namespace: "infra", Name: "api"},
	}
	allReady := func() bool {
		for _, k := range keys {
			if !ready(t, c, k) {
				return false
			}
		}
		return true
	}
	ops := func() string {
		b, _ := os.ReadFile(filepath.Join(cloudDir, "ops.log"))
		return string(b)
	}
	waitUntil(t, 60*time.Second, "every object Ready", allReady, ops)
	inOrder(t, ops(), "create network/infra/net1", "create cluster/infra/c1", "create app/infra/web")
	inOrder(t, ops(), "create cluster/infra/c1", "create app/infra/api")

	// Every step is in history, with the replica that made it; the
	// cloud's failures are there too, then the retry that succeeded.
	var hist strings.Builder
	for _, k := range keys {
		hist.WriteString(run(t, bin, s, "history", k.Kind+"/"+k.Namespace+"/"+k.Name, "-o", "json"))
	}
	for _, want := range []string{"reconciler/App.example.com@cloud/", "503 service unavailable", `"phase": "Ready"`} {
		if !strings.Contains(hist.String(), want) {
			t.Fatalf("history lacks %q:\n%s", want, hist.String())
		}
	}
	// The periodic forced re-run: objects are checked again (3 s here).
	creates := strings.Count(ops(), "create network/infra/net1")
	waitUntil(t, 30*time.Second, "a forced re-run of net1", func() bool {
		return strings.Count(ops(), "create network/infra/net1") > creates
	}, ops)

	// SIGKILL one replica: the other holds every partition within 5 s.
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	killed := time.Now()
	waitUntil(t, 20*time.Second, "b to hold all 16 partitions", func() bool { return len(held(bLog.String())) == 16 }, bLog.String)
	if took := time.Since(killed); took > 5*time.Second {
		t.Fatalf("take-over took %s, more than 5 s", took)
	}
	t.Logf("b held every partition %s after a was killed", time.Since(killed).Round(time.Millisecond))

	// Deleting the tree deletes it leaves first, the network last.
	run(t, bin, s, "delete", "-f", example+"/tree.yaml", "--wait", "--timeout", "60s")
	inOrder(t, ops(), "delete app/infra/web", "delete cluster/infra/c1", "delete network/infra/net1")
	inOrder(t, ops(), "delete app/infra/api", "delete cluster/infra/c1")
	if strings.Contains(ops(), "OVERLAP") {
		t.Fatalf("a key ran twice at once:\n%s", ops())
	}
	if err := b.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(); err != nil {
		t.Fatalf("b exited with %v:\n%s", err, bLog.String())
	}
}

// ready reports whether k's Ready condition is True.
func ready(t *testing.T, c *api.Client, k api.Key) bool {
	t.Helper()
	raw, err := c.Get(context.Background(), k)
	var he *api.APIError
	if errors.As(err, &he) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Status struct {
			Conditions []struct{ Type, Status string }
		}
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	for _, cond := range o.Status.Conditions {
		if cond.Type == "Ready" {
			return cond.Status == "True"
		}
	}
	return false
}

// inOrder fails unless each line's first occurrence in ops comes after
// the one before it.
func inOrder(t *testing.T, ops string, lines ...string) {
	t.Helper()
	at := -1
	for _, l := range lines {
		i := strings.Index(ops, l+"\n")
		if i < 0 || i < at {
			t.Fatalf("want %q in this order in the cloud's log:\n%s", lines, ops)
		}
		at = i
	}
}

func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool, show func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s:\n%s", what, show())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
