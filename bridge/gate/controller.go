package gate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// StatusLog is what the controllers' door writes to.
type StatusLog interface {
	AppendBatch(ctx context.Context, entries []events.Entry) ([]events.Result, error)
	AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
}

var _ StatusLog = (*events.Log)(nil)

// ControllerState is what the controllers' door decides against: records
// as the projection holds them (no spec is decoded), and a wait for the
// projection to reach what a controller read.
type ControllerState interface {
	Records
	WaitFor(ctx context.Context, seq uint64) error
}

var _ ControllerState = (*projections.Store)(nil)

// ControllerConfig configures Controllers.
type ControllerConfig struct {
	Log   StatusLog
	State ControllerState
	// Controller names the controller credential that runs kind: "" when
	// none does or a reconciler in jetplane's own processes runs it (then
	// no controller may, whatever its credential says). The same function
	// as Config.Controller: both doors decide by it (Target.Controller).
	Controller func(kind string) string
	// Group writes a request's entries as one atomic batch first (one
	// fsync when the log fsyncs every write), each on its own only if
	// that fails; otherwise they are pipelined (decision 0051).
	Group bool
}

// Controllers is the door of out-of-process controllers' writes: each
// request comes from one controller credential (the subject it arrives on
// names it, and only that credential may publish there) and may record
// the status and the finalization of that controller's kinds, nothing
// else. A request is checked whole before anything is written; a refusal
// wraps events.ErrRefused. Safe for concurrent use.
type Controllers struct {
	cfg ControllerConfig
}

// NewControllers validates cfg and returns the door.
func NewControllers(cfg ControllerConfig) (*Controllers, error) {
	if cfg.Log == nil || cfg.State == nil || cfg.Controller == nil {
		return nil, errors.New("gate: controllers need a log, a state and the controller of each kind")
	}
	return &Controllers{cfg: cfg}, nil
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", events.ErrRefused, fmt.Sprintf(format, args...))
}

// Write checks and writes one request (events.ControllerWriteFunc): an
// atomic one as one batch (every result, or one error), any other entry
// by entry, pipelined (one result and error each).
func (c *Controllers) Write(ctx context.Context, w events.ControllerWrite) ([]events.Result, []error) {
	entries := make([]events.Entry, len(w.Entries))
	errs := make([]error, len(w.Entries))
	// Decide on a projection that holds what the controller read: its
	// own fold may be ahead of this instance's.
	var upTo uint64
	for _, e := range w.Entries {
		if e.Expect != events.AnyVersion {
			upTo = max(upTo, e.Expect)
		}
	}
	if err := c.cfg.State.WaitFor(ctx, upTo); err != nil {
		for i := range errs {
			errs[i] = err
		}
		if w.Atomic {
			return nil, errs[:1]
		}
		return make([]events.Result, len(entries)), errs
	}
	failed := false
	for i, e := range w.Entries {
		entries[i], errs[i] = c.check(w.Controller, e)
		failed = failed || errs[i] != nil
	}
	if w.Atomic {
		for _, err := range errs {
			if err != nil {
				return nil, []error{err}
			}
		}
		res, err := c.cfg.Log.AppendBatch(ctx, entries)
		if err != nil {
			return nil, []error{err}
		}
		return res, nil
	}
	if !failed {
		if each, ok := c.cfg.Log.(eachLog); ok {
			// Committed with the instances' other writes; the log picks
			// atomic or pipelined.
			return each.AppendEach(ctx, entries)
		}
		if c.cfg.Group && len(entries) > 1 {
			if res, err := c.cfg.Log.AppendBatch(ctx, entries); err == nil {
				return res, nil
			}
		}
		return c.cfg.Log.AppendAsync(ctx, entries)
	}
	// Write what passed; the rest keep their refusals.
	var ok []events.Entry
	var at []int
	for i, err := range errs {
		if err == nil {
			ok, at = append(ok, entries[i]), append(at, i)
		}
	}
	res := make([]events.Result, len(entries))
	if len(ok) > 0 {
		var r []events.Result
		var e []error
		if each, isEach := c.cfg.Log.(eachLog); isEach {
			r, e = each.AppendEach(ctx, ok)
		} else {
			r, e = c.cfg.Log.AppendAsync(ctx, ok)
		}
		for j, i := range at {
			res[i] = r[j]
			if e != nil {
				errs[i] = e[j]
			}
		}
	}
	return res, errs
}

// check decides one entry of controller's request and returns the entry
// to write. The request's credential and the entry's actor make the
// principal: the actor must be the runtime's for that kind and
// controller ("reconciler/KIND@CONTROLLER/INSTANCE"), so history names
// who wrote, and the entry must name the version it read. What the
// principal may write is Authorize's to decide, as for every other
// writer (authorizeEvent): the status of an object of its kinds, or the
// finalization of one whose deletion was requested.
func (c *Controllers) check(controller string, e events.Entry) (events.Entry, error) {
	ev := e.Event
	k := projections.KeyOf(ev.GetKey())
	if !strings.HasPrefix(ev.GetActor(), "reconciler/"+k.Kind+"@"+controller+"/") {
		return e, refused("%s: actor %q: a controller writes as reconciler/%s@%s/INSTANCE", k, ev.GetActor(), k.Kind, controller)
	}
	r := c.cfg.State.GetRecord(k)
	t := recordTarget(k, r)
	t.Controller = c.cfg.Controller(k.Kind)
	p := Principal{Name: ev.GetActor(), Role: RoleController, Self: controller}
	if err := authorizeEvent(p, ev, t); err != nil {
		return e, fmt.Errorf("%w: %w", events.ErrRefused, err)
	}
	if r == nil {
		return e, refused("%s: no such object", k)
	}
	if e.Expect == events.AnyVersion {
		return e, refused("%s: a controller's write names the version it read", k)
	}
	// Written as checked: the fields an event of this door may carry.
	out := &schemas.Event{Id: ev.GetId(), Type: ev.GetType(), Key: ev.GetKey(), Actor: ev.GetActor(), Time: ev.GetTime(), Cause: ev.GetCause()}
	if ev.GetType() == schemas.EventType_EVENT_TYPE_STATUS_CHANGED {
		out.Object = &schemas.Object{Status: ev.GetObject().GetStatus()}
	}
	return events.Entry{Event: out, Expect: e.Expect}, nil
}

// statusOnly reports whether o sets no field but its status (unknown
// fields included).
func statusOnly(o *schemas.Object) bool {
	only := len(o.ProtoReflect().GetUnknown()) == 0
	o.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		only = only && fd.Name() == "status"
		return only
	})
	return only
}
