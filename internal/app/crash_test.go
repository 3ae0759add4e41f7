package app_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/reconcilers"
)

// buildProbe builds the probe binary: jetplane with a recording reconciler.
func buildProbe(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "probe")
	if out, err := exec.Command("go", "build", "-o", bin, "../testenv/probe").CombinedOutput(); err != nil {
		t.Fatalf("go build probe: %v\n%s", err, out)
	}
	return bin
}

// startProbe starts the probe and returns a client for its API.
func startProbe(t *testing.T, bin string, args ...string) (*exec.Cmd, *api.Client) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("probe did not print its address: %v", err)
	}
	c := &api.Client{BaseURL: strings.TrimSpace(line)}
	eventuallyApp(t, "probe ready", func() bool {
		_, err := c.List(context.Background(), api.Query{})
		return err == nil
	})
	return cmd, c
}

func eventuallyApp(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func runLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(data)), "\n")
}

// TestCrashDuringRunLosesNoTrigger kills the process with SIGKILL while a
// run is in flight; after a restart on the same data the key runs again to
// completion.
func TestCrashDuringRunLosesNoTrigger(t *testing.T) {
	bin := buildProbe(t)
	dir := t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs")
	cmd, c := startProbe(t, bin, "--data", dir, "--runs", runs, "--instance", "first", "--sleep", "1h")
	ctx := context.Background()
	if _, err := c.Apply(ctx, "p.yaml", []byte("apiVersion: v1\nkind: Probe\nmetadata: {name: p, namespace: ns}\nspec: {n: 1}\n"), ""); err != nil {
		t.Fatal(err)
	}
	eventuallyApp(t, "the run to start", func() bool {
		return strings.HasPrefix(runLines(t, runs)[0], "start first ns/p 1")
	})
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	_, c2 := startProbe(t, bin, "--data", dir, "--runs", runs, "--instance", "second")
	key := api.Key{Kind: "Probe", Namespace: "ns", Name: "p"}
	eventuallyApp(t, "p Ready after the restart", func() bool {
		raw, err := c2.Get(ctx, key)
		if err != nil {
			return false
		}
		o, err := api.DecodeObject(raw)
		return err == nil && reconcilers.IsReady(o) && o.Status.ObservedGeneration == o.Metadata.Generation
	})
	// The killed run never ended; the restarted process ran the key to
	// the end (possibly more than once: a redelivered trigger may add a
	// run, and runs are idempotent).
	lines := runLines(t, runs)
	var got []string
	for _, l := range lines {
		f := strings.Fields(l)
		got = append(got, f[0]+" "+f[1])
	}
	if len(got) < 3 || fmt.Sprint(got[:3]) != "[start first start second end second]" {
		t.Fatalf("runs recorded: %v; want the killed run, then a full run after the restart", lines)
	}
}
