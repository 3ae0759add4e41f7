package wasm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/scheduler"
)

// The native twins of the example guests.
type nativeLabelFilter struct{}

func (nativeLabelFilter) Name() string { return "labelfilter" }
func (nativeLabelFilter) Filter(_ context.Context, _ *scheduler.CycleState, pod *scheduler.PodInfo, node *scheduler.NodeInfo) *scheduler.Status {
	for k, v := range pod.Pod.Spec.NodeSelector {
		if node.Node.Labels[k] != v {
			return scheduler.NewStatus(scheduler.UnschedulableAndUnresolvable, "node(s) didn't match the pod's labels")
		}
	}
	return nil
}

type nativeNodeNumber struct{}

func (nativeNodeNumber) Name() string { return "nodenumber" }
func (nativeNodeNumber) Score(_ context.Context, _ *scheduler.CycleState, pod *scheduler.PodInfo, node *scheduler.NodeInfo) (int64, *scheduler.Status) {
	a, b := pod.Pod.Name, node.Name()
	if a != "" && b != "" && a[len(a)-1] >= '0' && a[len(a)-1] <= '9' && a[len(a)-1] == b[len(b)-1] {
		return 100, nil
	}
	return 0, nil
}

func loadGuest(tb testing.TB, name string) scheduler.Plugin {
	tb.Helper()
	p, err := Load(context.Background(), name, args(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.(Closer).Close() })
	return p
}

var revision uint64

func randomCase(rng *rand.Rand, i int) (*v1.Pod, []*scheduler.NodeInfo) {
	vals := []string{"a", "b", "c"}
	keys := []string{"zone", "disk", "tier"}
	var nodes []*scheduler.NodeInfo
	for j := 0; j < 3+rng.IntN(10); j++ {
		labels := map[string]string{}
		for _, k := range keys {
			if rng.IntN(3) > 0 {
				labels[k] = vals[rng.IntN(len(vals))]
			}
		}
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", rng.IntN(1000)), Labels: labels}}
		// A revision names one version of a node: a fresh one per case.
		revision++
		nodes = append(nodes, scheduler.NewNodeInfo(n, revision))
	}
	sel := map[string]string{}
	for _, k := range keys {
		if rng.IntN(3) == 0 {
			sel[k] = vals[rng.IntN(len(vals))]
		}
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "default"}, Spec: v1.PodSpec{NodeSelector: sel}}
	return pod, dedupe(nodes)
}

func dedupe(nodes []*scheduler.NodeInfo) []*scheduler.NodeInfo {
	seen := map[string]bool{}
	var out []*scheduler.NodeInfo
	for _, n := range nodes {
		if !seen[n.Name()] {
			seen[n.Name()] = true
			out = append(out, n)
		}
	}
	return out
}

// perNode hides a guest's batch calls: the framework calls it one node at
// a time, as it calls a guest of the extension's shape.
type perNode struct{ pl scheduler.Plugin }

func (p perNode) Name() string { return p.pl.Name() }
func (p perNode) Filter(ctx context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, n *scheduler.NodeInfo) *scheduler.Status {
	return p.pl.(scheduler.FilterPlugin).Filter(ctx, s, pod, n)
}

type perNodeScore struct{ pl scheduler.Plugin }

func (p perNodeScore) Name() string { return p.pl.Name() }
func (p perNodeScore) Score(ctx context.Context, s *scheduler.CycleState, pod *scheduler.PodInfo, n *scheduler.NodeInfo) (int64, *scheduler.Status) {
	return p.pl.(scheduler.ScorePlugin).Score(ctx, s, pod, n)
}

// TestNativeAndWasmPlaceIdentically runs the same filter and scorer written
// natively and as guests on 10,000 random cases, the guests called in
// batches (decision 0031) and one node at a time.
func TestNativeAndWasmPlaceIdentically(t *testing.T) {
	native := &scheduler.Profile{Name: "native", Parallelism: 4}
	native.AddPlugin(nativeLabelFilter{}, 1)
	native.AddPlugin(nativeNodeNumber{}, 1)
	guest := &scheduler.Profile{Name: "wasm", Parallelism: 4}
	lf, nn := loadGuest(t, "labelfilter"), loadGuest(t, "nodenumber")
	if _, ok := lf.(scheduler.BatchFilterPlugin); !ok {
		t.Fatal("labelfilter does not filter in batches")
	}
	if _, ok := nn.(scheduler.BatchScorePlugin); !ok {
		t.Fatal("nodenumber does not score in batches")
	}
	guest.AddPlugin(lf, 1)
	guest.AddPlugin(nn, 1)
	single := &scheduler.Profile{Name: "wasm-per-node", Parallelism: 4}
	single.AddPlugin(perNode{lf}, 1)
	single.AddPlugin(perNodeScore{nn}, 1)

	rng := rand.New(rand.NewPCG(7, 7))
	placed := 0
	for i := 0; i < 10000; i++ {
		pod, nodes := randomCase(rng, i)
		snap := scheduler.NewSnapshot(uint64(i), nodes)
		pi := scheduler.NewPodInfo(pod)
		start := rng.IntN(20)
		a := scheduler.Cycle(context.Background(), native, scheduler.NewCycleState(snap, uint64(i+1)), pi, start)
		b := scheduler.Cycle(context.Background(), guest, scheduler.NewCycleState(snap, uint64(i+1)), pi, start)
		if a.Node != b.Node || a.Message() != b.Message() || fmt.Sprint(a.Totals) != fmt.Sprint(b.Totals) {
			t.Fatalf("case %d: native %q %q %v, wasm %q %q %v", i, a.Node, a.Message(), a.Totals, b.Node, b.Message(), b.Totals)
		}
		c := scheduler.Cycle(context.Background(), single, scheduler.NewCycleState(snap, uint64(i+1)), pi, start)
		if a.Node != c.Node || a.Message() != c.Message() || fmt.Sprint(a.Totals) != fmt.Sprint(c.Totals) {
			t.Fatalf("case %d: native %q %q %v, wasm one node a call %q %q %v", i, a.Node, a.Message(), a.Totals, c.Node, c.Message(), c.Totals)
		}
		if a.Node != "" {
			placed++
		}
	}
	if placed < 1000 || placed > 9000 {
		t.Fatalf("%d of 10000 cases placed: the cases do not exercise both outcomes", placed)
	}
}

// TestFaultyGuestsFailCleanly: a guest that traps, loops or exhausts its
// memory fails the call with a reason, and the next calls work; with one
// node (a call per node) and with two (a batch call).
func TestFaultyGuestsFailCleanly(t *testing.T) {
	for _, tc := range []struct{ guest, want string }{
		{"trap", "panic: assignment to entry in nil map"},
		{"loop", "past its 200ms budget"},
		{"hog", "its instance was replaced"}, // out of memory, or past the budget on a slow machine
	} {
		for _, count := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/nodes=%d", tc.guest, count), func(t *testing.T) {
				prof := &scheduler.Profile{Name: tc.guest}
				prof.AddPlugin(loadGuest(t, tc.guest), 1)
				var nodes []*scheduler.NodeInfo
				for i := 1; i <= count; i++ {
					nodes = append(nodes, scheduler.NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i)}}, 1))
				}
				snap := scheduler.NewSnapshot(1, nodes)
				for round := 0; round < 2; round++ {
					bad := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"}})
					d := scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(snap, uint64(10*round+1)), bad, 0)
					if d.Node != "" || d.Status == nil || d.Status.Code != scheduler.Error || !strings.Contains(d.Message(), tc.want) {
						t.Fatalf("bad pod: node %q status %v, want an Error with %q", d.Node, d.Status, tc.want)
					}
					good := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "good", Namespace: "default"}})
					d = scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(snap, uint64(10*round+2)), good, 0)
					if d.Node == "" {
						t.Fatalf("after a failed call, good pod: node %q status %v", d.Node, d.Status)
					}
				}
			})
		}
	}
}

// TestGuestDecodesOncePerCycleAndRevision: the pod is handed over once per
// cycle, a node once per revision.
func TestGuestDecodesOncePerCycleAndRevision(t *testing.T) {
	pl := loadGuest(t, "labelfilter")
	p := pl.(*Plugin)
	prof := &scheduler.Profile{Name: "one", Parallelism: 1}
	prof.AddPlugin(pl, 1)
	var nodes []*scheduler.NodeInfo
	for i := 0; i < 20; i++ {
		nodes = append(nodes, scheduler.NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%02d", i)}}, 7))
	}
	snap := scheduler.NewSnapshot(1, nodes)
	pod := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}})
	p.podFetches.Store(0)
	p.nodeFetches.Store(0)
	for cycle := uint64(1); cycle <= 3; cycle++ {
		if d := scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(snap, 100+cycle), pod, 0); d.Node == "" {
			t.Fatal(d.Message())
		}
	}
	if got := p.podFetches.Load(); got != 3 {
		t.Errorf("pod fetched %d times in 3 cycles, want 3", got)
	}
	if got := p.nodeFetches.Load(); got != 20 {
		t.Errorf("nodes fetched %d times over 3 cycles of 20 nodes, want 20", got)
	}
	// A new revision of one node is fetched again.
	nodes[5] = scheduler.NewNodeInfo(nodes[5].Node, 8)
	scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(scheduler.NewSnapshot(2, nodes), 200), pod, 0)
	if got := p.nodeFetches.Load(); got != 21 {
		t.Errorf("nodes fetched %d times after one node's new revision, want 21", got)
	}
}

// TestReadmeConfig builds the scheduler config shown in README.md.
func TestReadmeConfig(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(data), "## Scheduler\n")
	_, block, ok := strings.Cut(after, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || !strings.Contains(block, "guestPath") {
		t.Fatal("README's Scheduler section has no config example")
	}
	block = strings.ReplaceAll(block, "/plugins/labelfilter.wasm", guestPath(t, "labelfilter"))
	cfg, err := scheduler.ParseConfig([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	profiles, err := cfg.Build(Registry())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, pl := range profiles["binpack"].Filter {
			if c, ok := pl.(Closer); ok {
				c.Close()
			}
		}
	}()
	if len(profiles) != 2 || profiles["jetplane"] == nil || profiles["binpack"] == nil {
		t.Fatalf("profiles %v", profiles)
	}
	if v := profiles["binpack"].Versions()["NodeResourcesFit"]; v != "builtin/1+MostAllocated" {
		t.Errorf("binpack's NodeResourcesFit is %s", v)
	}
	if _, ok := profiles["binpack"].Versions()["labelfilter"]; !ok {
		t.Error("binpack lacks the WebAssembly plugin")
	}
	for _, s := range profiles["binpack"].Score {
		if s.Plugin.Name() == "NodeResourcesBalancedAllocation" {
			t.Error("BalancedAllocation still scores in binpack")
		}
	}
}

// TestExtensionShapedGuest: a guest without the SDK's exports (no context
// area, no batch calls) loads and is called one node at a time, fetching
// the node on every call.
func TestExtensionShapedGuest(t *testing.T) {
	pl := loadGuest(t, "plain")
	p := pl.(*Plugin)
	if p.hasArea || p.filtBatch {
		t.Fatalf("plain guest: area %v, batch %v", p.hasArea, p.filtBatch)
	}
	prof := &scheduler.Profile{Name: "plain", Parallelism: 1}
	prof.AddPlugin(pl, 1)
	var nodes []*scheduler.NodeInfo
	for i, name := range []string{"ok-1", "nope-2", "ok-3", "nope-4"} {
		nodes = append(nodes, scheduler.NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, uint64(i+1)))
	}
	snap := scheduler.NewSnapshot(1, nodes)
	pod := scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}})
	p.nodeFetches.Store(0)
	for cycle := uint64(1); cycle <= 2; cycle++ {
		d := scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(snap, cycle), pod, 0)
		if d.Feasible != 2 || d.Rejections["node(s) said nope"] != 2 || !strings.HasPrefix(d.Node, "ok-") {
			t.Fatalf("cycle %d: feasible %d, rejections %v, node %q", cycle, d.Feasible, d.Rejections, d.Node)
		}
	}
	if got := p.nodeFetches.Load(); got != 8 {
		t.Errorf("nodes fetched %d times in 2 cycles of 4 nodes, want 8 (every call)", got)
	}
}
