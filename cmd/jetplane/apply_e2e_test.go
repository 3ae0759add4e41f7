package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

const applyManifests = `apiVersion: v1
kind: Apply
metadata: {name: shop-ns, namespace: apps}
spec:
  cluster: k1
  manifest:
    apiVersion: v1
    kind: Namespace
    metadata: {name: shop}
---
apiVersion: v1
kind: Apply
metadata:
  name: web
  namespace: apps
  dependsOn: [{kind: Apply, name: shop-ns}]
spec:
  cluster: k1
  manifest:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: shop}
    spec:
      replicas: 2
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers: [{name: web, image: registry.invalid/web:1}]
`

const invalidApply = `apiVersion: v1
kind: Apply
metadata: {name: broken, namespace: apps}
spec:
  cluster: k1
  manifest:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: broken, namespace: default}
    spec:
      replicas: 1
      template:
        metadata: {labels: {app: broken}}
        spec:
          containers: [{name: c, image: registry.invalid/c:1}]
`

type applyObject struct {
	Metadata struct {
		Generation string `json:"generation"`
	} `json:"metadata"`
	Status struct {
		Phase              string `json:"phase"`
		Message            string `json:"message"`
		ObservedGeneration string `json:"observedGeneration"`
		Conditions         []struct {
			Type, Status, Message string
		} `json:"conditions"`
	} `json:"status"`
}

// TestApplyEndToEnd is the Kubernetes story through the real binary and a
// real apiserver: two Apply objects (a Namespace, and a Deployment that
// depends on it) reach the cluster in dependency order; a Deployment deleted
// or scaled behind jetplane's back is put back; an invalid manifest shows
// the apiserver's reason and is not retried in a loop; deleting the Apply
// removes the Deployment; and history shows every step with its actor, the
// bridge's observations beside the Apply's own events.
func TestApplyEndToEnd(t *testing.T) {
	bin := buildBinary(t)
	env := kubeenv.Start(t)
	dir := t.TempDir()
	clusters := filepath.Join(dir, "clusters.yaml")
	if err := os.WriteFile(clusters, []byte(fmt.Sprintf(`clusters:
- name: k1
  kubeconfig: %s
  resources:
  - {version: v1, resource: namespaces}
  - {group: apps, version: v1, resource: deployments}
`, env.Kubeconfig())), 0o600); err != nil {
		t.Fatal(err)
	}
	manifests := filepath.Join(dir, "apply.yaml")
	if err := os.WriteFile(manifests, []byte(applyManifests), 0o600); err != nil {
		t.Fatal(err)
	}
	s := serve(t, bin, t.TempDir(), "--clusters", clusters)
	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	eventually := func(what string, within time.Duration, cond func() bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !cond() {
			if time.Since(start) > within {
				out, _ := runErr(bin, s, "get", "Apply", "-n", "apps", "-o", "yaml")
				t.Fatalf("%s: not within %s; Applies:\n%s\njetplane log:\n%s", what, within, out, s.log.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start)
	}
	get := func(name string) (applyObject, bool) {
		out, err := runErr(bin, s, "get", "Apply", name, "-n", "apps", "-o", "json")
		var o applyObject
		if err != nil || json.Unmarshal([]byte(out), &o) != nil {
			return o, false
		}
		return o, true
	}
	ready := func(name string) bool {
		o, ok := get(name)
		return ok && o.Status.Phase == "Ready" && o.Status.ObservedGeneration == o.Metadata.Generation
	}

	if out := run(t, bin, s, "apply", "-f", manifests); strings.Count(out, "created") != 2 {
		t.Fatalf("apply:\n%s", out)
	}
	eventually("both Applies Ready", 60*time.Second, func() bool { return ready("shop-ns") && ready("web") })
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep, err := cs.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dep.CreationTimestamp.Before(&ns.CreationTimestamp) {
		t.Fatalf("Deployment created at %s, before its Namespace at %s", dep.CreationTimestamp, ns.CreationTimestamp)
	}
	if dep.Labels["jetplane.io/apply-name"] != "web" || dep.Labels["jetplane.io/apply-namespace"] != "apps" {
		t.Fatalf("Deployment labels: %v", dep.Labels)
	}

	// Deleted behind jetplane's back: recreated within 5 s.
	if err := cs.AppsV1().Deployments("shop").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	took := eventually("the deleted Deployment recreated", 5*time.Second, func() bool {
		d, err := cs.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.UID != dep.UID && d.DeletionTimestamp == nil
	})
	t.Logf("Deployment recreated %s after its deletion", took.Round(time.Millisecond))

	// Scaled behind jetplane's back: replicas restored.
	d, err := cs.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	five := int32(5)
	d.Spec.Replicas = &five
	if _, err := cs.AppsV1().Deployments("shop").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	took = eventually("replicas restored to 2", 5*time.Second, func() bool {
		d, err := cs.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 2
	})
	t.Logf("replicas restored %s after the change", took.Round(time.Millisecond))

	// An invalid manifest: the apiserver's reason in get, no retry loop.
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(invalidApply), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, bin, s, "apply", "-f", bad)
	eventually("the invalid Apply Failed", 30*time.Second, func() bool {
		o, ok := get("broken")
		return ok && o.Status.Phase == "Failed"
	})
	o, _ := get("broken")
	if !strings.Contains(o.Status.Message, "selector") {
		t.Fatalf("invalid Apply's message %q does not carry the apiserver's reason", o.Status.Message)
	}
	statusWrites := func() int {
		var h historyOut
		if err := json.Unmarshal([]byte(run(t, bin, s, "history", "Apply/apps/broken", "-o", "json")), &h); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range h.Items {
			if e.Type == "EVENT_TYPE_STATUS_CHANGED" {
				n++
			}
		}
		return n
	}
	before := statusWrites()
	time.Sleep(3 * time.Second)
	if after := statusWrites(); after != before {
		t.Fatalf("the invalid Apply kept running: %d status writes, then %d", before, after)
	}

	// Deleting the Apply removes the Deployment, and the Apply leaves
	// current state.
	run(t, bin, s, "delete", "Apply/apps/web")
	eventually("the Deployment gone from the cluster", 30*time.Second, func() bool {
		_, err := cs.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	eventually("the Apply gone from current state", 30*time.Second, func() bool {
		_, ok := get("web")
		return !ok
	})

	// History: every step, with actors, and the bridge's observations of
	// the Deployment beside the Apply's own events.
	var h historyOut
	if err := json.Unmarshal([]byte(run(t, bin, s, "history", "Apply/apps/web", "-o", "json")), &h); err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, e := range h.Items {
		steps = append(steps, strings.TrimPrefix(e.Type, "EVENT_TYPE_")+" by "+strings.Split(e.Actor, "@")[0])
	}
	all := strings.Join(steps, "\n")
	for _, want := range []string{
		"APPLIED by user/anonymous",
		"STATUS_CHANGED by reconciler/Apply",
		"OBSERVED by bridge/k1",
		"FINALIZED by bridge/k1",
		"DELETE_REQUESTED by user/anonymous",
		"FINALIZED by reconciler/Apply",
	} {
		if !strings.Contains(all, want) {
			t.Fatalf("history lacks %q:\n%s", want, all)
		}
	}
	if table := run(t, bin, s, "history", "Apply/apps/web"); !strings.Contains(table, "Deployment.apps/k1/shop/web") {
		t.Fatalf("history table does not name the observed Deployment:\n%s", table)
	}
	s.stop(t)
}
