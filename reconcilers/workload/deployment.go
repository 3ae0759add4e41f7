package workload

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// Deployment condition types, reasons and phases, as Kubernetes names them.
const (
	ConditionAvailable   = "Available"
	ConditionProgressing = "Progressing"
	PhasePaused          = "Paused"
	PhaseDeadline        = "ProgressDeadlineExceeded"
)

// rsView is one ReplicaSet of a Deployment: the stored object, its
// desired replicas (as this run decides them) and its reported status.
type rsView struct {
	obj      *schemas.Object
	hash     string
	revision int
	replicas int32 // spec.replicas, as decided
	before   int32 // spec.replicas, as stored
	status   appsv1.ReplicaSetStatus
}

func viewRS(o *schemas.Object) rsView {
	v := rsView{obj: o, hash: o.GetMetadata().GetLabels()[LabelTemplateHash]}
	v.revision, _ = strconv.Atoi(o.GetMetadata().GetAnnotations()[AnnotationRevision])
	v.replicas = int32(o.GetSpec().GetFields()["replicas"].GetNumberValue())
	if _, ok := o.GetSpec().GetFields()["replicas"]; !ok {
		v.replicas = 1
	}
	v.before = v.replicas
	if d := o.GetStatus().GetDetails(); d != nil {
		raw, _ := d.MarshalJSON()
		_ = jsonUnmarshal(raw, &v.status)
	}
	return v
}

// Fenceposts turns maxSurge and maxUnavailable into pod counts for
// desired replicas: surge rounds up, unavailability down, and both zero
// becomes one unavailable, so a rollout always moves (Kubernetes'
// ResolveFenceposts).
func Fenceposts(maxSurge, maxUnavailable *intstr.IntOrString, desired int32) (surge, unavailable int32, err error) {
	def := intstr.FromString("25%")
	if maxSurge == nil {
		maxSurge = &def
	}
	if maxUnavailable == nil {
		maxUnavailable = &def
	}
	s, err := intstr.GetScaledValueFromIntOrPercent(maxSurge, int(desired), true)
	if err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxSurge: %w", err)
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, int(desired), false)
	if err != nil {
		return 0, 0, fmt.Errorf("spec.strategy.rollingUpdate.maxUnavailable: %w", err)
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u), nil
}

// deployment drives a Deployment's ReplicaSets towards its template.
func (r *Reconciler) deployment(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	k := projections.ObjectKey(obj)
	var spec appsv1.DeploymentSpec
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
	desired := int32Or(spec.Replicas, 1)
	var surge, unavailable int32
	recreate := spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType
	switch spec.Strategy.Type {
	case "", appsv1.RollingUpdateDeploymentStrategyType:
		var ru appsv1.RollingUpdateDeployment
		if spec.Strategy.RollingUpdate != nil {
			ru = *spec.Strategy.RollingUpdate
		}
		if surge, unavailable, err = Fenceposts(ru.MaxSurge, ru.MaxUnavailable, desired); err != nil {
			return reconcilers.Result{}, reconcilers.Terminal(err)
		}
	case appsv1.RecreateDeploymentStrategyType:
	default:
		return reconcilers.Result{}, reconcilers.Terminal(fmt.Errorf("spec.strategy.type: %q is not RollingUpdate or Recreate", spec.Strategy.Type))
	}
	if err := r.adopt(ctx, obj, r.adoptable(k, KindReplicaSet, sel)); err != nil {
		return reconcilers.Result{}, err
	}
	hash := hashTemplate(t.toStruct())
	var newRS *rsView
	var old []*rsView
	maxRev := 0
	for _, o := range r.owned(k, KindReplicaSet) {
		if o.GetStatus().GetGoal() == projections.GoalDeleted {
			continue
		}
		v := viewRS(o)
		maxRev = max(maxRev, v.revision)
		if v.hash == hash && newRS == nil {
			newRS = &v
		} else {
			old = append(old, &v)
		}
	}
	slices.SortFunc(old, func(a, b *rsView) int { return a.revision - b.revision })
	var writes []*schemas.Object
	waiting := false
	if !spec.Paused {
		if newRS == nil {
			newRS = &rsView{hash: hash, revision: maxRev + 1, replicas: 0, before: -1}
			if recreate {
				newRS.replicas = 0
			}
		} else if newRS.revision < maxRev {
			// An earlier template is back (rollout undo): it becomes the
			// newest revision, as in Kubernetes.
			newRS.revision = maxRev + 1
			newRS.before = -1
		}
		if recreate {
			waiting = r.recreate(k, desired, newRS, old)
		} else {
			rollingUpdate(desired, surge, unavailable, newRS, old)
		}
		if newRS.obj == nil || newRS.replicas != newRS.before {
			writes = append(writes, r.newReplicaSet(obj, k, spec, t, sel, newRS))
		}
		for _, v := range old {
			if v.replicas != v.before {
				writes = append(writes, withReplicas(v.obj, v.replicas, 0))
			}
		}
		if len(writes) > 0 {
			if err := r.cfg.Writer.Apply(ctx, obj, r.actor(k), writes); err != nil {
				return reconcilers.Result{}, fmt.Errorf("write replica sets: %w", err)
			}
		}
		if err := r.cleanup(ctx, obj, k, spec, old); err != nil {
			return reconcilers.Result{}, err
		}
	}
	res := r.deploymentStatus(k, obj, spec, desired, unavailable, newRS, old)
	if waiting && (res.RequeueAfter == 0 || res.RequeueAfter > recreatePoll) {
		res.RequeueAfter = recreatePoll
	}
	return res, nil
}

// recreatePoll is how often a Recreate looks for its old pods to be gone:
// their leaving changes no status the Deployment watches.
const recreatePoll = 200 * time.Millisecond

// rollingUpdate decides the replicas of the new and old ReplicaSets for
// one step of a rolling update, with Kubernetes' arithmetic: the new one
// grows while all pods stay within desired+surge; old ones shrink, their
// unhealthy pods first, while available pods stay at least
// desired-unavailable.
func rollingUpdate(desired, surge, unavailable int32, newRS *rsView, old []*rsView) {
	total := func() int32 {
		n := newRS.replicas
		for _, v := range old {
			n += v.replicas
		}
		return n
	}
	switch {
	case newRS.replicas > desired:
		newRS.replicas = desired
	case newRS.replicas < desired:
		if maxTotal := desired + surge; total() < maxTotal {
			newRS.replicas += min(maxTotal-total(), desired-newRS.replicas)
		}
	}
	minAvailable := desired - unavailable
	newUnavailable := newRS.replicas - newRS.status.AvailableReplicas
	maxScaledDown := total() - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return
	}
	for _, v := range old {
		if maxScaledDown <= 0 {
			break
		}
		unhealthy := v.replicas - v.status.AvailableReplicas
		if v.replicas == 0 || unhealthy <= 0 {
			continue
		}
		down := min(maxScaledDown, unhealthy)
		v.replicas -= down
		maxScaledDown -= down
	}
	available := newRS.status.AvailableReplicas
	for _, v := range old {
		available += min(v.status.AvailableReplicas, v.replicas)
	}
	down := min(available-minAvailable, maxScaledDown)
	for _, v := range old {
		if down <= 0 {
			break
		}
		d := min(v.replicas, down)
		v.replicas -= d
		down -= d
	}
}

// recreate scales every old ReplicaSet to zero and the new one up only
// once no pod of the old ones is left; it reports whether it waits.
func (r *Reconciler) recreate(k projections.Key, desired int32, newRS *rsView, old []*rsView) bool {
	left := 0
	for _, v := range old {
		v.replicas = 0
		if v.obj != nil {
			left += len(r.owned(projections.ObjectKey(v.obj), KindPod))
		}
	}
	if left == 0 {
		newRS.replicas = desired
	}
	return left > 0
}

// newReplicaSet is the ReplicaSet of the Deployment's current template.
func (r *Reconciler) newReplicaSet(d *schemas.Object, k projections.Key, spec appsv1.DeploymentSpec, t template, sel any, v *rsView) *schemas.Object {
	if v.obj != nil {
		return withReplicas(v.obj, v.replicas, v.revision)
	}
	lbl := map[string]string{LabelTemplateHash: v.hash}
	for key, val := range t.Labels {
		lbl[key] = val
	}
	t.Labels = lbl
	ann := map[string]string{AnnotationRevision: strconv.Itoa(v.revision)}
	if c := d.GetMetadata().GetAnnotations()[AnnotationChangeCause]; c != "" {
		ann[AnnotationChangeCause] = c
	}
	selector := proto.CloneOf(d.GetSpec().GetFields()["selector"].GetStructValue())
	ml := selector.GetFields()["matchLabels"].GetStructValue()
	if ml == nil {
		ml = &structpb.Struct{Fields: map[string]*structpb.Value{}}
		selector.Fields["matchLabels"] = structpb.NewStructValue(ml)
	}
	ml.Fields[LabelTemplateHash] = structpb.NewStringValue(v.hash)
	rs := &structpb.Struct{Fields: map[string]*structpb.Value{
		"replicas": structpb.NewNumberValue(float64(v.replicas)),
		"selector": structpb.NewStructValue(selector),
		"template": structpb.NewStructValue(t.toStruct()),
	}}
	if spec.MinReadySeconds > 0 {
		rs.Fields["minReadySeconds"] = structpb.NewNumberValue(float64(spec.MinReadySeconds))
	}
	return &schemas.Object{ApiVersion: "apps/v1", Kind: "ReplicaSet", Metadata: &schemas.ObjectMeta{
		Name: k.Name + "-" + v.hash, Namespace: k.Namespace, Labels: lbl, Annotations: ann,
	}, Spec: rs}
}

// withReplicas is rs as stored with spec.replicas n (and, when revision
// is not 0, that revision), ready to apply again.
func withReplicas(rs *schemas.Object, n int32, revision int) *schemas.Object {
	c := proto.CloneOf(rs)
	c.Status = nil
	c.Metadata.ResourceVersion, c.Metadata.Generation, c.Metadata.Uid, c.Metadata.CreationTime = 0, 0, "", nil
	c.Spec.Fields["replicas"] = structpb.NewNumberValue(float64(n))
	if revision > 0 {
		if c.Metadata.Annotations == nil {
			c.Metadata.Annotations = map[string]string{}
		}
		c.Metadata.Annotations[AnnotationRevision] = strconv.Itoa(revision)
	}
	return c
}

// cleanup deletes the oldest ReplicaSets scaled to zero beyond
// revisionHistoryLimit (default 10). Revisions stay in the log, which
// rollout history reads.
func (r *Reconciler) cleanup(ctx context.Context, d *schemas.Object, k projections.Key, spec appsv1.DeploymentSpec, old []*rsView) error {
	limit := int(int32Or(spec.RevisionHistoryLimit, 10))
	var idle []*rsView
	for _, v := range old {
		if v.replicas == 0 && v.status.Replicas == 0 && v.obj != nil {
			idle = append(idle, v)
		}
	}
	for len(idle) > limit {
		if err := r.cfg.Writer.Delete(ctx, d, r.actor(k), projections.ObjectKey(idle[0].obj)); err != nil {
			return err
		}
		idle = idle[1:]
	}
	return nil
}

func (r *Reconciler) deploymentStatus(k projections.Key, obj *schemas.Object, spec appsv1.DeploymentSpec, desired, unavailable int32, newRS *rsView, old []*rsView) reconcilers.Result {
	st := appsv1.DeploymentStatus{ObservedGeneration: obj.GetMetadata().GetGeneration()}
	all := old
	if newRS != nil {
		all = append(slices.Clone(old), newRS)
		if newRS.obj != nil {
			st.UpdatedReplicas = newRS.status.Replicas
		}
	}
	for _, v := range all {
		st.Replicas += v.status.Replicas
		st.ReadyReplicas += v.status.ReadyReplicas
		st.AvailableReplicas += v.status.AvailableReplicas
	}
	st.UnavailableReplicas = max(desired-st.AvailableReplicas, 0)
	avail := corev1.ConditionTrue
	availReason, availMsg := "MinimumReplicasAvailable", "Deployment has minimum availability."
	if st.AvailableReplicas < desired-unavailable {
		avail, availReason, availMsg = corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability."
	}
	complete := st.UpdatedReplicas == desired && st.Replicas == desired && st.AvailableReplicas == desired
	for _, v := range old {
		complete = complete && v.replicas == 0
	}
	rsName := ""
	if newRS != nil {
		rsName = k.Name + "-" + newRS.hash
	}
	res := reconcilers.Result{}
	prog, progReason, progMsg := corev1.ConditionTrue, "ReplicaSetUpdated", fmt.Sprintf("ReplicaSet %q is progressing.", rsName)
	now := r.cfg.Now()
	r.mu.Lock()
	switch {
	case spec.Paused:
		prog, progReason, progMsg = corev1.ConditionUnknown, "DeploymentPaused", "Deployment is paused"
		delete(r.progress, k)
		res.Phase = PhasePaused
	case complete:
		progReason, progMsg = "NewReplicaSetAvailable", fmt.Sprintf("ReplicaSet %q has successfully progressed.", rsName)
		delete(r.progress, k)
		res.Phase = reconcilers.PhaseReady
	default:
		res.Phase = PhaseProgressing
		sig := fmt.Sprint(rsName, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas)
		m, ok := r.progress[k]
		if !ok || m.sig != sig {
			m = progressMark{sig: sig, at: now}
			r.progress[k] = m
		}
		deadline := time.Duration(int32Or(spec.ProgressDeadlineSeconds, 600)) * time.Second
		if left := m.at.Add(deadline).Sub(now); left <= 0 {
			prog, progReason, progMsg = corev1.ConditionFalse, "ProgressDeadlineExceeded", fmt.Sprintf("ReplicaSet %q has timed out progressing.", rsName)
			res.Phase = PhaseDeadline
		} else {
			res.RequeueAfter = left + 10*time.Millisecond
		}
	}
	r.mu.Unlock()
	st.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: avail, Reason: availReason, Message: availMsg},
		{Type: appsv1.DeploymentProgressing, Status: prog, Reason: progReason, Message: progMsg},
	}
	res.Details = reconcilers.DetailsOf(st)
	res.Message = fmt.Sprintf("%d/%d ready, %d up to date, %d available", st.ReadyReplicas, desired, st.UpdatedReplicas, st.AvailableReplicas)
	res.Conditions = []*schemas.Condition{
		{Type: ConditionAvailable, Status: string(avail), Reason: availReason, Message: availMsg},
		{Type: ConditionProgressing, Status: string(prog), Reason: progReason, Message: progMsg},
	}
	if !complete {
		res.Conditions = append(res.Conditions, &schemas.Condition{Type: reconcilers.ConditionReady, Status: "False", Reason: progReason, Message: res.Message})
	}
	return res
}
