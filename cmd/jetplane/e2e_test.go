package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/testenv"
)

// buildBinary builds the real jetplane binary once per test run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "jetplane")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int { return testenv.FreePort(t) }

type server struct {
	cmd *exec.Cmd
	url string
	log *syncBuffer // written by the process while the test reads it
}

// syncBuffer is a process's output, read while it writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve starts `jetplane serve` on dir and waits until /readyz answers.
func serve(t *testing.T, bin, dir string, extra ...string) *server {
	t.Helper()
	port := freePort(t)
	// No local node agent unless a test asks: its Node would be one more
	// object in every listing.
	args := append([]string{"serve", "--data", dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--nats-port", "-1", "--node=false"}, extra...)
	cmd := exec.Command(bin, args...)
	var log syncBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", port), log: &log}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	waitReady(t, s, 60*time.Second)
	return s
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, s *server, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("jetplane serve at %s not ready after %s; its log:\n%s", s.url, within, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("jetplane serve exited with %v; its log:\n%s", err, s.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("jetplane serve did not stop within 30s of SIGTERM")
	}
}

// run runs a client command against s and returns its stdout.
func run(t *testing.T, bin string, s *server, args ...string) string {
	t.Helper()
	out, err := runErr(bin, s, args...)
	if err != nil {
		t.Fatalf("jetplane %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func runErr(bin string, s *server, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--server", s.url, "--token", "s3cret")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

const threeManifests = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
  labels: {app: web}
data:
  LOG_LEVEL: info
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: flags
  namespace: shop
  labels: {app: web}
  dependsOn:
    - kind: ConfigMap
      name: settings
data:
  NEW_CHECKOUT: "true"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {app: web}
spec:
  replicas: 3
`

type listOut struct {
	Items []struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	} `json:"items"`
}

func names(t *testing.T, out string) []string {
	t.Helper()
	var l listOut
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("bad list output: %v\n%s", err, out)
	}
	var n []string
	for _, it := range l.Items {
		n = append(n, it.Metadata.Name)
	}
	return n
}

type historyOut struct {
	Items []struct {
		Type     string `json:"type"`
		Actor    string `json:"actor"`
		Sequence string `json:"sequence"`
	} `json:"items"`
}

// TestEndToEnd drives the real binary: serve, apply three manifests, get and
// list them, delete one, read its history, restart on the same data, and
// find the same state and history.
func TestEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# token user\ns3cret alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	manifests := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(manifests, []byte(threeManifests), 0o644); err != nil {
		t.Fatal(err)
	}

	s := serve(t, bin, dir, "--token-file", tokens)
	out := run(t, bin, s, "apply", "-f", manifests)
	for _, want := range []string{"ConfigMap/shop/settings created", "ConfigMap/shop/flags created", "Deployment.apps/shop/web created"} {
		if !strings.Contains(out, want) {
			t.Fatalf("apply output lacks %q:\n%s", want, out)
		}
	}
	if out := run(t, bin, s, "apply", "-f", manifests); strings.Count(out, "unchanged") != 3 {
		t.Fatalf("second apply should change nothing:\n%s", out)
	}
	if got := names(t, run(t, bin, s, "get", "-o", "json")); fmt.Sprint(got) != "[flags settings web]" {
		t.Fatalf("get all = %v", got)
	}
	if got := names(t, run(t, bin, s, "get", "ConfigMap", "-n", "shop", "-l", "app=web", "-o", "json")); fmt.Sprint(got) != "[flags settings]" {
		t.Fatalf("get ConfigMap -l app=web = %v", got)
	}
	if out := run(t, bin, s, "get", "Deployment", "web", "-n", "shop", "-o", "yaml"); !strings.Contains(out, "replicas: 3") || !strings.Contains(out, "generation: \"1\"") {
		t.Fatalf("get Deployment web -o yaml:\n%s", out)
	}
	table := run(t, bin, s, "get")
	if !strings.Contains(table, "NAMESPACE") || !strings.Contains(table, "Deployment.apps") {
		t.Fatalf("get table:\n%s", table)
	}
	// Without a token the API refuses.
	if resp, err := http.Get(s.url + "/v1/objects"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated list: %v %v, want 401", resp.StatusCode, err)
	}

	run(t, bin, s, "delete", "ConfigMap/shop/flags")
	if got := names(t, run(t, bin, s, "get", "-o", "json")); fmt.Sprint(got) != "[settings web]" {
		t.Fatalf("after delete, get all = %v", got)
	}
	histJSON := run(t, bin, s, "history", "ConfigMap/shop/flags", "-o", "json")
	var h historyOut
	if err := json.Unmarshal([]byte(histJSON), &h); err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, ev := range h.Items {
		steps = append(steps, ev.Type+" by "+ev.Actor)
	}
	want := "[EVENT_TYPE_APPLIED by user/alice EVENT_TYPE_DELETE_REQUESTED by user/alice EVENT_TYPE_FINALIZED by jetplane/finalizer]"
	if fmt.Sprint(steps) != want {
		t.Fatalf("history = %v, want %s", steps, want)
	}
	histTable := run(t, bin, s, "history", "ConfigMap/shop/flags")
	if !strings.Contains(histTable, "DeleteRequested") || !strings.Contains(histTable, "user/alice") {
		t.Fatalf("history table:\n%s", histTable)
	}
	// As of the first apply's last event, all three objects existed.
	if got := names(t, run(t, bin, s, "state", "--at", "3", "-o", "json")); fmt.Sprint(got) != "[flags settings web]" {
		t.Fatalf("state --at 3 = %v", got)
	}
	before := run(t, bin, s, "get", "-o", "json")
	s.stop(t)

	s2 := serve(t, bin, dir, "--token-file", tokens)
	if after := run(t, bin, s2, "get", "-o", "json"); after != before {
		t.Fatalf("state changed across restart:\nbefore %s\nafter %s", before, after)
	}
	if after := run(t, bin, s2, "history", "ConfigMap/shop/flags", "-o", "json"); after != histJSON {
		t.Fatalf("history changed across restart:\nbefore %s\nafter %s", histJSON, after)
	}
	s2.stop(t)
}

// startNode runs a node agent, jetplane node NAME, in its own process:
// with a node credential made for it on data's store, against the
// embedded NATS on natsPort, with args added to its flags. It is killed
// when the test ends, unless it ended before.
func startNode(t *testing.T, bin, data string, natsPort int, name string, args ...string) *exec.Cmd {
	t.Helper()
	creds := filepath.Join(t.TempDir(), name+".creds")
	if out, err := exec.Command(bin, "creds", "create", "--data", data, "--role", "node", name, "-o", creds).CombinedOutput(); err != nil {
		t.Fatalf("creds create: %v\n%s", err, out)
	}
	node := exec.Command(bin, append([]string{"node", "--name", name, "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", natsPort),
		"--nats-creds", creds, "--heartbeat", "200ms", "--dir", t.TempDir()}, args...)...)
	var log syncBuffer
	node.Stdout, node.Stderr = &log, &log
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if node.ProcessState == nil {
			_ = node.Process.Kill()
			_ = node.Wait()
		}
	})
	return node
}
