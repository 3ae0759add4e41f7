package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// foregroundPoll runs a foreground deletion again this often although
// every change of a dependent wakes it: a safety net, not the mechanism.
const foregroundPoll = 10 * time.Second

// Finalize implements reconcilers.Reconciler: garbage collection by owner,
// with the owner's propagation policy, read from its finalizers.
//
//   - Background (no finalizer): every dependent (an object whose owner
//     annotation names obj) is asked to go, and obj leaves at once; each
//     dependent's own controller deletes its dependents in turn.
//   - Foreground (foregroundDeletion): every dependent is deleted with the
//     same policy, and obj stays, being deleted, until none is left.
//     Every dependent is written by obj's controller, so every one blocks
//     its owner's deletion, as blockOwnerDeletion does in Kubernetes.
//   - Orphan (orphan): every dependent is released (it loses its owner and
//     stays), and obj leaves.
func (r *Reconciler) Finalize(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	if observed(obj) {
		return reconcilers.Result{}, nil
	}
	k := projections.ObjectKey(obj)
	r.mu.Lock()
	delete(r.daemonSets, k)
	delete(r.progress, k)
	r.mu.Unlock()
	deps := r.dependents(k)
	fins := obj.GetMetadata().GetFinalizers()
	var errs []error
	switch {
	case slices.Contains(fins, metav1.FinalizerOrphanDependents):
		for _, d := range deps {
			if d.GetStatus().GetGoal() == projections.GoalDeleted {
				continue
			}
			if err := r.cfg.Writer.Release(ctx, obj, r.actor(k), projections.ObjectKey(d)); err != nil {
				errs = append(errs, err)
			}
		}
		return reconcilers.Result{}, errors.Join(errs...)
	case slices.Contains(fins, metav1.FinalizerDeleteDependents):
		if len(deps) == 0 {
			return reconcilers.Result{}, nil
		}
		names := make([]string, 0, len(deps))
		for _, d := range deps {
			dk := projections.ObjectKey(d)
			names = append(names, dk.String())
			if slices.Contains(d.GetMetadata().GetFinalizers(), metav1.FinalizerDeleteDependents) {
				continue // already deleted in the foreground
			}
			if err := r.cfg.Writer.DeleteWith(ctx, obj, r.actor(k), dk, metav1.DeletePropagationForeground); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return reconcilers.Result{}, err
		}
		slices.Sort(names)
		if len(names) > 3 {
			names = append(names[:3], "...")
		}
		return reconcilers.Result{
			RequeueAfter: foregroundPoll,
			Phase:        "Terminating",
			Message:      fmt.Sprintf("deleting in the foreground: waiting for %d dependents (%s)", len(deps), strings.Join(names, ", ")),
		}, nil
	}
	for _, d := range deps {
		if d.GetStatus().GetGoal() == projections.GoalDeleted {
			continue
		}
		if err := r.cfg.Writer.Delete(ctx, obj, r.actor(k), projections.ObjectKey(d)); err != nil {
			errs = append(errs, err)
		}
	}
	return reconcilers.Result{}, errors.Join(errs...)
}

// dependents lists the objects of every kind in owner's namespace whose
// owner annotation names owner, without their specs where the State can.
func (r *Reconciler) dependents(owner projections.Key) []*schemas.Object {
	ref := OwnerRef(owner)
	return r.matching(projections.Query{Namespace: owner.Namespace}, true, func(md *schemas.ObjectMeta, _ *schemas.Status) bool {
		return md.GetAnnotations()[annotationOwner] == ref
	})
}
