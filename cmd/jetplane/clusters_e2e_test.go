package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

// TestClustersEndToEnd drives `jetplane serve --clusters` against a real
// apiserver through its kubeconfig file: a bad clusters file stops serve
// with the field named; a good one gets the cluster's ConfigMaps into
// current state, and `jetplane clusters` shows the cluster synced.
func TestClustersEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	env := kubeenv.Start(t)
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	bad := write("bad.yaml", "clusters:\n- name: k1\n  kubeconfig: "+env.Kubeconfig()+"\n  resources:\n  - {version: v1, resources: configmaps}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--nats-port", "-1", "--clusters", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--clusters: "+bad+": line 5: field resources not found in a resource") {
		t.Fatalf("serve with a bad clusters file: %v\n%s", err, out)
	}
	bad2 := write("bad2.yaml", "clusters:\n- name: k1\n  kubeconfig: "+env.Kubeconfig()+"\n  resources:\n  - {version: v1}\n")
	out, err = exec.CommandContext(ctx, bin, "serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--nats-port", "-1", "--clusters", bad2).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "clusters[0].resources[0].resource: required") {
		t.Fatalf("serve with a clusters file lacking a resource: %v\n%s", err, out)
	}

	good := write("clusters.yaml", fmt.Sprintf(`clusters:
- name: k1
  kubeconfig: %s
  resources:
  - {version: v1, resource: configmaps, namespace: default}
`, env.Kubeconfig()))
	s := serve(t, bin, t.TempDir(), "--clusters", good)
	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "fast"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(names(t, run(t, bin, s, "get", "ConfigMap", "-n", "k1/default", "-o", "json")), "settings") {
		if time.Now().After(deadline) {
			t.Fatalf("ConfigMap k1/default/settings not in current state; log:\n%s", s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var h historyOut
	if err := json.Unmarshal([]byte(run(t, bin, s, "history", "ConfigMap/k1/default/settings", "-o", "json")), &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Items) != 1 || h.Items[0].Type != "EVENT_TYPE_OBSERVED" || h.Items[0].Actor != "bridge/k1" {
		t.Fatalf("history: %+v", h.Items)
	}

	table := run(t, bin, s, "clusters")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME STATE RESOURCES OBJECTS LAST EVENT ERROR" {
		t.Fatalf("clusters table:\n%s", table)
	}
	if f := strings.Fields(lines[1]); len(f) < 9 || f[0] != "k1" || f[1] != "synced" || strings.Join(f[2:5], " ") != "configmaps.v1 in default" || f[5] != "1" || f[len(f)-1] != "-" {
		t.Fatalf("clusters row: %q", lines[1])
	}
	var list struct {
		Items []struct {
			Name, State string
			Objects     int
			Resources   []struct{ Resource, Kind string }
		}
	}
	if err := json.Unmarshal([]byte(run(t, bin, s, "clusters", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "k1" || list.Items[0].State != "synced" || list.Items[0].Objects != 1 || list.Items[0].Resources[0].Kind != "ConfigMap" {
		t.Fatalf("clusters -o json: %+v", list.Items)
	}
	if y := run(t, bin, s, "clusters", "-o", "yaml"); !strings.Contains(y, "name: k1") || !strings.Contains(y, "state: synced") {
		t.Fatalf("clusters -o yaml:\n%s", y)
	}
	s.stop(t)
}
