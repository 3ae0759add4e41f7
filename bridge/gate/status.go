package gate

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// WriteStatus records st as the status of the object at k on behalf of p:
// the status subresource of the Kubernetes API, through which a
// controller written for Kubernetes reports on the objects it runs. p
// needs the right to record the object's status (VerbStatus), decided as
// the door decides a status change (AuthorizeEvent): a controller
// credential's for objects of its kinds, a reconciler's for its own
// object, a writer's within its namespaces. version, when not 0, is the
// resourceVersion the writer read: a write over a newer one is refused
// (events.ErrConflict), as a Kubernetes status update is. The goal stays
// the object's (a status writer reports work; it cannot delete). It
// returns the object as stored after the write.
func (g *Gate) WriteStatus(ctx context.Context, p Principal, k projections.Key, st *schemas.Status, version uint64) (*schemas.Object, error) {
	// Out of scope is refused before existence is told.
	cur := g.cfg.State.Get(k)
	if err := g.AuthorizeStatus(p, k, cur); err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, fmt.Errorf("%s: %w", k, ErrNotFound)
	}
	rv := cur.GetMetadata().GetResourceVersion()
	if version != 0 && version != rv {
		return nil, fmt.Errorf("%s: %w: the object has been modified; read it again and retry", k, events.ErrConflict)
	}
	st = proto.CloneOf(st)
	st.Goal = cur.GetStatus().GetGoal()
	st.NextRunTime = cur.GetStatus().GetNextRunTime()
	if proto.Equal(st, cur.GetStatus()) {
		return cur, nil
	}
	ev := statusEvent(k, st)
	ev.Actor, ev.Time = p.Name, timestamppb.New(g.cfg.Now())
	last, _, err := g.write(ctx, []events.Entry{{Event: ev, Expect: rv}})
	if err != nil {
		return nil, err
	}
	if err := g.cfg.State.WaitFor(ctx, last); err != nil {
		return nil, fmt.Errorf("wait for the projection to reach %d: %w", last, err)
	}
	return g.cfg.State.Get(k), nil
}

// AuthorizeStatus decides whether p may record the status of the object
// at k, stored now as cur: the rule of WriteStatus, for a caller that
// checks before it composes the status (a dry run).
func (g *Gate) AuthorizeStatus(p Principal, k projections.Key, cur *schemas.Object) error {
	t := target(k, cur)
	if k.Kind == podKind {
		t.BoundTo = cur.GetSpec().GetFields()["nodeName"].GetStringValue()
	}
	t.Controller = g.cfg.Controller(k.Kind)
	return authorizeEvent(p, statusEvent(k, &schemas.Status{}), t)
}

// statusEvent is the status change of k to st.
func statusEvent(k projections.Key, st *schemas.Status) *schemas.Event {
	return &schemas.Event{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: k.Proto(), Object: &schemas.Object{Status: st}}
}
