package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestThreeProcessCluster: three `jetplane serve` processes form a
// three-node JetStream cluster with an R3 log and no other software; a
// write through one is read through another, and the survivors go on after
// one is killed with SIGKILL.
func TestThreeProcessCluster(t *testing.T) {
	bin := buildBinary(t)
	routePorts := []int{freePort(t), freePort(t), freePort(t)}
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	manifests := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(manifests, []byte(threeManifests), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("s3cret alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The routes authenticate with a secret, as the chart's pods do.
	routeSecret := filepath.Join(t.TempDir(), "route-secret")
	if err := os.WriteFile(routeSecret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := make([]*server, 3)
	for i := range nodes {
		port := freePort(t)
		cmd := exec.Command(bin, "serve", "--data", t.TempDir(), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
			"--nats-port", "-1", "--nats-name", fmt.Sprintf("n%d", i+1), "--nats-cluster", "jp",
			"--nats-cluster-listen", fmt.Sprintf("127.0.0.1:%d", routePorts[i]), "--nats-routes", strings.Join(routes, ","),
			"--nats-route-secret-file", routeSecret, "--replicas", "3", "--token-file", tokens, "--node=false")
		var log syncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		nodes[i] = &server{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), log: &log}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
	}
	began := time.Now()
	for _, n := range nodes {
		waitReady(t, n, 3*time.Minute)
	}
	t.Logf("cluster ready in %s", time.Since(began).Round(time.Millisecond))
	out := run(t, bin, nodes[0], "apply", "-f", manifests)
	if strings.Count(out, "created") != 3 {
		t.Fatalf("apply through node 1:\n%s", out)
	}
	// Every node folds the same replicated log.
	for i, n := range nodes {
		eventuallyNames(t, bin, n, "[flags settings web]", fmt.Sprintf("node %d", i+1))
	}
	if err := nodes[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = nodes[0].cmd.Wait()
	// The survivors keep a quorum: writes and reads go on.
	killed := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := runErr(bin, nodes[1], "delete", "ConfigMap/shop/flags")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delete through node 2 after node 1 died: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("write through a survivor %s after the kill", time.Since(killed).Round(time.Millisecond))
	eventuallyNames(t, bin, nodes[2], "[settings web]", "node 3")
}

func eventuallyNames(t *testing.T, bin string, s *server, want, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := runErr(bin, s, "get", "-o", "json")
		if err == nil && fmt.Sprint(names(t, out)) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s lists %s (err %v), want %s", what, out, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
