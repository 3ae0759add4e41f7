package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var headRE = regexp.MustCompile(`head ([0-9a-f]{64})`)

func headOf(t *testing.T, out string) string {
	t.Helper()
	m := headRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no head in %q", out)
	}
	return m[1]
}

func manyConfigMaps(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d, namespace: audit}\ndata: {i: \"%d\"}\n", i, i)
	}
	return b.String()
}

func firstBlock(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "jetstream", "*", "streams", "JP_EVENTS", "msgs", "1.blk"))
	if len(m) != 1 {
		t.Fatalf("block files of %s: %v", dir, m)
	}
	return m[0]
}

// jetplane verify through the server and offline agree on the head; a
// byte changed in the stopped files makes the offline verify print the
// first break and exit 1.
func TestVerifyCommand(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	s := serve(t, bin, dir, "--token-file", tokenFile(t))
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(manyConfigMaps(50)), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, bin, s, "apply", "-f", f)
	online := run(t, bin, s, "verify")
	if !strings.HasPrefix(online, "ok: sequences 1-") {
		t.Fatalf("verify through the server: %s", online)
	}
	s.stop(t)
	out, err := exec.Command(bin, "verify", "--data", dir).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok: ") {
		t.Fatalf("verify --data: %v\n%s", err, out)
	}
	if headOf(t, string(out)) == "" {
		t.Fatal("no head")
	}
	if out, err := exec.Command(bin, "verify", "--data", dir, "--from", "40").CombinedOutput(); err != nil || !strings.HasPrefix(string(out), "ok: ") {
		t.Fatalf("verify --data --from 40: %v\n%s", err, out)
	}
	blk := firstBlock(t, dir)
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x01
	if err := os.WriteFile(blk, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "verify", "--data", dir).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasPrefix(string(out), "broken: ") || !strings.Contains(string(out), "1.blk") {
		t.Fatalf("verify --data of a changed byte: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func tokenFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte("s3cret alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A node of a three-node cluster whose copy of the log is damaged while
// it is stopped finds the damage when it starts, moves its store aside,
// takes the log again from its peers, and comes back ready with every
// event: its verify passes with the same head as the others'.
func TestDamagedClusterNodeTakesLogFromPeers(t *testing.T) {
	bin := buildBinary(t)
	routePorts := []int{freePort(t), freePort(t), freePort(t)}
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	tokens := tokenFile(t)
	routeSecret := filepath.Join(t.TempDir(), "route-secret")
	if err := os.WriteFile(routeSecret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	ports := []int{freePort(t), freePort(t), freePort(t)}
	start := func(i int) *server {
		cmd := exec.Command(bin, "serve", "--data", dirs[i], "--listen", fmt.Sprintf("127.0.0.1:%d", ports[i]),
			"--nats-port", "-1", "--nats-name", fmt.Sprintf("n%d", i+1), "--nats-cluster", "jp",
			"--nats-cluster-listen", fmt.Sprintf("127.0.0.1:%d", routePorts[i]), "--nats-routes", strings.Join(routes, ","),
			"--nats-route-secret-file", routeSecret, "--replicas", "3", "--token-file", tokens, "--node=false")
		var log syncBuffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		return &server{cmd: cmd, url: fmt.Sprintf("http://127.0.0.1:%d", ports[i]), log: &log}
	}
	nodes := []*server{start(0), start(1), start(2)}
	for _, n := range nodes {
		waitReady(t, n, 3*time.Minute)
	}
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(manyConfigMaps(200)), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, bin, nodes[0], "apply", "-f", f)
	// Every node has chained the whole log before node 3 stops.
	var head string
	deadline := time.Now().Add(60 * time.Second)
	for {
		h0, e0 := runErr(bin, nodes[0], "verify")
		h2, e2 := runErr(bin, nodes[2], "verify")
		if e0 == nil && e2 == nil && headOf(t, h0) == headOf(t, h2) {
			head = headOf(t, h0)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes 1 and 3 never agreed on a head:\n%s\n%s", h0, h2)
		}
		time.Sleep(200 * time.Millisecond)
	}
	nodes[2].stop(t)

	blk := firstBlock(t, dirs[2])
	b, err := os.ReadFile(blk)
	if err != nil {
		t.Fatal(err)
	}
	copy(b[len(b)/2:], make([]byte, 64))
	if err := os.WriteFile(blk, b, 0o600); err != nil {
		t.Fatal(err)
	}
	nodes[2] = start(2)
	waitReady(t, nodes[2], 3*time.Minute)
	// Ready means its state holds the whole log it took again: a read
	// right after readiness finds every object.
	if n := strings.Count(run(t, bin, nodes[2], "get", "configmaps", "-n", "audit", "-o", "name"), "cm-"); n != 200 {
		t.Fatalf("node 3, ready, lists %d ConfigMaps, want 200", n)
	}
	if !strings.Contains(nodes[2].log.String(), "moved its store aside") {
		t.Fatalf("node 3 did not say it moved its damaged store aside:\n%s", nodes[2].log.String())
	}
	out := run(t, bin, nodes[2], "verify")
	if !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("verify on node 3 after it took the log again: %s", out)
	}
	// Every node's log hashes to the head node 3 had signed before the
	// damage.
	if h := headOf(t, run(t, bin, nodes[0], "verify")); h != headOf(t, out) || h != head {
		t.Fatalf("heads differ: before %s, node 1 %s, node 3 %s", head, h, out)
	}
	t.Logf("head before the damage %s; node 3 now: %s", head, out)
}
