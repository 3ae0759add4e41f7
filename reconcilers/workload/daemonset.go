package workload

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// daemonSet keeps one pod of its template on every eligible node: one
// whose labels match the template's nodeSelector and whose NoSchedule and
// NoExecute taints the template tolerates. Pods are bound to their node
// directly. A template change replaces pods node by node, at most
// maxUnavailable (default 1) unavailable at a time.
func (r *Reconciler) daemonSet(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	k := projections.ObjectKey(obj)
	r.mu.Lock()
	r.daemonSets[k] = true
	r.mu.Unlock()
	var spec appsv1.DaemonSetSpec
	if err := decode(obj, &spec); err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	t, err := templateOf(obj)
	if err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	if _, err := selector(spec.Selector, t.Labels); err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	hash := hashTemplate(t.toStruct())
	nodes, _ := r.cfg.State.List(projections.Query{Kind: KindNode})
	eligible := map[string]bool{}
	lost := map[string]bool{}
	for _, n := range nodes {
		// A Node observed in a Kubernetes cluster has a namespace (the
		// cluster's); only jetplane's own nodes run daemon pods.
		if n.GetMetadata().GetNamespace() == "" && n.GetStatus().GetGoal() != projections.GoalDeleted && shouldRun(&spec.Template.Spec, n) {
			eligible[n.GetMetadata().GetName()] = true
			// A NotReady node keeps its daemon pod but gets no new one:
			// its eviction would delete it again, and again.
			lost[n.GetMetadata().GetName()] = n.GetStatus().GetPhase() == "NotReady"
		}
	}
	byNode := map[string][]*schemas.Object{}
	var misplaced []*schemas.Object
	for _, p := range r.owned(k, KindPod) {
		if !podActive(p) {
			if p.GetStatus().GetGoal() != projections.GoalDeleted && podPhase(p) == corev1.PodFailed {
				misplaced = append(misplaced, p) // a failed daemon pod is replaced
			}
			continue
		}
		n := r.nodeNameOf(p)
		if !eligible[n] {
			misplaced = append(misplaced, p)
			continue
		}
		byNode[n] = append(byNode[n], p)
	}
	var create []*schemas.Object
	var del []*schemas.Object
	st := appsv1.DaemonSetStatus{ObservedGeneration: obj.GetMetadata().GetGeneration(), NumberMisscheduled: int32(len(misplaced))}
	var stale []*schemas.Object
	unavailable := int32(0)
	names := make([]string, 0, len(eligible))
	for n := range eligible {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		st.DesiredNumberScheduled++
		pods := byNode[n]
		if len(pods) == 0 {
			if lost[n] {
				unavailable++
				continue
			}
			create = append(create, newPod(t, k.Namespace, childName(k.Name), map[string]string{LabelRevisionHash: hash}, n))
			unavailable++
			continue
		}
		st.CurrentNumberScheduled++
		r.rankForDeletion(pods)
		del = append(del, pods[:len(pods)-1]...) // one pod per node: keep the best
		p := pods[len(pods)-1]
		if podReady(p) {
			st.NumberReady++
			st.NumberAvailable++
		} else {
			unavailable++
		}
		if p.GetMetadata().GetLabels()[LabelRevisionHash] == hash {
			st.UpdatedNumberScheduled++
		} else {
			stale = append(stale, p)
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	// Rolling update: replace stale pods while few enough are unavailable;
	// unavailable stale pods go first, since they serve nothing.
	maxUnavailable := int32(1)
	if spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
		if ru := spec.UpdateStrategy.RollingUpdate; ru != nil && ru.MaxUnavailable != nil {
			v, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, int(st.DesiredNumberScheduled), true)
			if err != nil {
				return reconcilers.Result{}, reconcilers.Terminal(fmt.Errorf("spec.updateStrategy.rollingUpdate.maxUnavailable: %w", err))
			}
			maxUnavailable = max(int32(v), 1)
		}
		r.rankForDeletion(stale)
		for _, p := range stale {
			if podReady(p) {
				if unavailable >= maxUnavailable {
					break
				}
				unavailable++
			}
			del = append(del, p)
		}
	}
	del = append(del, misplaced...)
	if len(create) > 0 {
		if err := r.cfg.Writer.Apply(ctx, obj, r.actor(k), create); err != nil {
			return reconcilers.Result{}, fmt.Errorf("create %d pods: %w", len(create), err)
		}
	}
	for _, p := range del {
		if err := r.cfg.Writer.Delete(ctx, obj, r.actor(k), projections.ObjectKey(p)); err != nil {
			return reconcilers.Result{}, err
		}
	}
	res := reconcilers.Result{Details: reconcilers.DetailsOf(st), Phase: reconcilers.PhaseReady,
		Message: fmt.Sprintf("%d of %d nodes ready", st.NumberReady, st.DesiredNumberScheduled)}
	if st.NumberReady < st.DesiredNumberScheduled || st.UpdatedNumberScheduled < st.DesiredNumberScheduled {
		res.Phase = PhaseProgressing
		res.Conditions = notReady(PhaseProgressing, res.Message)
	}
	return res, nil
}

// shouldRun tells whether a daemon pod of spec belongs on node n.
func shouldRun(spec *corev1.PodSpec, n *schemas.Object) bool {
	if len(spec.NodeSelector) > 0 && !labels.SelectorFromSet(spec.NodeSelector).Matches(labels.Set(n.GetMetadata().GetLabels())) {
		return false
	}
	ns, err := podspec.Node(n.GetSpec())
	if err != nil {
		return false
	}
	for _, taint := range ns.Taints {
		if taint.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tolerates(tol, taint) }) {
			return false
		}
	}
	return true
}

// tolerates is Kubernetes' toleration rule: an empty key with Exists
// tolerates everything; otherwise key, effect (empty: any) and value
// (Equal) must match.
func tolerates(tol corev1.Toleration, taint corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != taint.Effect {
		return false
	}
	if tol.Key == "" {
		return tol.Operator == corev1.TolerationOpExists
	}
	if tol.Key != taint.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case "", corev1.TolerationOpEqual:
		return tol.Value == taint.Value
	}
	return false
}
