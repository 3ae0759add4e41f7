package kube_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/bridge/kube"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// TestBridge runs the bridge against one real apiserver, each subtest in
// its own namespaces and under its own cluster name.
func TestBridge(t *testing.T) {
	env := kubeenv.Start(t)
	cs := clientset(t, env)
	t.Run("changes", func(t *testing.T) { testChanges(t, env, cs) })
	t.Run("deleted while down", func(t *testing.T) { testDeletedWhileDown(t, env, cs) })
	t.Run("two bridges", func(t *testing.T) { testTwoBridges(t, env, cs) })
	t.Run("resources the cluster lacks", func(t *testing.T) { testUnknownResources(t, env) })
}

// testUnknownResources: a resource the cluster does not serve keeps the
// cluster connecting, with an error that says what is wrong.
func testUnknownResources(t *testing.T, env *kubeenv.Env) {
	log, st := logAndState(t)
	for _, tt := range []struct {
		res  kube.Resource
		want string
	}{
		{kube.Resource{Version: "v1", Resource: "configmapz"}, `API v1 has no resource "configmapz"`},
		{kube.Resource{Group: "example.com", Version: "v1", Resource: "widgets"}, "the cluster does not serve API example.com/v1"},
		{kube.Resource{Version: "v1", Resource: "namespaces", Namespace: "shop"}, "namespaces is cluster-scoped"},
	} {
		b := startBridge(t, log, st, kube.Cluster{Name: "c4", REST: env.RESTConfig(), Resources: []kube.Resource{tt.res}})
		eventually(t, 20*time.Second, func() (bool, string) {
			err := b.Ready()
			return err != nil && strings.Contains(err.Error(), tt.want), fmt.Sprintf("Ready() = %v, want an error with %q", err, tt.want)
		})
		if s := b.Status()[0]; s.State != kube.StateConnecting {
			t.Errorf("state %s, want connecting", s.State)
		}
		b.stop()
	}
}

// testChanges: create, update and delete become Observed and Finalized
// events with decision 0009's keys, ids, actor and annotations, for a core
// kind, a grouped kind and a cluster-scoped kind with a label selector.
func testChanges(t *testing.T, env *kubeenv.Env, cs kubeClient) {
	ctx := t.Context()
	createNamespace(t, cs, "shop")
	log, st := logAndState(t)
	b := startBridge(t, log, st, kube.Cluster{Name: "c1", REST: env.RESTConfig(), Resources: []kube.Resource{
		configMaps("shop"),
		{Group: "apps", Version: "v1", Resource: "deployments", Namespace: "shop"},
		{Version: "v1", Resource: "namespaces", LabelSelector: "team=jetplane"},
	}})
	waitSynced(t, b)

	cms := cs.CoreV1().ConfigMaps("shop")
	created, err := cms.Create(ctx, configMap("web", map[string]string{"mode": "fast"}, map[string]string{"app": "web"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := projections.Key{Kind: "ConfigMap", Namespace: "c1/shop", Name: "web"}
	eventually(t, 20*time.Second, func() (bool, string) {
		return heldVersion(st, k) == created.ResourceVersion, "held " + heldVersion(st, k) + ", want " + created.ResourceVersion
	})
	obj := st.Get(k)
	if got := obj.GetSpec().GetFields()["data"].GetStructValue().GetFields()["mode"].GetStringValue(); got != "fast" {
		t.Errorf("spec.data.mode = %q, want fast", got)
	}
	if md := obj.GetSpec().GetFields()["metadata"].GetStructValue().GetFields(); md["managedFields"] != nil || md["uid"].GetStringValue() != string(created.UID) {
		t.Errorf("spec.metadata: managedFields present %v, uid %q; want none and %s", md["managedFields"] != nil, md["uid"].GetStringValue(), created.UID)
	}
	wantAnn := map[string]string{kube.AnnotationCluster: "c1", projections.AnnotationUID: string(created.UID), projections.AnnotationResourceVersion: created.ResourceVersion}
	for a, v := range wantAnn {
		if got := obj.GetMetadata().GetAnnotations()[a]; got != v {
			t.Errorf("annotation %s = %q, want %q", a, got, v)
		}
	}
	if obj.GetMetadata().GetLabels()["app"] != "web" || obj.GetApiVersion() != "v1" || obj.GetKind() != "ConfigMap" {
		t.Errorf("object: labels %v, %s %s", obj.GetMetadata().GetLabels(), obj.GetApiVersion(), obj.GetKind())
	}

	created.Data["mode"] = "safe"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		return heldVersion(st, k) == updated.ResourceVersion, "held " + heldVersion(st, k) + ", want " + updated.ResourceVersion
	})
	if err := cms.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() (bool, string) { return st.GetRecord(k) == nil, "key still held" })

	evs := eventsOf(history(t, log), k)
	want := []struct {
		typ schemas.EventType
		id  string
	}{
		{schemas.EventType_EVENT_TYPE_OBSERVED, kube.EventID("c1", string(created.UID), created.ResourceVersion, kube.Observed)},
		{schemas.EventType_EVENT_TYPE_OBSERVED, kube.EventID("c1", string(created.UID), updated.ResourceVersion, kube.Observed)},
		{schemas.EventType_EVENT_TYPE_FINALIZED, "k8s/c1/" + string(created.UID) + "/"},
	}
	if len(evs) != len(want) {
		t.Fatalf("%d events of %s, want %d: %v", len(evs), k, len(want), evs)
	}
	for i, w := range want {
		ev := evs[i]
		if ev.GetType() != w.typ || ev.GetActor() != "bridge/c1" || !strings.HasPrefix(ev.GetId(), w.id) {
			t.Errorf("event %d: %s %s by %s, want %s %s… by bridge/c1", i, ev.GetType(), ev.GetId(), ev.GetActor(), w.typ, w.id)
		}
	}
	if id := evs[2].GetId(); !strings.HasSuffix(id, "/Deleted") {
		t.Errorf("delete id %q does not end in /Deleted", id)
	}

	// A grouped kind and a cluster-scoped one, selected by label.
	replicas := int32(2)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "api", Image: "example/api:1"}}},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments("shop").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "team-ns", Labels: map[string]string{"team": "jetplane"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-ns"}},
	} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	depKey := projections.Key{Kind: "Deployment.apps", Namespace: "c1/shop", Name: "api"}
	nsKey := projections.Key{Kind: "Namespace", Namespace: "c1/", Name: "team-ns"}
	eventually(t, 20*time.Second, func() (bool, string) {
		return st.GetRecord(depKey) != nil && st.GetRecord(nsKey) != nil, fmt.Sprintf("deployment held %v, namespace held %v", st.GetRecord(depKey) != nil, st.GetRecord(nsKey) != nil)
	})
	if r := st.GetRecord(projections.Key{Kind: "Namespace", Namespace: "c1/", Name: "other-ns"}); r != nil {
		t.Error("a namespace outside the label selector was recorded")
	}

	s := b.Status()[0]
	if s.State != kube.StateSynced || !s.Synced || s.Objects != 2 || s.Appended < 5 || s.LastEvent.IsZero() || len(s.Resources) != 3 || s.Resources[1].Kind != "Deployment.apps" {
		t.Errorf("status: %+v", s)
	}
}

// testDeletedWhileDown: an object deleted while no bridge ran is recorded as
// gone by the next bridge, once it has synced; objects that did not change
// are not recorded again.
func testDeletedWhileDown(t *testing.T, env *kubeenv.Env, cs kubeClient) {
	ctx := t.Context()
	createNamespace(t, cs, "down")
	log, st := logAndState(t)
	cluster := kube.Cluster{Name: "c2", REST: env.RESTConfig(), Resources: []kube.Resource{configMaps("down")}}
	b1 := startBridge(t, log, st, cluster)
	waitSynced(t, b1)
	cms := cs.CoreV1().ConfigMaps("down")
	var uids []string
	for _, name := range []string{"stays", "goes", "changes"} {
		cm, err := cms.Create(ctx, configMap(name, map[string]string{"v": "1"}, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, string(cm.UID))
	}
	key := func(name string) projections.Key {
		return projections.Key{Kind: "ConfigMap", Namespace: "c2/down", Name: name}
	}
	eventually(t, 20*time.Second, func() (bool, string) {
		n, _ := st.Keys(projections.Query{NamespacePrefix: "c2/"})
		return len(n) == 3, fmt.Sprintf("%d keys held", len(n))
	})
	b1.stop()

	if err := cms.Delete(ctx, "goes", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changed, err := cms.Update(ctx, configMap("changes", map[string]string{"v": "2"}, nil), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b2 := startBridge(t, log, st, cluster)
	waitSynced(t, b2)
	// Synced means appended; the projection follows.
	eventually(t, 20*time.Second, func() (bool, string) {
		return st.GetRecord(key("goes")) == nil && heldVersion(st, key("changes")) == changed.ResourceVersion, "not yet folded"
	})
	evs := history(t, log)
	gone := eventsOf(evs, key("goes"))
	if len(gone) != 2 || gone[1].GetType() != schemas.EventType_EVENT_TYPE_FINALIZED || gone[1].GetActor() != "bridge/c2" ||
		!strings.HasPrefix(gone[1].GetId(), "k8s/c2/"+uids[1]+"/") || !strings.HasSuffix(gone[1].GetId(), "/Deleted") {
		t.Fatalf("events of the deleted object: %v", gone)
	}
	if n := len(eventsOf(evs, key("stays"))); n != 1 {
		t.Errorf("%d events of the unchanged object, want 1: a restart rewrote it", n)
	}
	if st.GetRecord(key("stays")) == nil {
		t.Error("the unchanged object left current state")
	}
}

// testTwoBridges: two bridges on one cluster and one log store each change
// exactly once.
func testTwoBridges(t *testing.T, env *kubeenv.Env, cs kubeClient) {
	ctx := t.Context()
	createNamespace(t, cs, "twice")
	log, st := logAndState(t)
	cluster := kube.Cluster{Name: "c3", REST: env.RESTConfig(), Resources: []kube.Resource{configMaps("twice")}}
	// Each bridge reads its own projection, as two jetplane processes do.
	b1 := startBridge(t, log, st, cluster)
	b2 := startBridge(t, log, follow(t, log), cluster)
	waitSynced(t, b1)
	waitSynced(t, b2)

	cms := cs.CoreV1().ConfigMaps("twice")
	const n = 30
	want := map[string]bool{} // ids every change must have
	for i := range n {
		cm, err := cms.Create(ctx, configMap(fmt.Sprintf("cm-%02d", i), map[string]string{"v": "1"}, nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want[kube.EventID("c3", string(cm.UID), cm.ResourceVersion, kube.Observed)] = true
		cm.Data["v"] = "2"
		if cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want[kube.EventID("c3", string(cm.UID), cm.ResourceVersion, kube.Observed)] = true
		if i%3 == 0 {
			if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deletes := (n + 2) / 3
	var counts map[string]int
	eventually(t, 30*time.Second, func() (bool, string) {
		counts = idCounts(history(t, log), "k8s/c3/")
		return len(counts) == len(want)+deletes, fmt.Sprintf("%d distinct ids, want %d", len(counts), len(want)+deletes)
	})
	for id := range want {
		if counts[id] == 0 {
			t.Errorf("change %s not stored", id)
		}
	}
	for id, c := range counts {
		if c != 1 {
			t.Errorf("%s stored %d times", id, c)
		}
	}
	s1, s2 := b1.Status()[0], b2.Status()[0]
	if got := s1.Appended + s2.Appended; got != uint64(len(counts)) {
		t.Errorf("bridges appended %d + %d events, log holds %d", s1.Appended, s2.Appended, len(counts))
	}
	t.Logf("bridge 1 stored %d (%d duplicates), bridge 2 stored %d (%d duplicates)", s1.Appended, s1.Duplicates, s2.Appended, s2.Duplicates)
	if keys, _ := st.Keys(projections.Query{NamespacePrefix: "c3/"}); len(keys) != n-deletes {
		t.Errorf("%d objects held, want %d", len(keys), n-deletes)
	}
}
