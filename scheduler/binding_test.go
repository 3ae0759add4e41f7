package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// gatedLog holds each batch of appends until a token arrives on gate, and
// fails the first `fail` batches as an unavailable log would.
type gatedLog struct {
	*events.Log
	gate chan struct{}
	fail atomic.Int32
}

func (g *gatedLog) AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error) {
	errs := make([]error, len(entries))
	select {
	case <-g.gate:
	case <-ctx.Done():
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return make([]events.Result, len(entries)), errs
	}
	if g.fail.Add(-1) >= 0 {
		for i := range errs {
			errs[i] = errors.New("log unavailable")
		}
		return make([]events.Result, len(entries)), errs
	}
	return g.Log.AppendAsync(ctx, entries)
}

// reserveCounter counts Reserve and Unreserve calls.
type reserveCounter struct{ reserved, unreserved atomic.Int32 }

func (*reserveCounter) Name() string { return "ReserveCounter" }
func (r *reserveCounter) Reserve(context.Context, *CycleState, *PodInfo, string) *Status {
	r.reserved.Add(1)
	return nil
}
func (r *reserveCounter) Unreserve(context.Context, *CycleState, *PodInfo, string) {
	r.unreserved.Add(1)
}

// TestAsynchronousBinding (decision 0032): Schedule returns before the
// Bound append is answered, writing nothing and asking to run again; a pod
// whose append is unanswered gets no second cycle; a failed append
// unreserves and drops the assumption, and the next run binds.
func TestAsynchronousBinding(t *testing.T) {
	profiles, err := DefaultConfig().Build(DefaultRegistry())
	if err != nil {
		t.Fatal(err)
	}
	counter := &reserveCounter{}
	profiles[DefaultSchedulerName].AddPlugin(counter, 1)
	g := &gatedLog{gate: make(chan struct{})}
	g.fail.Store(1)
	c := newClusterWith(t, profiles, func(l *events.Log) Appender { g.Log = l; return g })
	c.apply(fixtureNode(t, "n1", attrs([]string{"cpu=2"}), 0), fixturePod(t, "default/a", attrs([]string{"cpu=1"}), 0))
	ctx := context.Background()

	res, err := c.sched.Schedule(ctx, c.pod("default", "a"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.KeepStatus || res.RequeueAfter <= 0 || res.Message != "binding to node n1" {
		t.Fatalf("result %+v: want KeepStatus, a RequeueAfter and binding to n1", res)
	}
	if !c.sched.Cache().IsAssumed("default/a") {
		t.Fatal("a is not assumed while its Bound is unanswered")
	}
	c.sched.cycleMu.Lock()
	cycles := c.sched.cycle
	c.sched.cycleMu.Unlock()
	res, err = c.sched.Schedule(ctx, c.pod("default", "a"))
	if err != nil || !res.KeepStatus || res.RequeueAfter <= 0 {
		t.Fatalf("second Schedule while binding: %+v, %v", res, err)
	}
	c.sched.cycleMu.Lock()
	if c.sched.cycle != cycles {
		t.Fatal("a pod whose Bound is unanswered was scheduled again")
	}
	c.sched.cycleMu.Unlock()

	g.gate <- struct{}{} // the append fails
	if err := c.sched.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if c.sched.Cache().IsAssumed("default/a") || counter.unreserved.Load() != 1 {
		t.Fatalf("after a failed append: assumed %v, unreserved %d times", c.sched.Cache().IsAssumed("default/a"), counter.unreserved.Load())
	}
	if o := c.pod("default", "a"); o.GetSpec().GetFields()["nodeName"] != nil {
		t.Fatal("a failed append bound the pod")
	}

	// The run RequeueAfter asks for binds it.
	if _, err := c.sched.Schedule(ctx, c.pod("default", "a")); err != nil {
		t.Fatal(err)
	}
	g.gate <- struct{}{}
	if err := c.sched.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.waitBound([]projections.Key{{Kind: "Pod", Namespace: "default", Name: "a"}}); n[projections.Key{Kind: "Pod", Namespace: "default", Name: "a"}] != "n1" {
		t.Fatalf("a on %v, want n1", n)
	}
	if counter.reserved.Load() != 2 || counter.unreserved.Load() != 1 {
		t.Fatalf("reserved %d, unreserved %d; want 2 and 1", counter.reserved.Load(), counter.unreserved.Load())
	}
}

// Options.Bound hears of each pod whose Bound event landed, as the event
// left it: bound to its node, at the event's sequence, which the
// projection then shows.
func TestBoundIsToldOfEachBinding(t *testing.T) {
	c := newCluster(t, nil)
	got := make(chan *schemas.Object, 1)
	c.sched.cfg.Bound = func(p *schemas.Object) { got <- p }
	c.apply(fixtureNode(t, "n1", attrs([]string{"cpu=2"}), 0), fixturePod(t, "default/a", attrs([]string{"cpu=1"}), 0))
	if _, err := c.sched.Schedule(context.Background(), c.pod("default", "a")); err != nil {
		t.Fatal(err)
	}
	p := <-got
	if n := p.GetSpec().GetFields()["nodeName"].GetStringValue(); n != "n1" || p.GetMetadata().GetName() != "a" {
		t.Fatalf("told of %s on %q, want a on n1", p.GetMetadata().GetName(), n)
	}
	c.waitBound([]projections.Key{{Kind: "Pod", Namespace: "default", Name: "a"}})
	if rv := c.pod("default", "a").GetMetadata().GetResourceVersion(); p.GetMetadata().GetResourceVersion() != rv {
		t.Fatalf("told of version %d; the projection has %d", p.GetMetadata().GetResourceVersion(), rv)
	}
}
