package main_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestWasmNodeNumberOnTwoNodes: a guest of kube-scheduler-wasm-extension's
// shape (NodeNumber: a pod goes to the node whose name ends with the pod
// name's last digit), configured as upstream configures it (any plugin
// name, guestURL file://, guestConfig), places pods on two node agents:
// the one in `serve` and a `jetplane node` process.
func TestWasmNodeNumberOnTwoNodes(t *testing.T) {
	bin := buildBinary(t)
	module := buildExample(t)
	guest := filepath.Join(t.TempDir(), "nodenumber.wasm")
	build := exec.Command("go", "build", "-buildmode=c-shared", "-o", guest, "../../scheduler/wasm/testdata/upstream")
	build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build guest: %v\n%s", err, out)
	}
	cfg := filepath.Join(t.TempDir(), "scheduler.yaml")
	// Upstream's KubeSchedulerConfiguration; a weight so that NodeNumber
	// outweighs the default plugins' spreading.
	if err := os.WriteFile(cfg, []byte(`kind: KubeSchedulerConfiguration
apiVersion: kubescheduler.config.k8s.io/v1
profiles:
  - plugins:
      multiPoint:
        enabled:
          - name: NodeNumber
            weight: 10
    pluginConfig:
      - name: NodeNumber
        args:
          guestURL: "file://`+guest+`"
          guestConfig: '{"reverse": false}'
`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The compiled module's cache goes under the user cache dir.
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	natsPort := freePort(t)
	data := t.TempDir()
	s := serve(t, bin, data, "--node=true", "--node-name", "node1", "--nats-port", fmt.Sprint(natsPort),
		"--node-heartbeat", "200ms", "--scheduler-config", cfg)
	run(t, bin, s, "image", "push", module, "hello:v1")

	startNode(t, bin, data, natsPort, "node2")
	for _, n := range []string{"node1", "node2"} {
		waitFor(t, "Node "+n+" Ready", 60*time.Second, func() bool { return phaseOf(t, bin, s, "Node", n).Status.Phase == "Ready" })
	}

	pods := []string{"pod1", "pod2", "web-11", "web-12"}
	var manifest bytes.Buffer
	for _, p := range pods {
		fmt.Fprintf(&manifest, `---
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  restartPolicy: Never
  containers:
  - name: hello
    image: hello:v1
    args: ["-n", "1"]
    resources:
      limits: {memory: 64Mi}
`, p)
	}
	file := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(file, manifest.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, bin, s, "apply", "-f", file)
	for _, p := range pods {
		want := "node" + p[len(p)-1:]
		var got string
		waitFor(t, p+" bound", 60*time.Second, func() bool {
			out, err := runErr(bin, s, "get", "Pod", p, "-n", "default", "-o", "json")
			if err != nil {
				return false
			}
			var o struct {
				Spec struct {
					NodeName string `json:"nodeName"`
				} `json:"spec"`
			}
			if json.Unmarshal([]byte(out), &o) != nil {
				return false
			}
			got = o.Spec.NodeName
			return got != ""
		})
		if got != want {
			t.Fatalf("%s on %s, want %s (NodeNumber); serve's log:\n%s", p, got, want, s.log.String())
		}
	}
	for _, p := range pods {
		waitFor(t, p+" Succeeded", 60*time.Second, func() bool {
			return phaseOf(t, bin, s, "Pod", p, "-n", "default").Status.Phase == "Succeeded"
		})
	}
}
