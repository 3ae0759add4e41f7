package wasm

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/scheduler"
)

// A node object without a revision (0) is encoded once and kept with the
// object like any other: the guests are handed the same pseudo-revision
// on every call and decode it once, and a new object of the node (its
// change) is encoded again under a new one, so that no guest judges it by
// its old labels. Encoding such a node afresh on every call made the
// guests decode every node on every call.
func TestNodeWithoutRevisionEncodedOnce(t *testing.T) {
	pl := loadGuest(t, "labelfilter").(*Plugin)
	cache := scheduler.NewCache()
	node := func(i int, zone string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%03d", i), Labels: map[string]string{"zone": zone}}}
	}
	const nodes = 100
	for i := range nodes {
		cache.SetNode(node(i, "a"), 0)
	}
	pod := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: v1.PodSpec{NodeSelector: map[string]string{"zone": "a"}}})
	cycle := uint64(0)
	filter := func(snap *scheduler.Snapshot) ([]*encodedNode, []*scheduler.Status) {
		t.Helper()
		cycle++
		out := make([]*scheduler.Status, snap.Len())
		pl.FilterNodes(context.Background(), scheduler.NewCycleState(snap, cycle), pod, snap.Nodes(), out)
		enc := make([]*encodedNode, snap.Len())
		for i, n := range snap.Nodes() {
			e, ok := n.NodeValue(pl.nodeKey).(*encodedNode)
			if !ok {
				t.Fatalf("cycle %d: %s has no encoding kept", cycle, n.Name())
			}
			enc[i] = e
		}
		return enc, out
	}
	first, out := filter(cache.Snapshot())
	for i, st := range out {
		if !st.IsSuccess() {
			t.Fatalf("node-%03d: %v", i, st)
		}
	}
	// A pod assumed on one node: the snapshot rebuilds that node's
	// NodeInfo, which keeps its node object and so its encoding.
	cache.Assume(scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "default"}}), "node-007")
	again, _ := filter(cache.Snapshot())
	for i := range again {
		if again[i] != first[i] {
			t.Fatalf("node-%03d encoded again (revision %d, then %d)", i, first[i].rev, again[i].rev)
		}
		if first[i].rev == 0 {
			t.Fatalf("node-%03d handed to the guests at revision 0", i)
		}
	}
	// node-042 changes, still without a revision: a new encoding, under a
	// new pseudo-revision, and the guest judges the new labels.
	cache.SetNode(node(42, "b"), 0)
	changed, out := filter(cache.Snapshot())
	for i := range changed {
		if i == 42 {
			if changed[i] == first[i] || changed[i].rev == first[i].rev {
				t.Fatalf("node-042 changed and kept its encoding at revision %d", first[i].rev)
			}
			if out[i].IsSuccess() {
				t.Fatal("node-042 in zone b passed a filter for zone a: the guest judged its old labels")
			}
			continue
		}
		if changed[i] != first[i] || !out[i].IsSuccess() {
			t.Fatalf("node-%03d: encoding kept %v, status %v", i, changed[i] == first[i], out[i])
		}
	}
}
