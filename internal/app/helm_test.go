package app_test

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/helmrelease"
	"github.com/jetplane/jetplane/schemas"
)

// webChart is a chart of three templates: the release's Namespace, a
// ConfigMap, and a Deployment that depends on the ConfigMap. Without
// withDeployment the Deployment's template is gone.
func webChart(version string, withDeployment bool) map[string]string {
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: web\nversion: " + version + "\n",
		"values.yaml": "mode: slow\nreplicas: 1\n",
		"templates/namespace.yaml": `apiVersion: v1
kind: Namespace
metadata:
  name: {{ .Release.Namespace }}
`,
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-settings
data:
  mode: {{ .Values.mode | quote }}
`,
	}
	if withDeployment {
		files["templates/deployment.yaml"] = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    jetplane.dev/depends-on: ConfigMap/web-settings
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "registry.invalid/web:1"}
`
	}
	return files
}

func releaseYAML(cluster, version string, values string) string {
	y := "apiVersion: v1\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec:\n  chart: {name: web, version: " + version + "}\n  releaseNamespace: shop\n  values: " + values + "\n"
	if cluster != "" {
		y += "  cluster: " + cluster + "\n"
	}
	return y
}

var releaseKey = projections.Key{Kind: helmrelease.Kind, Namespace: "apps", Name: "web"}

// waitRelease waits until the release has run its current generation and
// cond holds for it.
func waitRelease(t *testing.T, a *app.App, what string, cond func(*schemas.Object) bool) *schemas.Object {
	t.Helper()
	var o *schemas.Object
	eventuallyApp(t, what, func() bool {
		o = a.Store().Get(releaseKey)
		return o != nil && o.GetStatus().GetObservedGeneration() == o.GetMetadata().GetGeneration() && cond(o)
	})
	return o
}

func isReady(o *schemas.Object) bool { return reconcilers.IsReady(o) }

// keyEvents is the number of events of k in the log.
func keyEvents(t *testing.T, a *app.App, k projections.Key) []*schemas.Event {
	t.Helper()
	evs, err := a.Log().History(t.Context(), k.Proto())
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// firstReady is the sequence of k's first status with Ready True.
func firstReady(t *testing.T, a *app.App, k projections.Key) uint64 {
	t.Helper()
	for _, ev := range keyEvents(t, a, k) {
		if ev.GetType() == schemas.EventType_EVENT_TYPE_STATUS_CHANGED {
			for _, c := range ev.GetObject().GetStatus().GetConditions() {
				if c.GetType() == reconcilers.ConditionReady && c.GetStatus() == "True" {
					return ev.GetSequence()
				}
			}
		}
	}
	t.Fatalf("%s was never Ready", k)
	return 0
}

func finalizedAt(t *testing.T, a *app.App, k projections.Key) uint64 {
	t.Helper()
	evs := keyEvents(t, a, k)
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].GetType() == schemas.EventType_EVENT_TYPE_FINALIZED && evs[i].GetActor() != "bridge/k1" {
			return evs[i].GetSequence()
		}
	}
	t.Fatalf("%s was not finalized", k)
	return 0
}

func applyYAML(t *testing.T, c *api.Client, y string) {
	t.Helper()
	if _, err := c.Apply(t.Context(), "release.yaml", []byte(y), ""); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

// rollback applies revision n of the release again, as `jetplane
// rollback` does: read from the history over the API.
func rollback(t *testing.T, c *api.Client, n int64) {
	t.Helper()
	rollbackTo(t, c, releaseKey, n)
}

func rollbackTo(t *testing.T, c *api.Client, k projections.Key, n int64) {
	t.Helper()
	h, err := c.History(t.Context(), api.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name})
	if err != nil {
		t.Fatal(err)
	}
	evs := make([]*schemas.Event, len(h.Events))
	for i, raw := range h.Events {
		evs[i] = &schemas.Event{}
		if err := protojson.Unmarshal(raw, evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	o, err := helmrelease.Revision(evs, n)
	if err != nil {
		t.Fatal(err)
	}
	applyObject(t, c, o)
}

// TestHelmReleaseCluster is the release's life against a real apiserver:
// install in order, a value change re-applies only its object, a dropped
// template is pruned, rollback brings the previous objects back, and
// deletion removes everything in reverse order, all in the history.
func TestHelmReleaseCluster(t *testing.T) {
	env, cs := startKube(t)
	cluster := kube.Cluster{Name: "k1", REST: env.RESTConfig(), Resources: []kube.Resource{
		{Version: "v1", Resource: "namespaces"},
		{Version: "v1", Resource: "configmaps", Namespace: "shop"},
		{Group: "apps", Version: "v1", Resource: "deployments", Namespace: "shop"},
	}}
	a, c := startApp(t, app.Config{Clusters: kube.Clusters{cluster}})
	ctx := t.Context()
	for _, v := range []struct {
		version string
		deploy  bool
	}{{"0.1.0", true}, {"0.2.0", false}} {
		if _, err := c.PushChart(ctx, "web", v.version, testenv.Chart(t, webChart(v.version, v.deploy))); err != nil {
			t.Fatalf("push chart: %v", err)
		}
	}
	child := func(kind, ns, name string) projections.Key {
		return projections.Key{Kind: "Apply", Namespace: "apps", Name: helmrelease.ApplyName(releaseKey, projections.Key{Kind: kind, Namespace: ns, Name: name})}
	}
	nsKey, cmKey, depKey := child("Namespace", "", "shop"), child("ConfigMap", "shop", "web-settings"), child("Deployment.apps", "shop", "web")

	// Install: objects appear in dependency order.
	applyYAML(t, c, releaseYAML("k1", "0.1.0", "{mode: fast, replicas: 2}"))
	rel := waitRelease(t, a, "revision 1 Ready", isReady)
	if !strings.Contains(rel.GetStatus().GetMessage(), "revision 1: chart web 0.1.0; 3/3 children Ready") {
		t.Fatalf("status message: %q", rel.GetStatus().GetMessage())
	}
	dep, err := cs.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil || *dep.Spec.Replicas != 2 {
		t.Fatalf("deployment: %v, %v", dep, err)
	}
	if ns, cm, d := firstReady(t, a, nsKey), firstReady(t, a, cmKey), firstReady(t, a, depKey); !(ns < cm && cm < d) {
		t.Fatalf("children Ready at sequences namespace %d, configmap %d, deployment %d; want that order", ns, cm, d)
	}
	for _, k := range []projections.Key{nsKey, cmKey, depKey} {
		o := a.Store().Get(k)
		if o.GetMetadata().GetGroup() != helmrelease.Group(releaseKey) || o.GetMetadata().GetLabels()[helmrelease.LabelReleaseName] != "web" {
			t.Fatalf("%s metadata: %v", k, o.GetMetadata())
		}
	}

	// A value change re-applies only the ConfigMap.
	before := map[projections.Key]int{nsKey: len(keyEvents(t, a, nsKey)), cmKey: len(keyEvents(t, a, cmKey)), depKey: len(keyEvents(t, a, depKey))}
	applyYAML(t, c, releaseYAML("k1", "0.1.0", "{mode: faster, replicas: 2}"))
	rel = waitRelease(t, a, "revision 2 Ready", isReady)
	eventuallyApp(t, "the ConfigMap holds the new value", func() bool {
		cm, err := cs.CoreV1().ConfigMaps("shop").Get(ctx, "web-settings", metav1.GetOptions{})
		return err == nil && cm.Data["mode"] == "faster"
	})
	if msg := rel.GetStatus().GetMessage(); !strings.Contains(msg, `values: .mode "fast" → "faster"`) {
		t.Fatalf("revision 2 status lacks the values diff: %q", msg)
	}
	if n := len(keyEvents(t, a, nsKey)); n != before[nsKey] {
		t.Errorf("namespace child got %d new events; want none", n-before[nsKey])
	}
	if n := len(keyEvents(t, a, depKey)); n != before[depKey] {
		t.Errorf("deployment child got %d new events; want none", n-before[depKey])
	}
	if n := len(keyEvents(t, a, cmKey)); n <= before[cmKey] {
		t.Errorf("configmap child got no new event")
	}

	// Chart 0.2.0 drops the Deployment's template: it is pruned.
	applyYAML(t, c, releaseYAML("k1", "0.2.0", "{mode: faster, replicas: 2}"))
	waitRelease(t, a, "revision 3 Ready", isReady)
	eventuallyApp(t, "the deployment's Apply is gone", func() bool { return a.Store().Get(depKey) == nil })
	if _, err := cs.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pruned deployment still in the cluster: %v", err)
	}

	// Rollback to revision 1: the Deployment and mode fast are back.
	rollback(t, c, 1)
	rel = waitRelease(t, a, "revision 4 Ready", func(o *schemas.Object) bool { return o.GetMetadata().GetGeneration() == 4 && isReady(o) })
	if msg := rel.GetStatus().GetMessage(); !strings.Contains(msg, "revision 4: chart web 0.1.0") || !strings.Contains(msg, "chart.version \"0.2.0\" → \"0.1.0\"") {
		t.Fatalf("revision 4 status: %q", msg)
	}
	eventuallyApp(t, "rolled back objects in the cluster", func() bool {
		cm, err := cs.CoreV1().ConfigMaps("shop").Get(ctx, "web-settings", metav1.GetOptions{})
		_, derr := cs.AppsV1().Deployments("shop").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && cm.Data["mode"] == "fast" && derr == nil
	})

	// The history tells it all.
	var statuses []string
	for _, ev := range keyEvents(t, a, releaseKey) {
		if ev.GetType() == schemas.EventType_EVENT_TYPE_STATUS_CHANGED {
			statuses = append(statuses, ev.GetObject().GetStatus().GetMessage())
		}
	}
	for _, want := range []string{"revision 1: chart web 0.1.0", `revision 2: chart web 0.1.0; values: .mode "fast" → "faster"`, "revision 3: chart web 0.2.0", "revision 4: chart web 0.1.0"} {
		if !slices.ContainsFunc(statuses, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("history has no status %q; statuses:\n%s", want, strings.Join(statuses, "\n"))
		}
	}

	// Delete: everything goes, dependents first.
	if _, err := c.Delete(ctx, api.Key{Kind: releaseKey.Kind, Namespace: releaseKey.Namespace, Name: releaseKey.Name}); err != nil {
		t.Fatal(err)
	}
	eventuallyApp(t, "the release is gone", func() bool {
		// The test apiserver runs no namespace controller: do its part
		// once the namespace is terminating (its content is gone first).
		if ns, err := cs.CoreV1().Namespaces().Get(ctx, "shop", metav1.GetOptions{}); err == nil && ns.DeletionTimestamp != nil && len(ns.Spec.Finalizers) > 0 {
			ns.Spec.Finalizers = nil
			_, _ = cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
		}
		return a.Store().Get(releaseKey) == nil
	})
	for _, k := range []projections.Key{nsKey, cmKey, depKey} {
		if a.Store().Get(k) != nil {
			t.Errorf("%s outlived its release", k)
		}
	}
	if d, cm, ns := finalizedAt(t, a, depKey), finalizedAt(t, a, cmKey), finalizedAt(t, a, nsKey); !(d < cm && cm < ns) {
		t.Fatalf("children finalized at deployment %d, configmap %d, namespace %d; want that order", d, cm, ns)
	}
	if _, err := cs.CoreV1().ConfigMaps("shop").Get(ctx, "web-settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configmap after delete: %v", err)
	}
}

// TestHelmReleaseJetplaneObjects: without a cluster the same chart's
// objects are jetplane objects of the release's group.
func TestHelmReleaseJetplaneObjects(t *testing.T) {
	// No node runs here, so the chart's Deployment stays stored only: with
	// its controller on, its pods would wait for a node and the release
	// for them (as helm --wait does).
	a, c := startApp(t, app.Config{Workloads: app.WorkloadsConfig{Disabled: true}})
	if _, err := c.PushChart(t.Context(), "web", "0.1.0", testenv.Chart(t, webChart("0.1.0", true))); err != nil {
		t.Fatal(err)
	}
	applyYAML(t, c, releaseYAML("", "0.1.0", "{mode: fast, replicas: 2}"))
	waitRelease(t, a, "Ready", isReady)
	for _, k := range []projections.Key{
		{Kind: "Namespace", Name: "shop"},
		{Kind: "ConfigMap", Namespace: "shop", Name: "web-settings"},
		{Kind: "Deployment.apps", Namespace: "shop", Name: "web"},
	} {
		o := a.Store().Get(k)
		if o == nil {
			t.Fatalf("%s missing", k)
		}
		if o.GetMetadata().GetGroup() != helmrelease.Group(releaseKey) {
			t.Errorf("%s group %q", k, o.GetMetadata().GetGroup())
		}
	}
	cm := a.Store().Get(projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "web-settings"})
	if got := cm.GetSpec().GetFields()["data"].GetStructValue().GetFields()["mode"].GetStringValue(); got != "fast" {
		t.Fatalf("configmap data.mode = %q", got)
	}
	if _, err := c.Delete(t.Context(), api.Key{Kind: releaseKey.Kind, Namespace: releaseKey.Namespace, Name: releaseKey.Name}); err != nil {
		t.Fatal(err)
	}
	eventuallyApp(t, "the release and its objects are gone", func() bool {
		objs, _ := a.Store().List(projections.Query{Group: helmrelease.Group(releaseKey)})
		return a.Store().Get(releaseKey) == nil && len(objs) == 0
	})
}

// startKube starts a real kube-apiserver for the test and returns it with
// a typed client of it.
func startKube(t *testing.T) (*kubeenv.Env, *kubernetes.Clientset) {
	t.Helper()
	env := kubeenv.Start(t)
	cs, err := kubernetes.NewForConfig(env.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return env, cs
}
