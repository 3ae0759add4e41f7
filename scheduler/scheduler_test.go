package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

func TestScheduleAppendsBound(t *testing.T) {
	c := newCluster(t, nil)
	c.apply(fixtureNode(t, "n1", attrs([]string{"cpu=2"}), 0), fixtureNode(t, "n2", attrs([]string{"cpu=1"}), 0),
		fixturePod(t, "default/a", attrs([]string{"cpu=1500m"}), 0), fixturePod(t, "default/b", attrs([]string{"cpu=4"}), 0))

	res, err := c.sched.Schedule(context.Background(), c.pod("default", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Conditions[0]; got.Type != PodScheduled || got.Status != "True" || !res.KeepStatus || res.RequeueAfter == 0 {
		t.Fatalf("result = %+v, want PodScheduled True, nothing written, a run again should the bind fail", res)
	}
	bound := c.waitBound([]projections.Key{{Kind: "Pod", Namespace: "default", Name: "a"}})
	if n := bound[projections.Key{Kind: "Pod", Namespace: "default", Name: "a"}]; n != "n1" {
		t.Fatalf("a on %q, want n1", n)
	}
	// The Bound event records the decision.
	evs, err := c.log.History(context.Background(), projections.Key{Kind: "Pod", Namespace: "default", Name: "a"}.Proto())
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Type != schemas.EventType_EVENT_TYPE_BOUND {
		t.Fatalf("last event %v, want BOUND", last.Type)
	}
	rd, err := ParseRecord(last.Detail)
	if err != nil {
		t.Fatal(err)
	}
	if rd.Node != "n1" || rd.Profile != DefaultSchedulerName || rd.RejectedBy["NodeResourcesFit"] != 1 || rd.Versions["NodeResourcesFit"] != builtinVersion+"+LeastAllocated" {
		t.Fatalf("recorded decision %+v", rd.Decision)
	}

	res, err = c.sched.Schedule(context.Background(), c.pod("default", "b"))
	if err != nil {
		t.Fatal(err)
	}
	want := "0/2 nodes are available: 2 Insufficient cpu."
	if res.Message != want || res.Conditions[0].Reason != "Unschedulable" || res.Conditions[0].Message != want {
		t.Fatalf("result %+v, want message %q", res, want)
	}
	cond := res.Details.GetFields()["conditions"].GetListValue().GetValues()[0].GetStructValue().GetFields()
	if res.Details.GetFields()["phase"].GetStringValue() != "Pending" || cond["type"].GetStringValue() != PodScheduled ||
		cond["status"].GetStringValue() != "False" || cond["message"].GetStringValue() != want {
		t.Fatalf("status details %v, want a v1 PodStatus with PodScheduled=False", res.Details)
	}
	// A pod no node takes is not Ready (the runtime would record a run
	// without a Ready condition as Ready=True).
	if len(res.Conditions) != 2 || res.Conditions[1].Type != "Ready" || res.Conditions[1].Status != "False" {
		t.Fatalf("conditions %v, want Ready=False beside PodScheduled=False", res.Conditions)
	}
	// A new node is a hint for b; a pod that is merely updated is not.
	if keys := c.sched.Requeue(&schemas.ObjectRecord{Kind: "Node"}); len(keys) != 1 || keys[0].Name != "b" {
		t.Fatalf("Requeue(Node) = %v, want [b]", keys)
	}
	if keys := c.sched.Requeue(&schemas.ObjectRecord{Kind: "Pod", Status: &schemas.Status{Goal: "exists"}}); len(keys) != 0 {
		t.Fatalf("Requeue(Pod) = %v, want none", keys)
	}
	// A pod deleted or finished frees room.
	if keys := c.sched.Requeue(&schemas.ObjectRecord{Kind: "Pod", Status: &schemas.Status{Goal: "deleted"}}); len(keys) != 1 {
		t.Fatalf("Requeue(deleted Pod) = %v, want [b]", keys)
	}
	finished := &schemas.Status{Goal: "exists", Details: mustStruct(t, map[string]any{"phase": "Succeeded"})}
	if keys := c.sched.Requeue(&schemas.ObjectRecord{Kind: "Pod", Status: finished}); len(keys) != 1 {
		t.Fatalf("Requeue(finished Pod) = %v, want [b]", keys)
	}
	c.apply(fixtureNode(t, "big", attrs([]string{"cpu=8"}), 0))
	if _, err := c.sched.Schedule(context.Background(), c.pod("default", "b")); err != nil {
		t.Fatal(err)
	}
	if n := c.waitBound([]projections.Key{{Kind: "Pod", Namespace: "default", Name: "b"}}); n[projections.Key{Kind: "Pod", Namespace: "default", Name: "b"}] != "big" {
		t.Fatalf("b on %v, want big", n)
	}
	if keys := c.sched.Requeue(&schemas.ObjectRecord{Kind: "Node"}); len(keys) != 0 {
		t.Fatalf("Requeue after b was placed = %v, want none", keys)
	}
}

func TestScheduleStaleVersionConflicts(t *testing.T) {
	c := newCluster(t, nil)
	c.apply(fixtureNode(t, "n1", nil, 0), fixturePod(t, "default/a", nil, 0))
	stale := c.pod("default", "a")
	c.apply(fixturePod(t, "default/a", attrs([]string{"labels=v=2"}), 0))
	// The stale read is rejected by the log; the assumption is dropped.
	if _, err := c.sched.Schedule(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	if err := c.sched.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.sched.Cache().IsAssumed("default/a") {
		t.Fatal("a stays assumed after its Bound was rejected")
	}
	o := c.pod("default", "a")
	if o.GetSpec().GetFields()["nodeName"] != nil {
		t.Fatal("a stale read bound the pod")
	}
	// The current version binds.
	if _, err := c.sched.Schedule(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	c.waitBound([]projections.Key{{Kind: "Pod", Namespace: "default", Name: "a"}})
}

// TestBurstsNeverOvercommit is the property: whatever the nodes and pods,
// pods scheduled concurrently in bursts never take more of a node than it
// has.
func TestBurstsNeverOvercommit(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			c := newCluster(t, nil)
			var objs []*schemas.Object
			nodes := 3 + rng.IntN(8)
			for i := 0; i < nodes; i++ {
				objs = append(objs, fixtureNode(t, fmt.Sprintf("n%d", i), attrs([]string{
					fmt.Sprintf("cpu=%dm", 500+rng.IntN(3500)), fmt.Sprintf("memory=%dMi", 512+rng.IntN(4096)), fmt.Sprintf("pods=%d", 3+rng.IntN(20))}), 0))
			}
			pods := 60 + rng.IntN(60)
			for i := 0; i < pods; i++ {
				objs = append(objs, fixturePod(t, fmt.Sprintf("default/p%d", i), attrs([]string{
					fmt.Sprintf("cpu=%dm", 50+rng.IntN(900)), fmt.Sprintf("memory=%dMi", 16+rng.IntN(1024))}), 0))
			}
			c.apply(objs...)
			var wg sync.WaitGroup
			var mu sync.Mutex
			var placed []projections.Key
			work := make(chan int)
			for w := 0; w < 8; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						k := projections.Key{Kind: "Pod", Namespace: "default", Name: fmt.Sprintf("p%d", i)}
						res, err := c.sched.Schedule(context.Background(), c.store.Get(k))
						if err != nil {
							t.Error(err)
							continue
						}
						if strings.HasPrefix(res.Message, "binding") {
							mu.Lock()
							placed = append(placed, k)
							mu.Unlock()
						}
					}
				}()
			}
			for i := 0; i < pods; i++ {
				work <- i
			}
			close(work)
			wg.Wait()
			c.waitBound(placed)
			// Sum what the projection holds per node.
			objsNow, _ := c.store.List(projections.Query{Kind: "Pod"})
			used := map[string]Resources{}
			for _, o := range objsNow {
				pod, err := PodFromObject(o)
				if err != nil {
					t.Fatal(err)
				}
				if pod.Spec.NodeName == "" {
					continue
				}
				r := used[pod.Spec.NodeName]
				r.Add(NewPodInfo(pod).Requests)
				used[pod.Spec.NodeName] = r
			}
			nodeObjs, _ := c.store.List(projections.Query{Kind: "Node"})
			for _, o := range nodeObjs {
				node, _ := NodeFromObject(o)
				alloc := ResourcesOf(node.Status.Allocatable)
				u := used[node.Name]
				if u.MilliCPU > alloc.MilliCPU || u.Memory > alloc.Memory || u.Pods > alloc.Pods {
					t.Errorf("node %s overcommitted: used %+v of %+v", node.Name, u, alloc)
				}
			}
			if len(placed) == 0 {
				t.Fatal("nothing placed")
			}
		})
	}
}

// The cache follows the projection's records: nodes at their resource
// versions, a pod's own Bound confirmed (not converted again), a node's
// change seen, a bound pod's deletion freeing its room.
func TestCacheFollowsRecords(t *testing.T) {
	c := newCluster(t, nil)
	c.apply(fixtureNode(t, "n1", attrs([]string{"cpu=2"}), 0), fixturePod(t, "default/a", attrs([]string{"cpu=1500m"}), 0))
	seq, err := c.sched.SyncCache()
	if err != nil {
		t.Fatal(err)
	}
	if seq != c.store.Seq() {
		t.Fatalf("SyncCache at %d, projection at %d", seq, c.store.Seq())
	}
	n1 := projections.Key{Kind: "Node", Name: "n1"}
	if got, want := c.sched.Cache().NodeRevision("n1"), c.store.Get(n1).GetMetadata().GetResourceVersion(); got != want || got == 0 {
		t.Fatalf("cache holds n1 at revision %d, projection at %d", got, want)
	}
	if _, err := c.sched.Schedule(context.Background(), c.pod("default", "a")); err != nil {
		t.Fatal(err)
	}
	c.waitBound([]projections.Key{{Kind: "Pod", Namespace: "default", Name: "a"}})
	if _, err := c.sched.SyncCache(); err != nil {
		t.Fatal(err)
	}
	snap := c.sched.Cache().Snapshot()
	ni := snap.Get("n1")
	if ni == nil || len(ni.Pods) != 1 || ni.Pods[0].Pod.Name != "a" {
		t.Fatalf("n1 in the cache: %+v", ni)
	}
	c.apply(fixtureNode(t, "n1", attrs([]string{"cpu=3"}), 0))
	if _, err := c.sched.SyncCache(); err != nil {
		t.Fatal(err)
	}
	if got, want := c.sched.Cache().NodeRevision("n1"), c.store.Get(n1).GetMetadata().GetResourceVersion(); got != want {
		t.Fatalf("after n1 changed the cache holds revision %d, projection %d", got, want)
	}
	ni = c.sched.Cache().Snapshot().Get("n1")
	if ni == nil || ni.Allocatable.MilliCPU != 3000 || len(ni.Pods) != 1 {
		t.Fatalf("n1 after its change: %+v", ni)
	}
}
