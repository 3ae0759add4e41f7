package reconcilers_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
)

// hanger's run of "hung2" returns only when its context ends, as a
// reconciler stuck in a call that honours nothing else.
type hanger struct {
	started, cancelled atomic.Int32
}

func (h *hanger) Kinds() []string { return []string{"Widget"} }

func (h *hanger) Reconcile(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	if obj.Metadata.Name != "hung2" {
		return reconcilers.Result{}, nil
	}
	h.started.Add(1)
	<-ctx.Done()
	h.cancelled.Add(1)
	return reconcilers.Result{}, ctx.Err()
}

func (h *hanger) Finalize(context.Context, *schemas.Object) (reconcilers.Result, error) {
	return reconcilers.Result{}, nil
}

// instance runs one more runtime (with its own projection, as a process
// has) on l until the test ends.
func instance(t *testing.T, l *events.Log, name string, grace time.Duration, rec reconcilers.Reconciler) (*reconcilers.Runtime, *env) {
	t.Helper()
	st := projections.NewStore(projections.StoreOptions{})
	quiet := slog.New(slog.DiscardHandler)
	p, err := projections.NewProjector(projections.ProjectorConfig{Log: l, Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := reconcilers.New(reconcilers.Config{Log: l, State: st, Reconcilers: []reconcilers.Reconciler{rec}, Instance: name,
		Grace: grace, Members: events.MemberOptions{Heartbeat: 100 * time.Millisecond, Expiry: 500 * time.Millisecond},
		Queue: queue.Config{BaseDelay: 50 * time.Millisecond}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = p.Start(ctx) }()
	go func() { defer wg.Done(); _ = rt.Start(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	g, err := gate.New(gate.Config{Log: l, State: st, Finalizes: rt.Handles, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, name+"'s projection", p.Ready)
	return rt, &env{log: l, store: st, gate: g, rt: rt}
}

// A run stuck in a call does not hold up a partition's move: once the
// partition has been giving up for Grace, the run's context is cancelled
// and the partition goes to its new holder (decision 0008).
func TestHungRunDoesNotBlockHandOff(t *testing.T) {
	const grace = 300 * time.Millisecond
	l := testenv.Log(t, events.Config{})
	n := l.Partitions()
	hungP := events.Partition(key("hung2").Proto(), n)
	if reconcilers.Assign(n, []string{"a", "b"})[hungP] != "b" {
		t.Fatalf("partition %d of the hung key stays with a; pick another name", hungP)
	}
	h := &hanger{}
	a, ea := instance(t, l, "a", grace, h)
	eventually(t, "a holding every partition", func() bool { return len(a.Partitions()) == n })
	ea.apply(t, widget("hung2", "s"))
	eventually(t, "the hung run on a", func() bool { return h.started.Load() == 1 })
	b, _ := instance(t, l, "b", grace, h)
	deadline := time.Now().Add(30 * time.Second)
	for !holds(b.Partitions(), hungP) {
		if time.Now().After(deadline) {
			t.Fatalf("b holds %v after 30 s, not partition %d: the hung run on a blocks its move (a holds %v)", b.Partitions(), hungP, a.Partitions())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if h.cancelled.Load() < 1 {
		t.Fatal("the partition moved while a's run of its key went on")
	}
	if holds(a.Partitions(), hungP) {
		t.Fatalf("a and b both hold partition %d", hungP)
	}
}

func holds(ps []int, p int) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}
