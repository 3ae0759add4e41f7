package app

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/workload"
	"github.com/jetplane/jetplane/schemas"
)

// WorkloadsConfig configures the Deployment, ReplicaSet, Job and
// DaemonSet controllers.
type WorkloadsConfig struct {
	// Disabled leaves the workload kinds stored only.
	Disabled bool
	// JobBackoff is the delay before a Job replaces its first failed pod
	// (default 10 s, doubling).
	JobBackoff time.Duration
}

// workloadReconcilers builds the workload controllers. They write children
// through the gate, which exists only after the runtime that runs them, so
// the writer reads a.gate when called.
func (a *App) workloadReconcilers() ([]reconcilers.Reconciler, error) {
	if a.cfg.Workloads.Disabled {
		return nil, nil
	}
	r, err := workload.New(workload.Config{State: a.store, Writer: workloadWriter{a}, Instance: a.cfg.Instance, JobBackoff: a.cfg.Workloads.JobBackoff, Logger: a.cfg.Logger})
	if err != nil {
		return nil, err
	}
	return []reconcilers.Reconciler{r}, nil
}

type workloadWriter struct{ a *App }

// Apply writes children as a controller acting for owner, in the scope of
// whoever last set owner's spec (decision 0038).
func (w workloadWriter) Apply(ctx context.Context, owner *schemas.Object, actor string, objs []*schemas.Object) error {
	_, err := w.a.gate.Apply(ctx, gate.Controller(actor, owner), objs, "")
	return workloadError(err)
}

func (w workloadWriter) Delete(ctx context.Context, owner *schemas.Object, actor string, k projections.Key) error {
	_, err := w.a.gate.Delete(ctx, gate.Controller(actor, owner), k, "")
	if errors.Is(err, gate.ErrNotFound) {
		return nil
	}
	return workloadError(err)
}

// DeleteWith deletes k for owner's controller with a propagation policy
// for k's own dependents.
func (w workloadWriter) DeleteWith(ctx context.Context, owner *schemas.Object, actor string, k projections.Key, p metav1.DeletionPropagation) error {
	_, err := w.a.gate.DeleteWith(ctx, gate.Controller(actor, owner), k, "", p)
	if errors.Is(err, gate.ErrNotFound) {
		return nil
	}
	return workloadError(err)
}

// Release clears k's owner for owner's controller (an Orphan deletion).
func (w workloadWriter) Release(ctx context.Context, owner *schemas.Object, actor string, k projections.Key) error {
	_, err := w.a.gate.Release(ctx, gate.Controller(actor, owner), k)
	if errors.Is(err, gate.ErrNotFound) {
		return nil
	}
	return workloadError(err)
}

// Expire deletes obj for its own controller, as a writer confined to the
// scope of whoever last set obj's spec: no wider than they could.
func (w workloadWriter) Expire(ctx context.Context, obj *schemas.Object, actor string) error {
	p := gate.Principal{Name: actor, Role: gate.RoleWriter, Namespaces: gate.ScopeOf(obj)}
	_, err := w.a.gate.Delete(ctx, p, projections.ObjectKey(obj), "")
	if errors.Is(err, gate.ErrNotFound) {
		return nil
	}
	return workloadError(err)
}

// workloadError makes a write out of the owner's scope terminal: it does
// not heal by retrying, the owner's next change runs it again. Anything
// else (a child still being deleted) retries with backoff.
func workloadError(err error) error {
	if errors.Is(err, gate.ErrForbidden) {
		return reconcilers.Terminal(err)
	}
	return err
}
