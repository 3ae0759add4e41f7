package workload

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// Job conditions and phases, as Kubernetes names them.
const (
	ConditionComplete      = "Complete"
	ConditionFailed        = "Failed"
	ReasonBackoffLimit     = "BackoffLimitExceeded"
	ReasonDeadlineExceeded = "DeadlineExceeded"
	PhaseComplete          = "Complete"
	PhaseRunning           = "Running"
)

// maxJobBackoff caps the delay before a failed pod is replaced.
const maxJobBackoff = 6 * time.Minute

// job runs pods until spec.completions of them succeed, never more than
// spec.parallelism at once; it fails once more than spec.backoffLimit
// pods failed or spec.activeDeadlineSeconds passed, and deletes itself
// spec.ttlSecondsAfterFinished after it finished. Finished pods are kept,
// as in Kubernetes, and are what the counts are read from.
func (r *Reconciler) job(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	k := projections.ObjectKey(obj)
	var spec batchv1.JobSpec
	if err := decode(obj, &spec); err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	t, err := templateOf(obj)
	if err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	switch spec.Template.Spec.RestartPolicy {
	case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
	default:
		return reconcilers.Result{}, reconcilers.Terminal(fmt.Errorf("spec.template.spec.restartPolicy: a Job's must be Never or OnFailure, not %q", spec.Template.Spec.RestartPolicy))
	}
	completions := int32Or(spec.Completions, 1)
	parallelism := int32Or(spec.Parallelism, 1)
	backoffLimit := int32Or(spec.BackoffLimit, 6)
	now := r.cfg.Now()
	prev := jobStatus(obj)
	st := batchv1.JobStatus{StartTime: prev.StartTime, CompletionTime: prev.CompletionTime}
	if st.StartTime == nil {
		ts := metav1.NewTime(now.Truncate(time.Second))
		st.StartTime = &ts
	}
	var active []*schemas.Object
	var lastFailure time.Time
	for _, p := range r.owned(k, KindPod) {
		switch podPhase(p) {
		case corev1.PodSucceeded:
			st.Succeeded++
		case corev1.PodFailed:
			st.Failed++
			if at := p.GetStatus().GetConditions(); len(at) > 0 && at[0].GetLastTransitionTime().AsTime().After(lastFailure) {
				lastFailure = at[0].GetLastTransitionTime().AsTime()
			}
		default:
			if p.GetStatus().GetGoal() != projections.GoalDeleted {
				active = append(active, p)
			}
		}
		if spec.Template.Spec.RestartPolicy == corev1.RestartPolicyOnFailure {
			// Restarts in place count as failures (Kubernetes counts them
			// towards backoffLimit too).
			st.Failed += restarts(p)
		}
	}
	finished, reason, msg := "", "", ""
	switch {
	case prev.finished != "":
		finished, reason, msg = prev.finished, prev.reason, prev.msg
	case st.Succeeded >= completions:
		finished, reason, msg = ConditionComplete, "Completed", fmt.Sprintf("%d of %d completions succeeded", st.Succeeded, completions)
	case st.Failed > backoffLimit:
		finished, reason, msg = ConditionFailed, ReasonBackoffLimit, fmt.Sprintf("Job has reached the specified backoff limit (%d failed, limit %d)", st.Failed, backoffLimit)
	case spec.ActiveDeadlineSeconds != nil && !st.StartTime.Add(time.Duration(*spec.ActiveDeadlineSeconds)*time.Second).After(now):
		finished, reason, msg = ConditionFailed, ReasonDeadlineExceeded, "Job was active longer than specified deadline"
	}
	var requeue time.Duration
	if finished != "" {
		// Nothing more runs: stop what is left.
		for _, p := range active {
			if err := r.cfg.Writer.Delete(ctx, obj, r.actor(k), projections.ObjectKey(p)); err != nil {
				return reconcilers.Result{}, err
			}
		}
		active = nil
		if st.CompletionTime == nil && finished == ConditionComplete {
			ts := metav1.NewTime(now.Truncate(time.Second))
			st.CompletionTime = &ts
		}
		if ttl := spec.TTLSecondsAfterFinished; ttl != nil {
			at := prev.finishedAt
			if at.IsZero() {
				at = now
			}
			if left := at.Add(time.Duration(*ttl) * time.Second).Sub(now); left > 0 {
				requeue = left + 10*time.Millisecond
			} else if err := r.cfg.Writer.Expire(ctx, obj, r.actor(k)); err != nil {
				return reconcilers.Result{}, err
			}
		}
	} else {
		want := min(parallelism, completions-st.Succeeded)
		if spec.Suspend != nil && *spec.Suspend {
			want = 0
		}
		switch diff := int32(len(active)) - want; {
		case diff < 0:
			// A failed pod is replaced after a delay that doubles with
			// each failure.
			if delay := jobBackoff(r.cfg.JobBackoff, st.Failed); st.Failed > 0 && lastFailure.Add(delay).After(now) {
				requeue = lastFailure.Add(delay).Sub(now) + 10*time.Millisecond
				break
			}
			objs := make([]*schemas.Object, -diff)
			extra := map[string]string{LabelJobName: k.Name, LabelControllerUID: obj.GetMetadata().GetUid(), "job-name": k.Name}
			for i := range objs {
				objs[i] = newPod(t, k.Namespace, childName(k.Name), extra, "")
			}
			if err := r.cfg.Writer.Apply(ctx, obj, r.actor(k), objs); err != nil {
				return reconcilers.Result{}, fmt.Errorf("create %d pods: %w", -diff, err)
			}
			active = append(active, objs...)
		case diff > 0:
			r.rankForDeletion(active)
			for _, p := range active[:diff] {
				if err := r.cfg.Writer.Delete(ctx, obj, r.actor(k), projections.ObjectKey(p)); err != nil {
					return reconcilers.Result{}, err
				}
			}
			active = active[diff:]
		}
		if d := spec.ActiveDeadlineSeconds; d != nil {
			left := st.StartTime.Add(time.Duration(*d) * time.Second).Sub(now)
			if requeue == 0 || left < requeue {
				requeue = left + 10*time.Millisecond
			}
		}
	}
	st.Active = int32(len(active))
	for _, p := range active {
		if podReady(p) {
			st.Ready = ptr(st.Ready, 1)
		}
	}
	res := reconcilers.Result{RequeueAfter: requeue}
	switch finished {
	case ConditionComplete:
		res.Phase, res.Message = PhaseComplete, msg
		st.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: reason, Message: msg}}
		res.Conditions = []*schemas.Condition{{Type: ConditionComplete, Status: "True", Reason: reason, Message: msg}}
	case ConditionFailed:
		res.Phase, res.Message = reconcilers.PhaseFailed, msg
		st.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: msg}}
		res.Conditions = []*schemas.Condition{{Type: ConditionFailed, Status: "True", Reason: reason, Message: msg},
			{Type: reconcilers.ConditionReady, Status: "False", Reason: reason, Message: msg}}
	default:
		res.Phase = PhaseRunning
		res.Message = fmt.Sprintf("%d active, %d of %d succeeded, %d failed", st.Active, st.Succeeded, completions, st.Failed)
		res.Conditions = notReady(PhaseRunning, res.Message)
	}
	res.Details = reconcilers.DetailsOf(st)
	return res, nil
}

func ptr(p *int32, add int32) *int32 {
	n := add
	if p != nil {
		n += *p
	}
	return &n
}

func jobBackoff(base time.Duration, failed int32) time.Duration {
	d := base
	for i := int32(1); i < failed && d < maxJobBackoff; i++ {
		d *= 2
	}
	return min(d, maxJobBackoff)
}

func restarts(p *schemas.Object) int32 {
	var n int32
	for _, cs := range p.GetStatus().GetDetails().GetFields()["containerStatuses"].GetListValue().GetValues() {
		n += int32(cs.GetStructValue().GetFields()["restartCount"].GetNumberValue())
	}
	return n
}

// prevJob is what a Job's recorded status says.
type prevJob struct {
	StartTime, CompletionTime *metav1.Time
	finished, reason, msg     string
	finishedAt                time.Time
}

func jobStatus(obj *schemas.Object) prevJob {
	var out prevJob
	var st batchv1.JobStatus
	if d := obj.GetStatus().GetDetails(); d != nil {
		raw, _ := d.MarshalJSON()
		_ = jsonUnmarshal(raw, &st)
	}
	out.StartTime, out.CompletionTime = st.StartTime, st.CompletionTime
	for _, c := range obj.GetStatus().GetConditions() {
		if (c.GetType() == ConditionComplete || c.GetType() == ConditionFailed) && c.GetStatus() == "True" {
			out.finished, out.reason, out.msg = c.GetType(), c.GetReason(), c.GetMessage()
			out.finishedAt = c.GetLastTransitionTime().AsTime()
		}
	}
	return out
}
