package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// Phases workloads report besides the runtime's Ready.
const (
	PhaseProgressing = "Progressing"
	PhaseAvailable   = "Available"
	PhaseScaling     = "Scaling"
)

// replicaSet keeps spec.replicas active pods: it creates the missing ones
// in one atomic write, and deletes the surplus in Kubernetes' order.
func (r *Reconciler) replicaSet(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	k := projections.ObjectKey(obj)
	var spec appsv1.ReplicaSetSpec
	if err := decode(obj, &spec); err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	t, err := templateOf(obj)
	if err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	sel, err := selector(spec.Selector, t.Labels)
	if err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	if err := r.adopt(ctx, obj, r.adoptable(k, KindPod, sel)); err != nil {
		return reconcilers.Result{}, err
	}
	want := int(int32Or(spec.Replicas, 1))
	pods := r.owned(k, KindPod)
	var active []*schemas.Object
	for _, p := range pods {
		// A pod relabelled out of the selector is no longer counted
		// (Kubernetes would release it).
		if podActive(p) && sel.Matches(labels.Set(p.GetMetadata().GetLabels())) {
			active = append(active, p)
		}
	}
	switch diff := len(active) - want; {
	case diff < 0:
		objs := make([]*schemas.Object, -diff)
		for i := range objs {
			objs[i] = newPod(t, k.Namespace, childName(k.Name), nil, "")
		}
		if err := r.cfg.Writer.Apply(ctx, obj, r.actor(k), objs); err != nil {
			return reconcilers.Result{}, fmt.Errorf("create %d pods: %w", -diff, err)
		}
		// Their arrival runs this key again (Owners), with them counted.
	case diff > 0:
		r.rankForDeletion(active)
		keys := make([]projections.Key, diff)
		for i, p := range active[:diff] {
			keys[i] = projections.ObjectKey(p)
		}
		if err := r.deleteAll(ctx, obj, keys); err != nil {
			return reconcilers.Result{}, err
		}
	}
	now := r.cfg.Now()
	minReady := time.Duration(spec.MinReadySeconds) * time.Second
	st := appsv1.ReplicaSetStatus{Replicas: int32(len(active)), ObservedGeneration: obj.GetMetadata().GetGeneration()}
	var requeue time.Duration
	for _, p := range active {
		if len(p.GetMetadata().GetLabels()) > 0 && labels.SelectorFromSet(t.Labels).Matches(labels.Set(p.GetMetadata().GetLabels())) {
			st.FullyLabeledReplicas++
		}
		if podReady(p) {
			st.ReadyReplicas++
			if podAvailable(p, minReady, now) {
				st.AvailableReplicas++
			} else {
				_, since := readyCondition(p)
				if d := since.Add(minReady).Sub(now); requeue == 0 || d < requeue {
					requeue = d + 10*time.Millisecond
				}
			}
		}
	}
	res := reconcilers.Result{Details: reconcilers.DetailsOf(st), RequeueAfter: requeue, Phase: reconcilers.PhaseReady}
	if int(st.AvailableReplicas) < want || len(active) != want {
		res.Phase = PhaseScaling
		res.Conditions = notReady("Scaling", fmt.Sprintf("%d of %d pods available", st.AvailableReplicas, want))
	}
	return res, nil
}

func notReady(reason, msg string) []*schemas.Condition {
	return []*schemas.Condition{{Type: reconcilers.ConditionReady, Status: "False", Reason: reason, Message: msg}}
}

// deleteParallel is how many deletions a run has in flight at once.
const deleteParallel = 16

// deleteAll requests deletion of keys for owner, deleteParallel at a time:
// a scale-down or a rollout step deletes hundreds of pods, and one write
// after another made each step wait for hundreds of round trips. Every
// deletion is tried; the errors come back together.
func (r *Reconciler) deleteAll(ctx context.Context, owner *schemas.Object, keys []projections.Key) error {
	actor := r.actor(projections.ObjectKey(owner))
	errs := make([]error, len(keys))
	sem := make(chan struct{}, deleteParallel)
	var wg sync.WaitGroup
	for i, k := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := r.cfg.Writer.Delete(ctx, owner, actor, k); err != nil {
				errs[i] = fmt.Errorf("delete %s: %w", k.Name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
