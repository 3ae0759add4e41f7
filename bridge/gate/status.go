package gate

import (
	"bytes"
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
// returns the object as stored after the write. st is not modified.
func (g *Gate) WriteStatus(ctx context.Context, p Principal, k projections.Key, st *schemas.Status, version uint64) (*schemas.Object, error) {
	return g.writeStatus(ctx, p, k, proto.CloneOf(st), version)
}

// writeStatus is WriteStatus with st the gate's to change.
func (g *Gate) writeStatus(ctx context.Context, p Principal, k projections.Key, st *schemas.Status, version uint64) (*schemas.Object, error) {
	// Out of scope is refused before existence is told.
	cur := g.cfg.State.Get(k)
	if err := g.AuthorizeStatus(p, k, cur); err != nil {
		return nil, err
	}
	if cur == nil {
		return nil, fmt.Errorf("%s: %w", k, ErrNotFound)
	}
	o, _, err := g.recordStatus(ctx, p, k, cur, st, version)
	if err != nil {
		return nil, err
	}
	if o == nil {
		o = g.cfg.State.Get(k)
	}
	return o, nil
}

// recordStatus writes st over cur, the object stored at k that p was
// authorized for, expecting cur's version. It returns cur itself when st
// changes nothing, else nil (read the projection) and the sequence
// written.
func (g *Gate) recordStatus(ctx context.Context, p Principal, k projections.Key, cur *schemas.Object, st *schemas.Status, version uint64) (*schemas.Object, uint64, error) {
	rv := cur.GetMetadata().GetResourceVersion()
	if version != 0 && version != rv {
		return nil, 0, fmt.Errorf("%s: %w: the object has been modified; read it again and retry", k, events.ErrConflict)
	}
	st.Goal = cur.GetStatus().GetGoal()
	st.NextRunTime = cur.GetStatus().GetNextRunTime()
	if proto.Equal(st, cur.GetStatus()) {
		return cur, 0, nil
	}
	ev := statusEvent(k, st)
	ev.Actor, ev.Time = p.Name, timestamppb.New(g.cfg.Now())
	last, _, err := g.write(ctx, []events.Entry{{Event: ev, Expect: rv}})
	if err != nil {
		return nil, 0, err
	}
	if err := g.cfg.State.WaitFor(ctx, last); err != nil {
		return nil, 0, fmt.Errorf("wait for the projection to reach %d: %w", last, err)
	}
	return nil, last, nil
}

// AuthorizeStatus decides whether p may record the status of the object
// at k, stored now as cur: the rule of WriteStatus, for a caller that
// checks before it composes the status (a dry run).
func (g *Gate) AuthorizeStatus(p Principal, k projections.Key, cur *schemas.Object) error {
	_, err := g.authorizeStatus(p, k, cur)
	return err
}

// authorizeStatus is AuthorizeStatus, also returning the controller
// credential the decision took as running k's kind.
func (g *Gate) authorizeStatus(p Principal, k projections.Key, cur *schemas.Object) (string, error) {
	t := target(k, cur)
	if k.Kind == podKind {
		t.BoundTo = cur.GetSpec().GetFields()["nodeName"].GetStringValue()
	}
	t.Controller = g.cfg.Controller(k.Kind)
	return t.Controller, authorizeEvent(p, anyStatusChange, t)
}

// anyStatusChange is a status change as authorizeEvent reads it (its type
// and that it sets only a status), whatever its key: read-only.
var anyStatusChange = statusEvent(projections.Key{}, &schemas.Status{})

// StatusGrant is the gate's decision that a principal may record the
// status of one version of an object (GrantStatus), carried to the write
// that follows (WriteGrantedStatus) so that a write decided once is not
// decided again. Only the gate makes one; the zero value grants nothing.
type StatusGrant struct {
	p          Principal
	k          projections.Key
	cur        *schemas.Object
	controller string
}

// GrantStatus decides as AuthorizeStatus whether p may record the status
// of the object at k, stored now as cur (which must be what the gate's
// State holds at cur's version, and is read-only from here on), and
// returns the decision for WriteGrantedStatus.
func (g *Gate) GrantStatus(p Principal, k projections.Key, cur *schemas.Object) (*StatusGrant, error) {
	c, err := g.authorizeStatus(p, k, cur)
	if err != nil {
		return nil, err
	}
	return &StatusGrant{p: p, k: k, cur: cur, controller: c}, nil
}

// records is the part of a State that reads records without decoding
// their specs (projections.Store).
type records interface {
	GetRecord(k projections.Key) *schemas.ObjectRecord
}

// WriteGrantedStatus is WriteStatus for the principal, key and object of
// a grant: the decision stands while the object is still at the version
// it was made for and its kind's controller is the same, since the object
// of a key at one version is one content (and the write expects that
// version, so nothing lands between). Otherwise the write is decided
// again on what is stored now, as WriteStatus does. st passes to the gate
// (it may change it); the object returned is read-only and may share the
// grant's spec.
func (g *Gate) WriteGrantedStatus(ctx context.Context, grant *StatusGrant, st *schemas.Status, version uint64) (*schemas.Object, error) {
	if grant == nil {
		return nil, fmt.Errorf("gate: %w: a status write without a grant", ErrForbidden)
	}
	rs, ok := g.cfg.State.(records)
	if !ok || grant.cur == nil {
		return g.writeStatus(ctx, grant.p, grant.k, st, version)
	}
	k, cur := grant.k, grant.cur
	before := rs.GetRecord(k)
	if before.GetMetadata().GetResourceVersion() != cur.GetMetadata().GetResourceVersion() || g.cfg.Controller(k.Kind) != grant.controller {
		return g.writeStatus(ctx, grant.p, k, st, version)
	}
	o, _, err := g.recordStatus(ctx, grant.p, k, cur, st, version)
	if err != nil || o != nil {
		return o, err
	}
	after := rs.GetRecord(k)
	if after == nil {
		return nil, nil
	}
	if !bytes.Equal(after.Spec, before.Spec) {
		return projections.ObjectOf(after), nil
	}
	// A status write leaves the spec as it was: the grant's, decoded
	// already, is the stored one.
	return &schemas.Object{ApiVersion: after.ApiVersion, Kind: after.Kind, Metadata: after.Metadata, Spec: cur.Spec, Status: after.Status}, nil
}

// statusEvent is the status change of k to st.
func statusEvent(k projections.Key, st *schemas.Status) *schemas.Event {
	return &schemas.Event{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: k.Proto(), Object: &schemas.Object{Status: st}}
}
