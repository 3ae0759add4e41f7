package wasm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/scheduler"
	"github.com/jetplane/jetplane/schemas"
)

// logs captures a plugin's log records as "msg k=v k=v" lines.
type logs struct {
	mu    sync.Mutex
	lines []string
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logs) WithGroup(string) slog.Handler            { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.Key + "=" + a.Value.String()
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return nil
}

// find returns the first line with every part, waiting up to 10s for it.
func (l *logs) find(t *testing.T, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				l.mu.Unlock()
				return line
			}
		}
		all := strings.Join(l.lines, "\n")
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in:\n%s", parts, all)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (l *logs) has(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// testHandle is a Handle with captured logs, events and waiting pods.
type testHandle struct {
	scheduler.NopHandle
	mu       sync.Mutex
	events   []string
	waiting  map[types.UID]*v1.Pod
	rejected []types.UID
}

func (h *testHandle) Eventf(regarding, _ *v1.ObjectReference, eventtype, reason, action, note string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, fmt.Sprintf("%s/%s %s %s %s %s", regarding.Kind, regarding.Name, eventtype, reason, action, note))
}

func (h *testHandle) GetWaitingPod(uid types.UID) *v1.Pod {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waiting[uid]
}

func (h *testHandle) RejectWaitingPod(uid types.UID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rejected = append(h.rejected, uid)
	_, ok := h.waiting[uid]
	delete(h.waiting, uid)
	return ok
}

// loadUpstream loads the upstream-shaped guest with guestConfig cfg.
func loadUpstream(t *testing.T, cfg string, severity int32) (*Plugin, *testHandle, *logs) {
	t.Helper()
	a := args(t, "upstream")
	a.GuestConfig, a.LogSeverity = cfg, severity
	pl, err := Load(context.Background(), "Upstream", a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.(*Plugin).Close() })
	l := &logs{}
	h := &testHandle{NopHandle: scheduler.NopHandle{Log: slog.New(l)}, waiting: map[types.UID]*v1.Pod{}}
	pl.(*Plugin).SetHandle(h)
	return pl.(*Plugin), h, l
}

func nodesNamed(names ...string) *scheduler.Snapshot {
	var nodes []*scheduler.NodeInfo
	for i, n := range names {
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{}}}
		if n == "n2" {
			node.Labels["ok"] = "yes"
			node.Status.Images = []v1.ContainerImage{{Names: []string{"img"}, SizeBytes: 7}}
		}
		if n == "n3" {
			node.Status.Images = []v1.ContainerImage{{Names: []string{"img:latest"}, SizeBytes: 7}}
		}
		nodes = append(nodes, scheduler.NewNodeInfo(node, uint64(i+1)))
	}
	return scheduler.NewSnapshot(1, nodes)
}

func podNamed(name string) *scheduler.PodInfo {
	return scheduler.NewPodInfo(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}})
}

var cycleSeq uint64

// cycle runs one scheduling cycle of pod with pl alone over nodes n0…n6.
func cycle(pl *Plugin, pod string) *scheduler.Decision {
	prof := &scheduler.Profile{Name: "conformance", Parallelism: 2}
	prof.AddPlugin(pl, 1)
	cycleSeq++
	return scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(nodesNamed("n0", "n1", "n2", "n3", "n4", "n5", "n6"), cycleSeq), podNamed(pod), 0)
}

func wantError(t *testing.T, d *scheduler.Decision, parts ...string) {
	t.Helper()
	if d.Node != "" || d.Status == nil || d.Status.Code != scheduler.Error {
		t.Fatalf("node %q status %v, want an Error", d.Node, d.Status)
	}
	for _, p := range parts {
		if !strings.Contains(d.Message(), p) {
			t.Fatalf("message %q lacks %q", d.Message(), p)
		}
	}
}

// TestConformance: each row is one behaviour of upstream's host
// (kube-scheduler-wasm-extension at UpstreamCommit, scheduler/plugin),
// exercised by a guest of upstream's shape (testdata/upstream, built with
// standard Go; or a hand-written module) through jetplane's framework.
func TestConformance(t *testing.T) {
	rows := []struct {
		name    string
		mirrors string
		run     func(t *testing.T)
	}{
		{"lifecycle/_start registers", "InstantiateModule runs _start (main registers the plugin) before any hook", func(t *testing.T) {
			// _start sets the global filter checks: unset, filter traps.
			m := binModule{funcs: []binFunc{
				{export: "_start", body: []byte{opI32Const, 1, opGlobalSet, 0}},
				hookFunc(exFilter, []byte{opGlobalGet, 0, opIf, blockEmpty, opElse, opUnreachable, opEnd, opI32Const, 0}),
			}}
			pl := loadBin(t, m)
			if d := cycle(pl, "p1"); d.Node == "" {
				t.Fatalf("filter after _start: %v", d.Message())
			}
		}},
		{"lifecycle/panic in _start", "a trap in _start fails instantiation: the plugin is refused at load, with the guest's output", func(t *testing.T) {
			m := binModule{funcs: []binFunc{{export: "_start", body: panicBody()}, hookFunc(exFilter, i32Result(0))}}
			_, err := loadBinErr(t, m)
			if err == nil || !strings.Contains(err.Error(), "_start error: panic!") {
				t.Fatalf("load: %v", err)
			}
		}},
		{"lifecycle/panic in _initialize", "a reactor's _initialize is its _start (standard Go registers in init): a panic there refuses the plugin", func(t *testing.T) {
			a := args(t, "upstream")
			a.GuestConfig = `{"panic": "init"}`
			_, err := Load(context.Background(), "Upstream", a)
			if err == nil || !strings.Contains(err.Error(), "_initialize error: panic: boom in init") {
				t.Fatalf("load: %v", err)
			}
		}},
		{"lifecycle/_start exits", "a guest whose _start exits cannot serve hooks: refused at load", func(t *testing.T) {
			m := binModule{funcs: []binFunc{{export: "_start", body: []byte{opI32Const, 0, opCall, fnProcExit}}, hookFunc(exFilter, i32Result(0))}}
			if _, err := loadBinErr(t, m); err == nil || !strings.Contains(err.Error(), "_start exited") {
				t.Fatalf("load: %v", err)
			}
		}},
		{"lifecycle/no plugin exports", "detectInterfaces/maskInterfaces: filter, score, reserve, permit or bind must be exported", func(t *testing.T) {
			m := binModule{funcs: []binFunc{hookFunc(exPreFilter, i32Result(0))}}
			if _, err := loadBinErr(t, m); err == nil || !strings.Contains(err.Error(), "none of filter, score, reserve, permit and bind") {
				t.Fatalf("load: %v", err)
			}
		}},
		{"lifecycle/prescore without score", "prescore_without_score.wat is refused", func(t *testing.T) {
			m := binModule{funcs: []binFunc{hookFunc(exFilter, i32Result(0)), hookFunc(exPreScore, i32Result(0))}}
			if _, err := loadBinErr(t, m); err == nil || !strings.Contains(err.Error(), "prescore without score") {
				t.Fatalf("load: %v", err)
			}
		}},
		{"lifecycle/wrong signature", "detectInterfaces: an export with the wrong signature is refused", func(t *testing.T) {
			m := binModule{funcs: []binFunc{{export: exFilter, results: []byte{valI64}, body: i64Result(0)}}}
			if _, err := loadBinErr(t, m); err == nil || !strings.Contains(err.Error(), "wrong signature for func[filter]") {
				t.Fatalf("load: %v", err)
			}
		}},
		{"hooks/panic in each hook", "panic_on_<hook>.wat: the hook's status is an Error carrying the guest's output (enqueue: refused at load, EventsToRegister has no error)", func(t *testing.T) {
			for name := range guestExports {
				m := binModule{funcs: []binFunc{hookFunc(name, panicBody())}}
				switch name {
				case exFilter, exScore, exReserve, exPermit, exBind:
				case exPreScore, exNormalizeScore:
					m.funcs = append(m.funcs, hookFunc(exScore, i64Result(0)))
				default:
					m.funcs = append(m.funcs, hookFunc(exFilter, i32Result(0)))
				}
				t.Run(name, func(t *testing.T) { panicInHook(t, name, m) })
			}
		}},
		{"hooks/Go panic in a hook", "a Go guest's panic: an Error with its message; the next cycle gets a fresh instance", func(t *testing.T) {
			pl, _, l := loadUpstream(t, "", 0)
			wantError(t, cycle(pl, "panic-filter"), "wasm: filter error: panic: boom in filter")
			l.find(t, "wasm guest output", "goroutine")
			if d := cycle(pl, "p1"); d.Node != "n1" {
				t.Fatalf("after the panic: node %q, %s", d.Node, d.Message())
			}
			wantError(t, cycle(pl, "panic-score"), "wasm: score error: panic: boom in score")
			wantError(t, cycle(pl, "panic-prefilter"), "prefilter error: panic: boom in prefilter")
		}},
		{"filter/codes", "guest.filter: the code passes through NewStatus; kube-scheduler rejects the node for 2, 3 and 6 (Pending), and fails the cycle for 4 (Wait)", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			prof := &scheduler.Profile{Name: "c", Parallelism: 1}
			prof.AddPlugin(pl, 1)
			for _, tc := range []struct {
				node string
				want scheduler.Code
			}{{"n0", scheduler.Success}, {"n2", scheduler.Unschedulable}, {"n3", scheduler.UnschedulableAndUnresolvable}, {"n4", scheduler.Error}, {"n6", scheduler.Pending}} {
				st := pl.Filter(context.Background(), scheduler.NewCycleState(nodesNamed(tc.node), 1), podNamed("filter-code"), nodesNamed(tc.node).At(0))
				if st.GetCode() != tc.want && !(tc.want == scheduler.Error && st.GetCode() == scheduler.Wait) {
					t.Errorf("%s: %v, want %v", tc.node, st, tc.want)
				}
			}
			d := scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(nodesNamed("n0", "n2", "n6"), 2), podNamed("filter-code"), 0)
			if d.Node != "n0" || d.Rejections["code 2"] != 1 || d.Rejections["code 6"] != 1 {
				t.Fatalf("node %q rejections %v", d.Node, d.Rejections)
			}
			d = scheduler.Cycle(context.Background(), prof, scheduler.NewCycleState(nodesNamed("n4"), 3), podNamed("filter-code"), 0)
			wantError(t, d, `running "Upstream" filter plugin`, "Wait")
		}},
		{"filter/node", "k8s.io/api node: the node by name, protobuf, written when under buf_limit", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			if d := cycle(pl, "filter-node"); d.Node != "n2" || d.Rejections["node lacks ok=yes"] != 6 {
				t.Fatalf("node %q rejections %v", d.Node, d.Rejections)
			}
		}},
		{"filter/stdout", "the guest's stdout is captured (upstream: into the error; here also into the scheduler's log)", func(t *testing.T) {
			pl, _, l := loadUpstream(t, "", 0)
			cycle(pl, "filter-print")
			l.find(t, "wasm guest output", "hello from filter on n")
		}},
		{"prefilter/node names", "result.node_names (NUL-terminated) becomes PreFilterResult.NodeNames: only those nodes are evaluated", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			d := cycle(pl, "prefilter-names")
			if d.Evaluated != 2 || (d.Node != "n1" && d.Node != "n3") || d.Rejections["node(s) didn't satisfy plugin(s) [Upstream]"] != 5 {
				t.Fatalf("evaluated %d node %q rejections %v", d.Evaluated, d.Node, d.Rejections)
			}
		}},
		{"prefilter/reject", "prefilter's code and result.status_reason reject the pod", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			d := cycle(pl, "prefilter-reject")
			if d.Node != "" || d.Status.GetCode() != scheduler.Unschedulable || d.Rejections["prefilter says no"] != 7 {
				t.Fatalf("node %q status %v rejections %v", d.Node, d.Status, d.Rejections)
			}
		}},
		{"postfilter/nominate", "postfilter sees nodeToStatusMap ({node: code} JSON); result.nominated_node_name with mode Override (high 32 bits) nominates", func(t *testing.T) {
			pl, _, l := loadUpstream(t, "", 0)
			if d := cycle(pl, "postfilter-nominate"); d.Node != "" || d.Nominated != "n1" {
				t.Fatalf("node %q nominated %q", d.Node, d.Nominated)
			}
			if d := cycle(pl, "filter-none"); d.Nominated != "" {
				t.Fatalf("nominated %q with mode Noop", d.Nominated)
			}
			l.find(t, "postfilter", `"n0":2`, `"n6":2`)
		}},
		{"prescore/filteredNodeList and cycle state", "prescore sees filteredNodeList (JSON names); the guest's cycle state, reset by prefilter, lives in the instance that serves the pod's whole cycle", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			d := cycle(pl, "score-cyclestate")
			if d.Node != "n6" || d.Scores[0].Top[0].Score != 100 {
				t.Fatalf("node %q scores %+v", d.Node, d.Scores)
			}
		}},
		{"score/NodeNumber", "score's high 32 bits are the score, read as int32", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, `{"reverse": false}`, 0)
			for _, pod := range []string{"p1", "p4", "p6"} {
				if d := cycle(pl, pod); d.Node != "n"+pod[1:] {
					t.Fatalf("%s on %q", pod, d.Node)
				}
			}
		}},
		{"score/signed", "a negative score is read as negative (int32), not 4294967295; out of [0, 100] after normalizing, the cycle fails with an Error", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			st := pl.ScoreNodes(context.Background(), scheduler.NewCycleState(nodesNamed("n0"), 9), podNamed("score-signed"), nodesNamed("n0").Nodes(), []int64{0})
			scores := []int64{0}
			_ = pl.ScoreNodes(context.Background(), scheduler.NewCycleState(nodesNamed("n0"), 9), podNamed("score-signed"), nodesNamed("n0").Nodes(), scores)
			if st != nil || scores[0] != -1 {
				t.Fatalf("score %d status %v, want -1", scores[0], st)
			}
			wantError(t, cycle(pl, "score-signed"), "score -1 for node")
		}},
		{"score/error status", "a Score status other than Success fails the cycle with an Error (RunScorePlugins)", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			wantError(t, cycle(pl, "score-error"), "score failed")
			wantError(t, cycle(pl, "score-unschedulable"), `plugin "Upstream" failed with`, "score says unschedulable")
		}},
		{"normalizescore", "normalizescore sees nodeScoreList ({node: score} JSON) and returns result.normalized_score_list", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			d := cycle(pl, "score-normalize")
			if d.Node != "n6" || d.Scores[0].Top[0].Score != 7 {
				t.Fatalf("node %q scores %+v", d.Node, d.Scores)
			}
		}},
		{"nodeImageStates", "nodeImageStates: JSON {image: {Size, NumNodes}} of the node, names normalized with :latest", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			d := cycle(pl, "score-images")
			if d.Scores[0].Top[0].Score != 27 {
				t.Fatalf("scores %+v, want 2 nodes*10+7", d.Scores)
			}
		}},
		{"nodeList", "k8s.io/api nodeList: a v1.NodeList of the snapshot's nodes, protobuf", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			d := cycle(pl, "score-nodelist")
			if d.Scores[0].Top[0].Score != 7 {
				t.Fatalf("scores %+v, want 7 items", d.Scores)
			}
		}},
		{"enqueue/cluster events", "result.cluster_events: 8-byte (GVK, ActionType) entries become EventsToRegister; a pod it rejected is requeued only by those events", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, "", 0)
			want := []scheduler.ClusterEvent{{Resource: "Node", ActionType: scheduler.Add}, {Resource: "Pod", ActionType: scheduler.Delete}}
			if got := pl.EventsToRegister(context.Background()); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("events %v", got)
			}
			prof := &scheduler.Profile{Name: "c"}
			prof.AddPlugin(pl, 1)
			if !prof.Interested(context.Background(), []string{"Upstream"}, "Node", scheduler.Add) || prof.Interested(context.Background(), []string{"Upstream"}, "Node", scheduler.Delete) {
				t.Fatal("queueing hints do not follow the guest's events")
			}
			m := binModule{funcs: []binFunc{hookFunc(exFilter, i32Result(0))}}
			if got := loadBin(t, m).EventsToRegister(context.Background()); len(got) != len(allClusterEvents) {
				t.Fatalf("without enqueue: %v, want every event", got)
			}
		}},
		{"klog", "k8s.io/klog log and logs (NUL-terminated key-values) go to the scheduler's log; severity returns logSeverity and lines below it are dropped", func(t *testing.T) {
			pl, _, l := loadUpstream(t, "", 0)
			cycle(pl, "klog-1")
			l.find(t, "INFO klog info", "plugin=Upstream", "pod=klog-1")
			l.find(t, "ERROR klog error klog-1")
			pl2, _, l2 := loadUpstream(t, "", 2)
			cycle(pl2, "klog-2")
			l2.find(t, "ERROR klog error klog-2")
			if l2.has("klog info") {
				t.Fatal("an info line passed logSeverity 2")
			}
		}},
		{"eventf", "handle.eventrecorder.eventf: the JSON EventMessage goes to the handle's EventRecorder.Eventf", func(t *testing.T) {
			pl, h, _ := loadUpstream(t, "", 0)
			cycle(pl, "event-1")
			h.mu.Lock()
			defer h.mu.Unlock()
			if len(h.events) != 1 || h.events[0] != "Pod/event-1 Normal PreFilter Checked from the guest" {
				t.Fatalf("events %q", h.events)
			}
		}},
		{"waiting pods", "handle.get_waiting_pod writes the waiting pod (protobuf) or a zero word; handle.reject_waiting_pod writes 1 when one was rejected", func(t *testing.T) {
			pl, h, l := loadUpstream(t, "", 0)
			h.waiting["uid-waiting"] = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "waiter", UID: "uid-waiting"}}
			cycle(pl, "permit-rejecter")
			l.find(t, "waiting pod", "found=waiter", "rejected=1")
			cycle(pl, "permit-rejecter")
			l.find(t, "waiting pod", "found=false", "rejected=0")
		}},
		{"addpod/removepod", "PreFilterExtensions: targetPod is the pod added or removed, currentNodeName its node", func(t *testing.T) {
			pl, _, l := loadUpstream(t, "", 0)
			state := scheduler.NewCycleState(nodesNamed("n1"), 77)
			if st := pl.AddPod(context.Background(), state, podNamed("p"), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, state.Snapshot.At(0)); st != nil {
				t.Fatal(st)
			}
			l.find(t, "addpod", "pod=p", "target=other", "node=n1")
			if st := pl.RemovePod(context.Background(), state, podNamed("p"), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, state.Snapshot.At(0)); st != nil {
				t.Fatal(st)
			}
			l.find(t, "removepod", "target=gone")
		}},
		{"config/get_config", "get_config returns guestConfig", func(t *testing.T) {
			pl, _, _ := loadUpstream(t, `{"reverse": true}`, 0)
			if d := cycle(pl, "p1"); d.Node == "n1" {
				t.Fatal("reverse did not invert NodeNumber")
			}
		}},
		{"binding cycle", "reserve, permit (Wait with a timeout in the low 32 bits), prebind, bind and postbind run with currentNodeName; Unreserve on rejection; the pod's instance moves from the scheduling to the binding cycle", func(t *testing.T) {
			bindingCycle(t)
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			t.Logf("mirrors: %s", r.mirrors)
			r.run(t)
		})
	}
}

func loadBinErr(t *testing.T, m binModule) (*Plugin, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "guest.wasm")
	if err := os.WriteFile(path, m.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	a := args(t, "upstream")
	a.GuestPath = path
	pl, err := Load(context.Background(), "Bin", a)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { pl.(*Plugin).Close() })
	return pl.(*Plugin), nil
}

func loadBin(t *testing.T, m binModule) *Plugin {
	t.Helper()
	pl, err := loadBinErr(t, m)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// panicInHook loads a module whose hook writes "panic!" and traps, and
// runs that hook.
func panicInHook(t *testing.T, name string, m binModule) {
	pl, err := loadBinErr(t, m)
	if name == exEnqueue {
		if err == nil || !strings.Contains(err.Error(), "enqueue error: panic!") {
			t.Fatalf("load: %v", err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	l := &logs{}
	pl.SetHandle(scheduler.NopHandle{Log: slog.New(l)})
	ctx := context.Background()
	snap := nodesNamed("n1", "n2")
	state := scheduler.NewCycleState(snap, 5)
	pod := podNamed("p")
	var st *scheduler.Status
	switch name {
	case exPreFilter:
		st = pl.PreFilter(ctx, state, pod)
	case exFilter:
		st = pl.Filter(ctx, state, pod, snap.At(0))
	case exPostFilter:
		_, st = pl.PostFilter(ctx, state, pod, map[string]*scheduler.Status{"n1": scheduler.NewStatus(scheduler.Unschedulable)})
	case exPreScore:
		st = pl.PreScore(ctx, state, pod, snap.Nodes())
	case exScore:
		_, st = pl.Score(ctx, state, pod, snap.At(0))
	case exNormalizeScore:
		st = pl.NormalizeScore(ctx, state, pod, []scheduler.NodeScore{{Name: "n1"}})
	case exReserve:
		st = pl.Reserve(ctx, state, pod, "n1")
	case exPermit:
		st, _ = pl.Permit(ctx, state, pod, "n1")
	case exPreBind:
		st = pl.PreBind(ctx, state, pod, "n1")
	case exBind:
		st = pl.Bind(ctx, state, pod, "n1")
	case exAddPod:
		st = pl.AddPod(ctx, state, pod, &v1.Pod{}, snap.At(0))
	case exRemovePod:
		st = pl.RemovePod(ctx, state, pod, &v1.Pod{}, snap.At(0))
	case exUnreserve:
		pl.Unreserve(ctx, state, pod, "n1")
		l.find(t, "unreserve failed", name+" error: panic!")
		return
	case exPostBind:
		pl.PostBind(ctx, state, pod, "n1")
		l.find(t, "postbind failed", name+" error: panic!")
		return
	}
	if st.GetCode() != scheduler.Error || !strings.Contains(st.Message(), "wasm: "+name+" error: panic!") {
		t.Fatalf("%s: %v", name, st)
	}
}

// bindingCycle runs the binding-cycle rows through a Scheduler on a log.
func bindingCycle(t *testing.T) {
	pl, _, l := loadUpstream(t, "", 0)
	prof := &scheduler.Profile{Name: scheduler.DefaultSchedulerName, Parallelism: 2}
	prof.AddPlugin(pl, 1)
	c := newCluster(t, map[string]*scheduler.Profile{prof.Name: prof}, slog.New(l))
	c.applyNodes("n1", "n2")
	schedule := func(name string) reconcilers.Result {
		t.Helper()
		obj := c.applyPod(name)
		res, err := c.sched.Schedule(c.ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	condition := func(res reconcilers.Result) string {
		if len(res.Conditions) == 0 {
			return ""
		}
		return res.Conditions[0].Reason + ": " + res.Conditions[0].Message
	}

	// Reserve, Permit, PreBind, Bind (the guest's skip: jetplane binds),
	// PostBind once the Bound event lands; the binding cycle's hooks see
	// the cycle state PreScore wrote (podnum).
	res := schedule("p1")
	if !strings.HasPrefix(condition(res), "Scheduled") {
		t.Fatalf("p1: %s", condition(res))
	}
	l.find(t, "reserve", "pod=p1", "node=n1")
	l.find(t, "prebind", "pod=p1", "node=n1", "podnum=1")
	l.find(t, "bind", "pod=p1")
	l.find(t, "postbind", "pod=p1", "node=n1")

	// Reserve rejects: Unreserve runs, the pod is Unschedulable.
	res = schedule("reserve-reject-2")
	if !strings.Contains(condition(res), "reserve says no") {
		t.Fatalf("reserve-reject: %s", condition(res))
	}
	l.find(t, "unreserve", "pod=reserve-reject-2")

	// Permit rejects.
	res = schedule("permit-reject-2")
	if !strings.Contains(condition(res), "permit says no") {
		t.Fatalf("permit-reject: %s", condition(res))
	}
	l.find(t, "unreserve", "pod=permit-reject-2")

	// Permit waits: the pod is a waiting pod until rejected through the
	// handle (here by another guest's call), then Unreserve runs.
	res = schedule("permit-waiting")
	if !strings.HasPrefix(condition(res), "WaitingOnPermit") {
		t.Fatalf("permit-waiting: %s", condition(res))
	}
	if c.sched.AllowWaitingPod("uid-nobody") {
		t.Fatal("a pod that does not wait was allowed")
	}
	schedule("permit-rejecter-1")
	l.find(t, "waiting pod", "found=permit-waiting", "rejected=1")
	l.find(t, "unreserve", "pod=permit-waiting")

	// Permit waits past its timeout: rejected.
	schedule("permit-timeout")
	l.find(t, "waiting pod rejected", "rejected due to timeout")

	// PreBind fails: SchedulerError, Unreserve.
	res = schedule("prebind-fail-1")
	if !strings.Contains(condition(res), "SchedulerError") || !strings.Contains(condition(res), "prebind failed") {
		t.Fatalf("prebind-fail: %s", condition(res))
	}
	l.find(t, "unreserve", "pod=prebind-fail-1")

	// A Score error is the pod's SchedulerError condition.
	res = schedule("score-error")
	if !strings.HasPrefix(condition(res), "SchedulerError") || !strings.Contains(condition(res), "score failed") || res.RequeueAfter == 0 {
		t.Fatalf("score-error: %s", condition(res))
	}
	// A panic's message is in the failing pod's condition.
	res = schedule("panic-score")
	if !strings.Contains(condition(res), "panic: boom in score") {
		t.Fatalf("panic-score: %s", condition(res))
	}
}

// cluster is a log on embedded NATS, its projection and a started
// scheduler.
type cluster struct {
	t     *testing.T
	log   *events.Log
	store *projections.Store
	sched *scheduler.Scheduler
	ctx   context.Context
}

func newCluster(t *testing.T, profiles map[string]*scheduler.Profile, logger *slog.Logger) *cluster {
	t.Helper()
	l := testenv.Log(t, events.Config{})
	store := projections.NewStore(projections.StoreOptions{})
	quiet := slog.New(slog.DiscardHandler)
	p, err := projections.NewProjector(projections.ProjectorConfig{Log: l, Store: store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = p.Start(ctx); done <- struct{}{} }()
	s, err := scheduler.New(scheduler.Options{Log: l, State: store, Profiles: profiles, Instance: "test", Logger: logger, BindRetry: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Start(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
	})
	return &cluster{t: t, log: l, store: store, sched: s, ctx: ctx}
}

func (c *cluster) apply(o *schemas.Object) *schemas.Object {
	c.t.Helper()
	key := projections.ObjectKey(o)
	res, errs := c.log.AppendAsync(c.ctx, []events.Entry{{Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED,
		Key: key.Proto(), Object: o, Actor: "user/test"}, Expect: events.AnyVersion}})
	if errs != nil && errs[0] != nil {
		c.t.Fatal(errs[0])
	}
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	if err := c.store.WaitFor(ctx, res[0].Sequence); err != nil {
		c.t.Fatal(err)
	}
	return c.store.Get(key)
}

func object(t *testing.T, kind, ns, name, uid string, spec map[string]any) *schemas.Object {
	t.Helper()
	st, err := structpb.NewStruct(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &schemas.Object{ApiVersion: "v1", Kind: kind, Metadata: &schemas.ObjectMeta{Name: name, Namespace: ns, Uid: uid}, Spec: st, Status: &schemas.Status{}}
}

func (c *cluster) applyNodes(names ...string) {
	for _, n := range names {
		c.apply(object(c.t, "Node", "", n, "", map[string]any{"allocatable": map[string]any{"cpu": "4", "memory": "16Gi", "pods": "110"}}))
	}
}

func (c *cluster) applyPod(name string) *schemas.Object {
	uid := "uid-" + name
	if name == "permit-waiting" {
		uid = "uid-waiting"
	}
	return c.apply(object(c.t, "Pod", "default", name, uid, map[string]any{"containers": []any{map[string]any{"name": "app", "image": "app"}}}))
}

// waitUntil polls cond until it holds, failing after 30s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
