package scheduler

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// cluster is a log on embedded NATS, its projection and a started
// scheduler.
type cluster struct {
	t     testing.TB
	log   *events.Log
	store *projections.Store
	sched *Scheduler
	ctx   context.Context
}

func newCluster(t testing.TB, profiles map[string]*Profile) *cluster {
	t.Helper()
	return newClusterWith(t, profiles, nil)
}

// newClusterWith is newCluster with the scheduler's appends going through
// wrap (to hold or fail them).
func newClusterWith(t testing.TB, profiles map[string]*Profile, wrap func(*events.Log) Appender) *cluster {
	t.Helper()
	l := testenv.Log(t, events.Config{})
	var app Appender = l
	if wrap != nil {
		app = wrap(l)
	}
	store := projections.NewStore(projections.StoreOptions{})
	quiet := slog.New(slog.DiscardHandler)
	p, err := projections.NewProjector(projections.ProjectorConfig{Log: l, Store: store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = p.Start(ctx); done <- struct{}{} }()
	s, err := New(Options{Log: app, State: store, Profiles: profiles, Instance: "test", Logger: quiet})
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

// apply appends objects as APPLIED events and waits for the projection.
func (c *cluster) apply(objs ...*schemas.Object) {
	c.t.Helper()
	var last uint64
	for i := 0; i < len(objs); i += 500 {
		var entries []events.Entry
		for _, o := range objs[i:min(i+500, len(objs))] {
			o.Metadata.ResourceVersion = 0
			entries = append(entries, events.Entry{Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED,
				Key: projections.ObjectKey(o).Proto(), Object: o, Actor: "user/test"}, Expect: events.AnyVersion})
		}
		res, errs := c.log.AppendAsync(c.ctx, entries)
		for _, err := range errs {
			if err != nil {
				c.t.Fatal(err)
			}
		}
		last = res[len(res)-1].Sequence
	}
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	if err := c.store.WaitFor(ctx, last); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) pod(ns, name string) *schemas.Object {
	return c.store.Get(projections.Key{Kind: "Pod", Namespace: ns, Name: name})
}

// waitBound waits until the projection shows every pod in keys bound.
func (c *cluster) waitBound(keys []projections.Key) map[projections.Key]string {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	out := map[projections.Key]string{}
	for _, k := range keys {
		for {
			o := c.store.Get(k)
			if n := o.GetSpec().GetFields()["nodeName"].GetStringValue(); n != "" {
				out[k] = n
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("%s not bound in time", k)
			}
			ctx, cancel := context.WithTimeout(c.ctx, 100*time.Millisecond)
			_ = c.store.WaitFor(ctx, c.store.Seq()+1)
			cancel()
		}
	}
	return out
}
