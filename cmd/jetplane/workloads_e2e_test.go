package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetplane/jetplane/internal/apptest"
)

type podList struct {
	Items []struct {
		Metadata struct {
			Name        string            `json:"name"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			NodeName   string `json:"nodeName"`
			Containers []struct {
				Image string `json:"image"`
			} `json:"containers"`
		} `json:"spec"`
		Status struct {
			Goal       string `json:"goal"`
			Phase      string `json:"phase"`
			Conditions []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
				Reason string `json:"reason"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"items"`
}

// webPods lists the live pods of the Deployment web in shop: name → node,
// image and Ready status.
type podInfo struct{ node, image, ready, reason, phase string }

func webPods(t *testing.T, bin string, s *server) map[string]podInfo {
	t.Helper()
	out, err := runErr(bin, s, "get", "pods", "-n", "shop", "-l", "app=web", "-o", "json")
	if err != nil {
		return nil
	}
	var l podList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("get pods: %v\n%s", err, out)
	}
	got := map[string]podInfo{}
	for _, it := range l.Items {
		if it.Status.Goal == "deleted" {
			continue
		}
		p := podInfo{node: it.Spec.NodeName, image: it.Spec.Containers[0].Image, phase: it.Status.Phase}
		for _, c := range it.Status.Conditions {
			if c.Type == "Ready" {
				p.ready, p.reason = c.Status, c.Reason
			}
		}
		got[it.Metadata.Name] = p
	}
	return got
}

// allRunning reports whether there are n pods, all Ready, each passing where.
func allRunning(pods map[string]podInfo, n int, where func(podInfo) bool) bool {
	if len(pods) != n {
		return false
	}
	for _, p := range pods {
		if p.ready != "True" || p.phase != "Running" || (where != nil && !where(p)) {
			return false
		}
	}
	return true
}

// TestWorkloadsOnTwoNodes drives the binary with the node agent of serve
// and a `jetplane node` process: a DaemonSet reaches the node that joins
// later, a Deployment spreads over both nodes, scales, rolls out a new
// image within maxUnavailable, rolls back, heals when the node process is
// SIGKILLed, and leaves nothing behind when deleted.
func TestWorkloadsOnTwoNodes(t *testing.T) {
	bin := buildBinary(t)
	module := buildExample(t)
	natsPort := freePort(t)
	data := t.TempDir()
	const grace, eviction = time.Second, time.Second
	s := serve(t, bin, data, "--node=true", "--nats-port", fmt.Sprint(natsPort),
		"--node-heartbeat", "200ms", "--node-grace", grace.String(), "--node-eviction", eviction.String())
	run(t, bin, s, "image", "push", module, "hello:v1")
	run(t, bin, s, "image", "push", module, "hello:v2")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	run(t, bin, s, "apply", "-f", write("ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"))
	run(t, bin, s, "apply", "-f", write("ds.yaml", `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: logger, namespace: shop}
spec:
  selector: {matchLabels: {app: logger}}
  template:
    metadata: {labels: {app: logger}}
    spec:
      containers:
      - {name: logger, image: hello:v1, args: ["-n", "1000000", "-every", "10s"]}
`))
	daemonNodes := func() string {
		out, _ := runErr(bin, s, "get", "pods", "-n", "shop", "-l", "app=logger", "-o", "wide")
		return out
	}
	waitFor(t, "a daemon pod on local", 60*time.Second, func() bool { return strings.Contains(daemonNodes(), "local") })

	// A second node, in its own process, joins: the DaemonSet follows.
	node := startNode(t, bin, data, natsPort, "edge")
	waitFor(t, "a daemon pod on edge", 60*time.Second, func() bool {
		out := daemonNodes()
		return strings.Contains(out, "edge") && strings.Count(out, "Running") == 2
	})

	deploy := func(replicas int, image string) string {
		return write("web.yaml", apptest.Deployment("shop", replicas, image, "-n", "1000000", "-every", "10s"))
	}
	run(t, bin, s, "apply", "-f", deploy(4, "hello:v1"))
	waitFor(t, "4 pods of web running on both nodes", 60*time.Second, func() bool {
		pods := webPods(t, bin, s)
		nodes := map[string]bool{}
		for _, p := range pods {
			nodes[p.node] = true
		}
		return allRunning(pods, 4, nil) && nodes["local"] && nodes["edge"]
	})
	if out := run(t, bin, s, "get", "deploy", "-n", "shop"); !strings.Contains(out, "UP-TO-DATE") || !strings.Contains(out, "4/4") {
		t.Fatalf("get deploy:\n%s", out)
	}

	run(t, bin, s, "scale", "--replicas", "6", "deploy/web", "-n", "shop")
	waitFor(t, "6 pods of web", 60*time.Second, func() bool { return allRunning(webPods(t, bin, s), 6, nil) })

	// A new image rolls out; at no sample are fewer than 5 pods ready.
	run(t, bin, s, "apply", "-f", deploy(6, "hello:v2"))
	minReady := 6
	waitFor(t, "6 pods of hello:v2", 60*time.Second, func() bool {
		pods := webPods(t, bin, s)
		n := 0
		for _, p := range pods {
			if p.ready == "True" {
				n++
			}
		}
		minReady = min(minReady, n)
		return allRunning(pods, 6, func(p podInfo) bool { return p.image == "hello:v2" })
	})
	if minReady < 5 {
		t.Errorf("during the rollout only %d of 6 pods were ready; maxUnavailable is 1", minReady)
	}
	if out := run(t, bin, s, "rollout", "status", "deploy/web", "-n", "shop", "--timeout", "60s"); !strings.Contains(out, `deployment "web" successfully rolled out`) {
		t.Fatalf("rollout status:\n%s", out)
	}
	hist := run(t, bin, s, "rollout", "history", "deploy/web", "-n", "shop")
	if !strings.Contains(hist, "hello:v1") || !strings.Contains(hist, "hello:v2") {
		t.Fatalf("rollout history:\n%s", hist)
	}
	if out := run(t, bin, s, "rollout", "undo", "deploy/web", "-n", "shop"); !strings.Contains(out, "rolled back to revision 1") {
		t.Fatalf("rollout undo: %s", out)
	}
	waitFor(t, "6 pods of hello:v1 again", 60*time.Second, func() bool {
		return allRunning(webPods(t, bin, s), 6, func(p podInfo) bool { return p.image == "hello:v1" })
	})

	// SIGKILL the node process: its pods turn Unknown, then are replaced
	// on the surviving node.
	var onEdge []string
	for name, p := range webPods(t, bin, s) {
		if p.node == "edge" {
			onEdge = append(onEdge, name)
		}
	}
	if len(onEdge) == 0 {
		t.Fatal("no pod of web on edge")
	}
	if err := node.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = node.Wait()
	killed := time.Now()
	waitFor(t, "edge's pods Unknown", 10*time.Second, func() bool {
		pods := webPods(t, bin, s)
		for _, name := range onEdge {
			if p, ok := pods[name]; !ok || p.phase != "Unknown" || p.ready != "Unknown" || p.reason != "NodeLost" {
				return false
			}
		}
		return true
	})
	if out := run(t, bin, s, "get", "pods", "-n", "shop", "-l", "app=web"); !strings.Contains(out, "Unknown") {
		t.Errorf("get pods does not show Unknown:\n%s", out)
	}
	bound := grace + eviction + 2*time.Second
	waitFor(t, "web replaced on local", bound+5*time.Second, func() bool {
		return allRunning(webPods(t, bin, s), 6, func(p podInfo) bool { return p.node == "local" })
	})
	took := time.Since(killed)
	t.Logf("replaced %d pods %s after SIGKILL (grace %s + eviction %s + 2s = %s)", len(onEdge), took.Round(time.Millisecond), grace, eviction, bound)
	if took > bound+500*time.Millisecond { // the heartbeat interval and the poll's own period
		t.Errorf("replacement took %s; want within %s", took, bound)
	}

	run(t, bin, s, "delete", "deploy/web", "-n", "shop")
	waitFor(t, "web's ReplicaSets and pods gone", 60*time.Second, func() bool {
		rs, _ := runErr(bin, s, "get", "rs", "-n", "shop", "-o", "name")
		return strings.TrimSpace(rs) == "" && len(webPods(t, bin, s)) == 0
	})
}
