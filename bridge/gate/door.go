package gate

import (
	"context"
	"strings"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/kinds"
)

// EventLog is what a Door appends to.
type EventLog interface {
	Append(ctx context.Context, e events.Entry) (events.Result, error)
	AppendBatch(ctx context.Context, entries []events.Entry) ([]events.Result, error)
	AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
}

// Records reads current state as the projection holds it, specs still
// encoded: the door decodes none (Store.Get would decode each spec).
type Records interface {
	GetRecord(k projections.Key) *schemas.ObjectRecord
}

var _ EventLog = (*events.Log)(nil)

// Door is the gate's entrance for the events it does not compose itself
// (decision 0066): status changes (node agents' reports, reconcilers'
// results, a lost node's pods), finalizations, evictions and bindings.
// Every entry is authorized (AuthorizeEvent) for its writer's principal
// against the object as the projection holds it, before anything is
// appended; the entries that pass are appended as the caller asked
// (one, a batch, pipelined), so batching stays the caller's. A refusal
// wraps ErrForbidden. Safe for concurrent use.
type Door struct {
	log   EventLog
	state Records
}

// NewDoor returns the door writing to log, deciding against state.
func NewDoor(log EventLog, state Records) *Door { return &Door{log: log, state: state} }

// As is p's way in: a Writer whose every entry p must be allowed.
func (d *Door) As(p Principal) *Writer {
	return &Writer{d: d, fixed: p}
}

// Reconcilers is the way in of the in-process reconciler runtime, which
// writes for every kind it runs: each entry's principal is the controller
// its actor names ("reconciler/KIND@INSTANCE"), acting for the object the
// entry is about. A reconciler so records its own object's status and
// finalization, and nothing else.
func (d *Door) Reconcilers() *Writer {
	return &Writer{d: d, perEntry: true}
}

// Writer appends on behalf of one principal (or, from Reconcilers, of
// the controller each entry's actor names). Its methods have the
// signatures of events.Log's, so it stands in for the log wherever a
// writer appended directly.
type Writer struct {
	d        *Door
	fixed    Principal
	perEntry bool
}

// principal is who writes e about cur.
func (w *Writer) principal(e events.Entry) Principal {
	if !w.perEntry {
		return w.fixed
	}
	return runtimePrincipal(e.Event)
}

// runtimePrincipal is the controller the runtime's actor names, for the
// key of ev: the kind in the actor must be the key's.
func runtimePrincipal(ev *schemas.Event) Principal {
	actor := ev.GetActor()
	p := Principal{Name: actor, Role: RoleController}
	kind, _, ok := strings.Cut(strings.TrimPrefix(actor, "reconciler/"), "@")
	k := ev.GetKey()
	if ok && strings.HasPrefix(actor, "reconciler/") && kind == k.GetKind() {
		p.Owner = kind + "/" + k.GetNamespace() + "/" + k.GetName()
	}
	return p
}

func (w *Writer) check(e events.Entry) error {
	k := projections.KeyOf(e.Event.GetKey())
	return authorizeEvent(w.principal(e), e.Event, recordTarget(k, w.d.state.GetRecord(k)))
}

// recordTarget is the target at k stored now as r (nil when absent), read
// from the record without decoding its spec.
func recordTarget(k projections.Key, r *schemas.ObjectRecord) Target {
	t := Target{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, ClusterScoped: !kinds.Lookup(k.Kind).Namespaced}
	if r != nil {
		ann := r.GetMetadata().GetAnnotations()
		t.Exists, t.Owner, t.AllowAdoption = true, ann[AnnotationOwner], ann[AnnotationAllowAdoption]
		t.Deleting = r.GetStatus().GetGoal() == projections.GoalDeleted
		if k.Kind == podKind {
			t.BoundTo, _ = events.SpecString(r.GetSpec(), "nodeName")
		}
	}
	return t
}

// Append checks and appends one entry.
func (w *Writer) Append(ctx context.Context, e events.Entry) (events.Result, error) {
	if err := w.check(e); err != nil {
		return events.Result{}, err
	}
	return w.d.log.Append(ctx, e)
}

// AppendBatch checks every entry and appends them as one atomic batch, or
// nothing when one is refused.
func (w *Writer) AppendBatch(ctx context.Context, entries []events.Entry) ([]events.Result, error) {
	for _, e := range entries {
		if err := w.check(e); err != nil {
			return nil, err
		}
	}
	return w.d.log.AppendBatch(ctx, entries)
}

// AppendAsync checks every entry and appends those allowed, pipelined:
// one result and error per entry, a refused entry's error its refusal.
func (w *Writer) AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error) {
	return w.appendAllowed(ctx, entries, w.d.log.AppendAsync)
}

// AppendEach checks every entry and appends those allowed in the log's
// group commit shared with its other writers (decision 0069), so that
// writes through the door keep their place in it; on a log without one,
// pipelined. One result and error per entry, as AppendAsync.
func (w *Writer) AppendEach(ctx context.Context, entries []events.Entry) ([]events.Result, []error) {
	if each, ok := w.d.log.(eachLog); ok {
		return w.appendAllowed(ctx, entries, each.AppendEach)
	}
	return w.AppendAsync(ctx, entries)
}

// appendAllowed appends through write the entries the principal may
// write; a refused entry's error is its refusal.
func (w *Writer) appendAllowed(ctx context.Context, entries []events.Entry, write func(context.Context, []events.Entry) ([]events.Result, []error)) ([]events.Result, []error) {
	var refused []error
	for i, e := range entries {
		if err := w.check(e); err != nil {
			if refused == nil {
				refused = make([]error, len(entries))
			}
			refused[i] = err
		}
	}
	if refused == nil {
		return write(ctx, entries)
	}
	var ok []events.Entry
	var at []int
	for i, e := range entries {
		if refused[i] == nil {
			ok, at = append(ok, e), append(at, i)
		}
	}
	res, errs := make([]events.Result, len(entries)), refused
	if len(ok) > 0 {
		r, es := write(ctx, ok)
		for j, i := range at {
			if r != nil {
				res[i] = r[j]
			}
			if es != nil {
				errs[i] = es[j]
			}
		}
	}
	return res, errs
}

// AuthorizeEvent decides whether p may append ev, about an object stored
// now as cur (nil when absent). A status change carries a status and
// nothing else; a finalization and a deletion request carry no object;
// Applied and Observed events are refused here (they pass Apply and
// Observe, which compose them).
func AuthorizeEvent(p Principal, ev *schemas.Event, cur *schemas.Object) error {
	k := projections.KeyOf(ev.GetKey())
	t := target(k, cur)
	if k.Kind == podKind {
		t.BoundTo = cur.GetSpec().GetFields()["nodeName"].GetStringValue()
	}
	return authorizeEvent(p, ev, t)
}

// authorizeEvent is AuthorizeEvent for the target as stored now.
func authorizeEvent(p Principal, ev *schemas.Event, t Target) error {
	switch ev.GetType() {
	case schemas.EventType_EVENT_TYPE_STATUS_CHANGED:
		if o := ev.GetObject(); o.GetStatus() == nil || !statusOnly(o) {
			return forbid(p, "write a status change of %s that sets more than its status", t.describe())
		}
		return Authorize(p, VerbStatus, t)
	case schemas.EventType_EVENT_TYPE_FINALIZED:
		if ev.GetObject() != nil {
			return forbid(p, "finalize %s with an object", t.describe())
		}
		return Authorize(p, VerbFinalize, t)
	case schemas.EventType_EVENT_TYPE_DELETE_REQUESTED:
		if ev.GetObject() != nil {
			return forbid(p, "request the deletion of %s with an object", t.describe())
		}
		return Authorize(p, VerbDelete, t)
	case schemas.EventType_EVENT_TYPE_BOUND:
		return Authorize(p, VerbBind, t)
	}
	return forbid(p, "write a %s event for %s through this door: desired state passes Gate.Apply, observations Gate.Observe", ev.GetType(), t.describe())
}
