package security

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/nats-io/nats.go"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/events/auth"
	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// A node credential reporting the status of a pod bound to another node
// is refused for good, and nothing is written; its report on its own pod,
// in the same batch, is recorded.
func TestNodeReportsOnlyOnItsOwnPods(t *testing.T) {
	// The credential first: the server reloads its options to admit it,
	// and nats-server's reload races its direct gets (seen under -race),
	// which the pods' writes make.
	var nc *nats.Conn
	a, c := boundPods(t, func(a *app.App) { nc, _ = connectAs(t, a, auth.RoleNode, "n1") })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	node, err := events.OpenNode(ctx, nc, "n1")
	if err != nil {
		t.Fatal(err)
	}
	before := fingerprintOf(t, a)
	errs, err := node.ReportStatuses(ctx, [][]byte{report(t, a, "web-n2", "Failed")})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], events.ErrReportRefused) {
		t.Fatalf("n1's report on n2's pod: %v, want refused for good", errs[0])
	}
	unchanged(t, a, before)

	errs, err = node.ReportStatuses(ctx, [][]byte{report(t, a, "web-n1", "Running"), report(t, a, "web-n2", "Succeeded")})
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], events.ErrReportRefused) {
		t.Fatalf("batch of own and other's reports: %v, want [nil refused]", errs)
	}
	fingerprintOf(t, a) // the projection has caught up with the log
	if got := a.Store().Get(podKey("web-n2")).GetStatus(); got.GetPhase() == "Succeeded" {
		t.Fatalf("n2's pod took n1's report: %v", got)
	}
	if !reportedBy(t, a, "web-n1", "node/n1", "Running") {
		t.Fatal("n1's report on its own pod is not in the pod's history")
	}
	if reportedBy(t, a, "web-n2", "node/n1", "") {
		t.Fatal("n1's report on n2's pod is in the pod's history")
	}
	serving(t, c)
}

// reportedBy tells whether pod's history holds a status change by actor
// (with phase, when not empty).
func reportedBy(t *testing.T, a *app.App, pod, actor, phase string) bool {
	t.Helper()
	evs, err := a.Log().History(context.Background(), podKey(pod).Proto())
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.GetType() == schemas.EventType_EVENT_TYPE_STATUS_CHANGED && ev.GetActor() == actor &&
			(phase == "" || ev.GetObject().GetStatus().GetPhase() == phase) {
			return true
		}
	}
	return false
}

// boundPods starts an instance, runs first on it (when not nil), applies
// one pod bound to each of nodes n1 and n2 (no agent runs them) and
// returns once the pod reconciler has handed both over and the log holds
// still: the state every attack must leave as it is.
func boundPods(t *testing.T, first func(*app.App)) (*app.App, *api.Client) {
	t.Helper()
	a := start(t, app.Config{})
	if first != nil {
		first(a)
	}
	c := &api.Client{BaseURL: a.URL()}
	seed(t, c)
	for _, n := range []string{"n1", "n2"} {
		applyDoc(t, c, `apiVersion: v1
kind: Pod
metadata: {name: web-`+n+`, namespace: shop}
spec:
  nodeName: `+n+`
  containers:
  - {name: main, image: app:v1}
`)
	}
	// The pod reconciler records each pod's status once it has put the
	// pod's work in its node's bucket; after that nothing moves.
	deadline := time.Now().Add(wait)
	for {
		done := true
		for _, n := range []string{"n1", "n2"} {
			st := a.Store().Get(podKey("web-" + n)).GetStatus()
			done = done && st.GetObservedGeneration() > 0
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pod reconciler did not take the pods")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return a, c
}

func podKey(name string) projections.Key {
	return projections.Key{Kind: "Pod", Namespace: "shop", Name: name}
}

// report is a node agent's status report on pod: phase, for the pod's
// current incarnation.
func report(t *testing.T, a *app.App, pod, phase string) []byte {
	t.Helper()
	cur := a.Store().Get(podKey(pod))
	det, _ := structpb.NewStruct(map[string]any{"phase": phase})
	b, err := proto.Marshal(&schemas.Event{
		Key:    podKey(pod).Proto(),
		Object: &schemas.Object{Metadata: &schemas.ObjectMeta{Uid: cur.GetMetadata().GetUid()}, Status: &schemas.Status{Phase: phase, Details: det}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
