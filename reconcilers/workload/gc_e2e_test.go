package workload_test

import (
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/pod"
	"github.com/jetplane/jetplane/reconcilers/workload"
	"github.com/jetplane/jetplane/schemas"
)

func (c *cluster) replicaSets() []*schemas.Object {
	rss, _ := c.app.Store().List(projections.Query{Kind: workload.KindReplicaSet, Namespace: "default"})
	return rss
}

func (c *cluster) allPods() []*schemas.Object {
	pods, _ := c.app.Store().List(projections.Query{Kind: "Pod", Namespace: "default"})
	return pods
}

// A Deployment deleted in the foreground through the Kubernetes API stays,
// with its deletionTimestamp and the foregroundDeletion finalizer, until
// its ReplicaSet and their pods are gone, as in Kubernetes.
func TestForegroundDeletionKeepsTheOwnerUntilItsDependentsAreGone(t *testing.T) {
	c := startCluster(t, nil)
	c.apply(deploymentYAML(2, "module:v1", "a"))
	c.waitRunning(webKey, 2, time.Minute, nil)

	cs, err := kubernetes.NewForConfig(&rest.Config{Host: c.app.URL()})
	if err != nil {
		t.Fatal(err)
	}
	// The gate's owner annotation reads as Kubernetes' ownerReferences.
	d0, err := cs.AppsV1().Deployments("default").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rss, err := cs.AppsV1().ReplicaSets("default").List(t.Context(), metav1.ListOptions{})
	if err != nil || len(rss.Items) != 1 {
		t.Fatalf("ReplicaSets: %v, %v", rss, err)
	}
	if refs := rss.Items[0].OwnerReferences; len(refs) != 1 || refs[0].Kind != "Deployment" || refs[0].APIVersion != "apps/v1" || refs[0].Name != "web" ||
		refs[0].UID != d0.UID || refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion == nil || !*refs[0].BlockOwnerDeletion {
		t.Fatalf("the ReplicaSet's ownerReferences %+v; want the Deployment (uid %s) as its controller", refs, d0.UID)
	}
	// Watched from before the delete: the dependents may be gone, and the
	// Deployment with them, before a read after the delete could see it
	// terminating, so the watch is what shows the state it passed through.
	w, err := cs.AppsV1().Deployments("default").Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=web", ResourceVersion: d0.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fg := metav1.DeletePropagationForeground
	if err := cs.AppsV1().Deployments("default").Delete(t.Context(), "web", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	terminating := false
	for ev := range w.ResultChan() {
		d, ok := ev.Object.(*appsv1.Deployment)
		if !ok {
			t.Fatalf("watch event %s of %T", ev.Type, ev.Object)
		}
		if ev.Type == watch.Deleted {
			break
		}
		if d.DeletionTimestamp != nil && slices.Contains(d.Finalizers, "foregroundDeletion") {
			terminating = true
			break
		}
	}
	if !terminating {
		t.Fatal("the Deployment was deleted without first showing a deletionTimestamp and the foregroundDeletion finalizer")
	}
	// Read the owner first: once it is gone, nothing it owned may remain.
	c.poll("the Deployment gone", time.Minute, func() bool {
		if c.app.Store().Get(webKey) != nil {
			return false
		}
		if rss, pods := c.replicaSets(), c.allPods(); len(rss)+len(pods) > 0 {
			t.Fatalf("the Deployment left before its dependents: %d ReplicaSets, %d pods remain", len(rss), len(pods))
		}
		return true
	})
}

// A Deployment deleted with --cascade=orphan leaves alone: its ReplicaSet
// loses its owner and keeps its pods running; the Deployment applied again
// adopts the ReplicaSet back, and the same pods go on.
func TestOrphanDeletionLeavesTheDependentsAndTheOwnerAdoptsThemBack(t *testing.T) {
	c := startCluster(t, nil)
	c.apply(deploymentYAML(2, "module:v1", "a"))
	before := c.waitRunning(webKey, 2, time.Minute, nil)
	rs := c.replicaSets()
	if len(rs) != 1 {
		t.Fatalf("%d ReplicaSets, want 1", len(rs))
	}
	rsKey := projections.ObjectKey(rs[0])

	if _, err := c.client.DeleteWith(t.Context(), api.Key{Kind: webKey.Kind, Namespace: webKey.Namespace, Name: webKey.Name}, api.DeleteOptions{Cascade: "orphan"}); err != nil {
		t.Fatal(err)
	}
	c.poll("the Deployment gone", time.Minute, func() bool { return c.app.Store().Get(webKey) == nil })
	got := c.app.Store().Get(rsKey)
	if got == nil || got.GetStatus().GetGoal() != projections.GoalExists {
		t.Fatalf("the orphaned ReplicaSet is %v, want it kept", got.GetStatus())
	}
	if o, ok := workload.OwnerOf(got.GetMetadata()); ok {
		t.Fatalf("the orphaned ReplicaSet still names its owner %s", o)
	}
	// It goes on keeping its pods, which nobody deletes.
	c.poll("the pods still running", 5*time.Second, func() bool { return len(c.pods(rsKey)) == 2 })
	for _, p := range c.allPods() {
		if p.GetStatus().GetGoal() != projections.GoalExists {
			t.Fatalf("pod %s is being deleted after an orphan deletion of its Deployment's owner", p.GetMetadata().GetName())
		}
	}

	c.apply(deploymentYAML(2, "module:v1", "a"))
	c.poll("the ReplicaSet adopted again", time.Minute, func() bool {
		o, ok := workload.OwnerOf(c.app.Store().Get(rsKey).GetMetadata())
		return ok && o == webKey
	})
	after := c.waitRunning(webKey, 2, time.Minute, nil)
	names := func(ps []*schemas.Object) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.GetMetadata().GetName())
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(names(before), names(after)) {
		t.Fatalf("pods before %v, after the adoption %v: want the same pods", names(before), names(after))
	}
	if rss := c.replicaSets(); len(rss) != 1 {
		t.Fatalf("%d ReplicaSets after the adoption, want 1", len(rss))
	}

	// The ReplicaSet orphaned in turn releases its pods, which run on; the
	// Deployment makes it again under the same name, and it adopts them.
	if _, err := c.client.DeleteWith(t.Context(), api.Key{Kind: rsKey.Kind, Namespace: rsKey.Namespace, Name: rsKey.Name}, api.DeleteOptions{Cascade: "orphan"}); err != nil {
		t.Fatal(err)
	}
	c.poll("the ReplicaSet made again and its pods adopted", time.Minute, func() bool {
		rs := c.app.Store().Get(rsKey)
		if rs == nil || rs.GetStatus().GetGoal() != projections.GoalExists {
			return false
		}
		ps := c.pods(rsKey)
		return len(ps) == 2 && ready(ps[0]) && ready(ps[1])
	})
	if got := names(c.pods(rsKey)); !slices.Equal(names(before), got) {
		t.Fatalf("pods before %v, after the ReplicaSet's orphaning %v: want the same pods", names(before), got)
	}
	// Released and adopted, they never started again.
	for _, p := range before {
		evs, err := c.app.Log().History(t.Context(), projections.ObjectKey(p).Proto())
		if err != nil {
			t.Fatal(err)
		}
		starts := 0
		for _, ev := range evs {
			// Starting reported, or passed on the way to a later state
			// (decision 0089).
			st := ev.GetObject().GetStatus()
			for _, state := range append(pod.Passed(st), pod.StateOf(st)) {
				if state == "Starting" {
					starts++
				}
			}
		}
		if starts != 1 {
			t.Errorf("pod %s started %d times; release and adoption must not restart it", p.GetMetadata().GetName(), starts)
		}
	}
}
