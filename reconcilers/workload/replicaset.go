package workload

import (
	"context"
	"fmt"
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
		for _, p := range active[:diff] {
			if err := r.cfg.Writer.Delete(ctx, obj, r.actor(k), projections.ObjectKey(p)); err != nil {
				return reconcilers.Result{}, fmt.Errorf("delete %s: %w", p.GetMetadata().GetName(), err)
			}
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
	res := reconcilers.Result{Details: details(st), RequeueAfter: requeue, Phase: reconcilers.PhaseReady}
	if int(st.AvailableReplicas) < want || len(active) != want {
		res.Phase = PhaseScaling
		res.Conditions = notReady("Scaling", fmt.Sprintf("%d of %d pods available", st.AvailableReplicas, want))
	}
	return res, nil
}

func notReady(reason, msg string) []*schemas.Condition {
	return []*schemas.Condition{{Type: reconcilers.ConditionReady, Status: "False", Reason: reason, Message: msg}}
}
