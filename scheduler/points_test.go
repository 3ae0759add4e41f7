package scheduler

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/projections"
)

// narrowing is a PreFilterResultPlugin naming nodes.
type narrowing struct {
	name  string
	nodes []string
}

func (n narrowing) Name() string { return n.name }
func (n narrowing) PreFilter(ctx context.Context, s *CycleState, p *PodInfo) *Status {
	_, st := n.PreFilterResult(ctx, s, p)
	return st
}
func (n narrowing) PreFilterResult(context.Context, *CycleState, *PodInfo) ([]string, *Status) {
	return n.nodes, nil
}

// eventful rejects every node and registers only node additions.
type eventful struct{}

func (eventful) Name() string { return "Eventful" }
func (eventful) Filter(context.Context, *CycleState, *PodInfo, *NodeInfo) *Status {
	return NewStatus(Unschedulable, "no")
}
func (eventful) EventsToRegister(context.Context) []ClusterEvent {
	return []ClusterEvent{{Resource: "Node", ActionType: Add}}
}

func snapOf(names ...string) *Snapshot {
	var nodes []*NodeInfo
	for _, n := range names {
		nodes = append(nodes, NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, 1))
	}
	return NewSnapshot(1, nodes)
}

// TestPreFilterResultNarrowsNodes: the node names of PreFilter results
// intersect, only they are evaluated, and the others count as rejected by
// the plugins that narrowed, as kube-scheduler.
func TestPreFilterResultNarrowsNodes(t *testing.T) {
	prof := &Profile{Name: "p"}
	prof.AddPlugin(narrowing{"A", []string{"a", "b", "c"}}, 1)
	prof.AddPlugin(narrowing{"B", []string{"b", "c", "d"}}, 1)
	prof.AddPlugin(narrowing{"All", nil}, 1)
	pod := NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "d"}})
	d := Cycle(context.Background(), prof, NewCycleState(snapOf("a", "b", "c", "d", "e"), 1), pod, 0)
	if d.Evaluated != 2 || (d.Node != "b" && d.Node != "c") || d.Rejections["node(s) didn't satisfy plugin(s) [A B]"] != 3 {
		t.Fatalf("evaluated %d, node %q, rejections %v", d.Evaluated, d.Node, d.Rejections)
	}
	prof.AddPlugin(narrowing{"C", []string{"e"}}, 1)
	d = Cycle(context.Background(), prof, NewCycleState(snapOf("a", "b", "c", "d", "e"), 2), pod, 0)
	if d.Node != "" || d.Status.GetCode() != UnschedulableAndUnresolvable {
		t.Fatalf("empty intersection: node %q status %v", d.Node, d.Status)
	}
}

// TestInterestedFollowsRegisteredEvents: a pod rejected by a plugin with
// EnqueueExtensions is requeued only by the events it registered; by a
// plugin without, by any.
func TestInterestedFollowsRegisteredEvents(t *testing.T) {
	prof := &Profile{Name: "p"}
	prof.AddPlugin(eventful{}, 1)
	prof.AddPlugin(NodeName{}, 1)
	ctx := context.Background()
	for _, tc := range []struct {
		by       []string
		resource string
		action   ActionType
		want     bool
	}{
		{[]string{"Eventful"}, "Node", Add, true},
		{[]string{"Eventful"}, "Node", Add | Update, true},
		{[]string{"Eventful"}, "Node", Delete, false},
		{[]string{"Eventful"}, "Pod", Delete, false},
		{[]string{"NodeName"}, "Pod", Delete, true},
		{[]string{"Eventful", "NodeName"}, "Pod", Delete, true},
	} {
		if got := prof.Interested(ctx, tc.by, tc.resource, tc.action); got != tc.want {
			t.Errorf("%v on %s %b: %v, want %v", tc.by, tc.resource, tc.action, got, tc.want)
		}
	}
}

// waiter makes every pod wait on Permit and counts PostBind.
type waiter struct{ postBound chan string }

func (*waiter) Name() string { return "Waiter" }
func (*waiter) Permit(context.Context, *CycleState, *PodInfo, string) (*Status, time.Duration) {
	return NewStatus(Wait), time.Minute
}
func (w *waiter) PostBind(_ context.Context, _ *CycleState, p *PodInfo, node string) {
	w.postBound <- p.Key + "@" + node
}

// TestPermitWaitThenAllow: a pod Permit makes wait is not bound until it
// is allowed; then it binds and PostBind runs once the Bound event lands.
func TestPermitWaitThenAllow(t *testing.T) {
	profiles, err := DefaultConfig().Build(DefaultRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w := &waiter{postBound: make(chan string, 1)}
	profiles[DefaultSchedulerName].AddPlugin(w, 1)
	c := newCluster(t, profiles)
	c.apply(fixtureNode(t, "n1", attrs(nil), 0), fixturePod(t, "default/w", attrs(nil), 0))
	res, err := c.sched.Schedule(c.ctx, c.pod("default", "w"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conditions) == 0 || res.Conditions[0].Reason != "WaitingOnPermit" {
		t.Fatalf("conditions %v", res.Conditions)
	}
	if again, _ := c.sched.Schedule(c.ctx, c.pod("default", "w")); !again.KeepStatus {
		t.Fatal("a waiting pod was scheduled again")
	}
	if n := c.pod("default", "w").GetSpec().GetFields()["nodeName"].GetStringValue(); n != "" {
		t.Fatalf("bound to %s before it was allowed", n)
	}
	if !c.sched.AllowWaitingPod("uid-w") {
		t.Fatal("the pod was not waiting")
	}
	c.waitBound([]projections.Key{{Kind: "Pod", Namespace: "default", Name: "w"}})
	select {
	case got := <-w.postBound:
		if got != "default/w@n1" {
			t.Fatalf("PostBind %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("PostBind did not run")
	}
}
