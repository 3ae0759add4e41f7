package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// buildExample builds the example workload for WASI.
func buildExample(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "hello.wasm")
	cmd := exec.Command("go", "build", "-o", out, "../../deploy/examples/wasm/hello")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build example: %v\n%s", err, msg)
	}
	return out
}

type objectOut struct {
	Status struct {
		Phase   string `json:"phase"`
		Message string `json:"message"`
		Details struct {
			Reason string `json:"reason"`
		} `json:"details"`
	} `json:"status"`
}

// phaseOf is the phase `jetplane get` shows for ref ("" when absent).
func phaseOf(t *testing.T, bin string, s *server, kind, name string, ns ...string) objectOut {
	t.Helper()
	args := append([]string{"get", kind, name, "-o", "json"}, ns...)
	out, err := runErr(bin, s, args...)
	var o objectOut
	if err != nil {
		return o
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil {
		t.Fatalf("get %s %s: %v\n%s", kind, name, err, out)
	}
	return o
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPodsWalk is the README's pod walk, plus a second node agent process
// that is SIGKILLed: its Node goes NotReady and its pod fails NodeLost.
func TestPodsWalk(t *testing.T) {
	bin := buildBinary(t)
	module := buildExample(t)
	natsPort := freePort(t)
	data := t.TempDir()
	s := serve(t, bin, data, "--node=true", "--nats-port", fmt.Sprint(natsPort),
		"--node-heartbeat", "200ms", "--node-grace", "1s", "--node-eviction", "1s")
	pushed := run(t, bin, s, "image", "push", module, "hello:v1")
	if !strings.Contains(pushed, "hello:v1 sha256:") {
		t.Fatalf("push: %s", pushed)
	}
	// The same bytes again store nothing new: same digest.
	if again := run(t, bin, s, "image", "push", module, "hello:v1"); again != pushed {
		t.Fatalf("second push %q, first %q", again, pushed)
	}
	if ls := run(t, bin, s, "image", "ls"); !strings.Contains(ls, "hello:v1") {
		t.Fatalf("image ls:\n%s", ls)
	}
	run(t, bin, s, "apply", "-f", "../../deploy/examples/wasm/pod.yaml")
	waitFor(t, "hello Succeeded", 60*time.Second, func() bool {
		return phaseOf(t, bin, s, "Pod", "hello", "-n", "default").Status.Phase == "Succeeded"
	})
	logs := run(t, bin, s, "logs", "hello")
	if logs != "hello, jetplane (1/3)\nhello, jetplane (2/3)\nhello, jetplane (3/3)\n" {
		t.Fatalf("logs:\n%s", logs)
	}
	if tail := run(t, bin, s, "logs", "hello", "--tail", "1"); tail != "hello, jetplane (3/3)\n" {
		t.Fatalf("logs --tail 1: %q", tail)
	}
	if one := run(t, bin, s, "logs", "hello", "-c", "hello", "--since", "1h"); one != logs {
		t.Fatalf("logs -c hello --since 1h: %q", one)
	}
	hist := run(t, bin, s, "history", "Pod/default/hello", "-o", "json")
	var phases []string
	// The phases are Kubernetes'; jetplane's states are the reasons of the
	// Ready condition, and the states a report stands for too are listed
	// before it (decision 0089).
	for _, m := range regexp.MustCompile(`"type":\s*"(?:Ready",\s*"status":\s*"\w+",\s*"reason":\s*"(\w+)"|jetplane.dev/PassedStates",\s*"status":\s*"True",\s*"reason":\s*"Coalesced",\s*"message":\s*"([^"]*)")`).FindAllStringSubmatch(hist, -1) {
		if m[1] != "" {
			phases = append(phases, m[1])
		} else {
			phases = append(phases, strings.Split(m[2], ", ")...)
		}
	}
	want := []string{"Registered", "ImagePull", "Starting", "Running", "Completed"}
	next := 0
	for _, p := range phases {
		if next < len(want) && p == want[next] {
			next++
		}
	}
	if next != len(want) {
		t.Fatalf("history lacks %v in order; phases %v", want[next:], phases)
	}
	if out, err := runErr(bin, s, "image", "rm", "hello:v1"); err == nil || !strings.Contains(out, "in use by pod default/hello") {
		t.Fatalf("image rm of an image in use: %v\n%s", err, out)
	}

	// A second node, in its own process, with the node role's credential.
	node := startNode(t, bin, data, natsPort, "edge", "--labels", "zone=b", "--taints", "dedicated=edge:NoSchedule")
	waitFor(t, "Node edge Ready", 60*time.Second, func() bool { return phaseOf(t, bin, s, "Node", "edge").Status.Phase == "Ready" })
	if out := run(t, bin, s, "get", "Node", "edge", "-o", "yaml"); !strings.Contains(out, "zone: b") || !strings.Contains(out, "capacity") ||
		!strings.Contains(out, "key: dedicated") || !strings.Contains(out, "effect: NoSchedule") {
		t.Fatalf("Node edge:\n%s", out)
	}
	pod, err := os.ReadFile("../../deploy/examples/wasm/pod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edge := strings.NewReplacer("name: hello\n", "name: far\n", "nodeName: local", "nodeName: edge", `["-n", "3"]`, `["-n", "100000", "-every", "1s"]`).Replace(string(pod))
	edgeFile := filepath.Join(t.TempDir(), "far.yaml")
	if err := os.WriteFile(edgeFile, []byte(edge), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, bin, s, "apply", "-f", edgeFile)
	waitFor(t, "far Running on edge", 60*time.Second, func() bool {
		return phaseOf(t, bin, s, "Pod", "far", "-n", "default").Status.Phase == "Running"
	})
	if err := node.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = node.Wait()
	waitFor(t, "Node edge NotReady", 30*time.Second, func() bool { return phaseOf(t, bin, s, "Node", "edge").Status.Phase == "NotReady" })
	waitFor(t, "far gone", 30*time.Second, func() bool { return phaseOf(t, bin, s, "Pod", "far", "-n", "default").Status.Phase == "" })
	hist = run(t, bin, s, "history", "Pod/default/far", "-o", "json")
	if !strings.Contains(hist, `"NodeLost"`) || !strings.Contains(hist, "EVENT_TYPE_DELETE_REQUESTED") {
		t.Fatalf("far's history lacks NodeLost and its deletion:\n%s", hist)
	}
	if phaseOf(t, bin, s, "Pod", "hello", "-n", "default").Status.Phase != "Succeeded" {
		t.Fatal("the local node's pod was touched")
	}
}
