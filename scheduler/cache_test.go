package scheduler

import (
	"fmt"
	"hash/fnv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A plugin's node value stays with the node object while only its pods
// change (the cache rebuilds the NodeInfo), and a new revision of the node
// drops it.
func TestNodeValueFollowsTheNodeObject(t *testing.T) {
	c := NewCache()
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	c.SetNode(node, 1)
	key, other := NewNodeValueKey(), NewNodeValueKey()
	first := c.Snapshot().Get("n1")
	if v := first.NodeValue(key); v != nil {
		t.Fatalf("new node has value %v", v)
	}
	first.StoreNodeValue(key, "encoded at 1")
	first.StoreNodeValue(other, 7)

	pod := NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}})
	c.Assume(pod, "n1")
	second := c.Snapshot().Get("n1")
	if second == first || len(second.Pods) != 1 {
		t.Fatalf("the cache did not rebuild the node's info for its pod")
	}
	if v := second.NodeValue(key); v != "encoded at 1" {
		t.Fatalf("value after a pod change = %v, want the stored one", v)
	}
	if v := second.NodeValue(other); v != 7 {
		t.Fatalf("other key's value = %v, want 7", v)
	}
	second.StoreNodeValue(key, "again")
	if v := first.NodeValue(key); v != "again" {
		t.Fatalf("NodeInfos of one node object do not share values: %v", v)
	}

	c.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}}}, 2)
	if v := c.Snapshot().Get("n1").NodeValue(key); v != nil {
		t.Fatalf("value survived a new revision of the node: %v", v)
	}
	if v := second.NodeValue(key); v != "again" {
		t.Fatalf("an older snapshot's node lost its value: %v", v)
	}
}

// A node object holds any number of plugins' values, each replaced in
// place by its key.
func TestNodeValuesOfManyPlugins(t *testing.T) {
	ni := NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, 1)
	keys := make([]*NodeValueKey, 5)
	for i := range keys {
		keys[i] = NewNodeValueKey()
		ni.StoreNodeValue(keys[i], i)
	}
	ni.StoreNodeValue(keys[0], "zero")
	ni.StoreNodeValue(keys[3], "three")
	want := []any{"zero", 1, 2, "three", 4}
	for i, k := range keys {
		if v := ni.NodeValue(k); v != want[i] {
			t.Fatalf("value %d = %v, want %v", i, v, want[i])
		}
	}
	if v := ni.NodeValue(NewNodeValueKey()); v != nil {
		t.Fatalf("a key never stored has value %v", v)
	}
}

// A pod's Bound event confirms its assumption in place: the pod stays
// counted on its node, whose info is not rebuilt; a Bound to another node
// is no confirmation.
func TestConfirmAssumedKeepsTheNodeInfo(t *testing.T) {
	c := NewCache()
	c.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, 1)
	pod := NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}})
	c.Assume(pod, "n1")
	before := c.Snapshot().Get("n1")
	if c.ConfirmAssumed("ns/p", "n2", 5) {
		t.Fatal("confirmed on a node it was not assumed on")
	}
	if !c.ConfirmAssumed("ns/p", "n1", 5) {
		t.Fatal("assumed pod not confirmed")
	}
	if c.IsAssumed("ns/p") || len(c.Assumed()) != 0 {
		t.Fatal("pod still assumed after its confirmation")
	}
	after := c.Snapshot().Get("n1")
	if after != before || len(after.Pods) != 1 || after.Pods[0] != pod {
		t.Fatalf("node info changed by a confirmation: %d pods", len(after.Pods))
	}
	if c.ConfirmAssumed("ns/p", "n1", 6) {
		t.Fatal("a confirmed pod confirmed again")
	}
	// Later changes of the pod take the ordinary path.
	c.SetPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{NodeName: "n1"},
		Status: v1.PodStatus{Phase: v1.PodSucceeded}}, 7)
	if n := c.Snapshot().Get("n1"); len(n.Pods) != 0 {
		t.Fatalf("finished pod still counted: %d", len(n.Pods))
	}
}

// The tie-break is FNV-1a of pod, a zero byte and node, as decisions
// already recorded were ranked.
func TestTieBreakIsFNV1a(t *testing.T) {
	for _, c := range [][2]string{{"ns/p", "node-00001"}, {"", ""}, {"default/pod-00042", "n"}} {
		h := fnv.New64a()
		h.Write([]byte(c[0]))
		h.Write([]byte{0})
		h.Write([]byte(c[1]))
		if got, want := tieBreak(c[0], c[1]), h.Sum64(); got != want {
			t.Errorf("tieBreak(%q, %q) = %x, want %x", c[0], c[1], got, want)
		}
	}
}

// Snapshots stay as they were taken while the cache changes under them,
// over many pages: a pod assumed on a node changes that node in the next
// snapshot only, the pages without a change are shared, and a node that
// joins reorders the whole list.
func TestSnapshotPages(t *testing.T) {
	c := NewCache()
	const nodes = 3*snapshotPage + 17
	name := func(i int) string { return fmt.Sprintf("n%05d", i) }
	for i := range nodes {
		c.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name(i)}}, uint64(i+1))
	}
	check := func(s *Snapshot, n int, pods map[string]int) {
		t.Helper()
		if s.Len() != n || len(s.Nodes()) != n {
			t.Fatalf("snapshot of %d nodes has Len %d, %d in Nodes", n, s.Len(), len(s.Nodes()))
		}
		for i := range n {
			ni := s.At(i)
			if ni != s.Nodes()[i] || s.Get(ni.Name()) != ni || (i > 0 && s.At(i-1).Name() >= ni.Name()) {
				t.Fatalf("node %d: At %s, Nodes %s, out of order or not found by name", i, ni.Name(), s.Nodes()[i].Name())
			}
			if len(ni.Pods) != pods[ni.Name()] {
				t.Fatalf("node %s has %d pods, want %d", ni.Name(), len(ni.Pods), pods[ni.Name()])
			}
		}
	}
	first := c.Snapshot()
	check(first, nodes, nil)
	pod := func(n string) *PodInfo {
		return NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + n, Namespace: "ns"}})
	}
	c.Assume(pod(name(5)), name(5))
	c.Assume(pod(name(2*snapshotPage+1)), name(2*snapshotPage+1))
	second := c.Snapshot()
	want := map[string]int{name(5): 1, name(2*snapshotPage + 1): 1}
	check(first, nodes, nil)
	check(second, nodes, want)
	if &first.pages[1][0] != &second.pages[1][0] || &first.pages[0][0] == &second.pages[0][0] {
		t.Fatal("a page without a change was copied, or a changed page was not")
	}
	c.Assume(pod(name(nodes-1)), name(nodes-1))
	third := c.Snapshot()
	want[name(nodes-1)] = 1
	check(second, nodes, map[string]int{name(5): 1, name(2*snapshotPage + 1): 1})
	check(third, nodes, want)
	with := third.WithPod(name(snapshotPage), pod("x"))
	check(third, nodes, want)
	want[name(snapshotPage)] = 1
	check(with, nodes, want)

	c.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a-first"}}, 99)
	fourth := c.Snapshot()
	delete(want, name(snapshotPage))
	check(fourth, nodes+1, want)
	check(third, nodes, map[string]int{name(5): 1, name(2*snapshotPage + 1): 1, name(nodes - 1): 1})
	if fourth.At(0).Name() != "a-first" {
		t.Fatalf("first node %s", fourth.At(0).Name())
	}
}
