package reconcilers

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Reconciler drives the world towards objects of its kinds.
type Reconciler interface {
	// Kinds lists the kinds (with group, as keys name them) it handles.
	Kinds() []string
	// Reconcile drives the world towards obj: the latest projected state,
	// never the event that triggered the run.
	Reconcile(ctx context.Context, obj *schemas.Object) (Result, error)
	// Finalize cleans up after obj once its goal is deleted. The object
	// leaves current state when Finalize succeeds without RequeueAfter.
	Finalize(ctx context.Context, obj *schemas.Object) (Result, error)
}

// Watcher is a Reconciler that also runs when other objects change: for
// the Apply kind, a change of the Kubernetes object it owns (seen by the
// bridge) runs the Apply again, to correct drift.
type Watcher interface {
	Reconciler
	// Owners maps a changed object (as the projection keeps it) to the
	// keys of this reconciler's kinds that must run because of it. It runs
	// with the projection locked, for every change: it must be quick and
	// must not call the projection.
	Owners(rec *schemas.ObjectRecord) []projections.Key
}

// Result is what a run reports.
type Result struct {
	// RequeueAfter runs the key again after this long; 0 waits for the
	// next change (or the periodic resync).
	RequeueAfter time.Duration
	// Phase, Message and Conditions are recorded in the object's status.
	// A Ready condition is added when the run does not set one: True after
	// a successful Reconcile, False after an error.
	Phase      string
	Message    string
	Conditions []*schemas.Condition
	// Details is the kind's own status shape (for a pod, its v1 PodStatus
	// fields), recorded as status.details. A run that changes it writes
	// a status; the runtime keeps no reference to it after the run.
	Details *structpb.Struct
	// KeepStatus records nothing: the status in the log stays as it is
	// (a pod's, which its node agent writes). Errors are still recorded.
	KeepStatus bool
}

// Funcs adapts functions to a Reconciler, for one-off reconcilers. A nil
// FinalizeFunc finalizes at once.
type Funcs struct {
	KindList      []string
	ReconcileFunc func(ctx context.Context, obj *schemas.Object) (Result, error)
	FinalizeFunc  func(ctx context.Context, obj *schemas.Object) (Result, error)
}

var _ Reconciler = Funcs{}

// Kinds implements Reconciler.
func (f Funcs) Kinds() []string { return f.KindList }

// Reconcile implements Reconciler.
func (f Funcs) Reconcile(ctx context.Context, obj *schemas.Object) (Result, error) {
	return f.ReconcileFunc(ctx, obj)
}

// Finalize implements Reconciler.
func (f Funcs) Finalize(ctx context.Context, obj *schemas.Object) (Result, error) {
	if f.FinalizeFunc == nil {
		return Result{}, nil
	}
	return f.FinalizeFunc(ctx, obj)
}

type terminalError struct{ err error }

func (e terminalError) Error() string { return e.err.Error() }
func (e terminalError) Unwrap() error { return e.err }

// Terminal marks err as not worth retrying: it is recorded in status and
// the key waits until its object changes.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return terminalError{err: err}
}

// IsTerminal reports whether err was marked with Terminal.
func IsTerminal(err error) bool {
	var t terminalError
	return errors.As(err, &t)
}
