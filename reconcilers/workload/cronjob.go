package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"google.golang.org/protobuf/types/known/structpb"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// KindCronJob, as keys name it.
const KindCronJob = "CronJob.batch"

// AnnotationScheduledTimestamp, on a CronJob's Job, is the time it was
// scheduled for, as Kubernetes' CronJob controller sets it.
const AnnotationScheduledTimestamp = "batch.kubernetes.io/cronjob-scheduled-timestamp"

// Phases of a CronJob.
const (
	PhaseScheduled = "Scheduled"
	PhaseSuspended = "Suspended"
)

// maxMissed bounds how many missed start times a run walks through before
// it looks only at the most recent ones.
const maxMissed = 10000

// cronPlan is what a CronJob's run is to do now: a pure function of its
// spec, what it last scheduled, its active Jobs and the time (planCron).
type cronPlan struct {
	// start is the scheduled time to start a Job for (zero: none).
	start time.Time
	// replace deletes the active Jobs first (concurrencyPolicy Replace).
	replace bool
	// skipped says why a due start time was not started.
	skipped string
	// next is the first start time after now (zero: none).
	next time.Time
}

// planCron decides as Kubernetes' CronJob controller does: the most recent
// start time not yet scheduled that is due (after lastSchedule, or the
// creation time, and no older than startingDeadlineSeconds) starts a Job,
// unless the CronJob is suspended or its concurrencyPolicy forbids it
// while a Job is active; older missed start times are not run.
func planCron(sched cron.Schedule, spec *batchv1.CronJobSpec, created, lastSchedule time.Time, active int, now time.Time) cronPlan {
	earliest := lastSchedule
	if earliest.IsZero() {
		earliest = created
	}
	if d := spec.StartingDeadlineSeconds; d != nil {
		if sd := now.Add(-time.Duration(*d) * time.Second); sd.After(earliest) {
			earliest = sd
		}
	}
	var due time.Time
	t, n := sched.Next(earliest), 0
	for !t.IsZero() && !t.After(now) {
		due, n = t, n+1
		next := sched.Next(t)
		if n == maxMissed {
			// Too many to walk: start again two intervals before now.
			earliest = now.Add(-2 * next.Sub(t))
			next, n = sched.Next(earliest), 0
		}
		t = next
	}
	plan := cronPlan{next: t}
	switch {
	case due.IsZero():
	case spec.Suspend != nil && *spec.Suspend:
		plan.skipped = "suspended"
	case active > 0 && spec.ConcurrencyPolicy == batchv1.ForbidConcurrent:
		plan.skipped = fmt.Sprintf("start time %s skipped: concurrencyPolicy Forbid and %d Job(s) active", due.UTC().Format(time.RFC3339), active)
	default:
		plan.start = due
		plan.replace = active > 0 && spec.ConcurrencyPolicy == batchv1.ReplaceConcurrent
	}
	return plan
}

// parseSchedule reads spec.schedule (five fields, or a descriptor such as
// @hourly or @every 10s) in spec.timeZone, UTC when none is given.
func parseSchedule(spec *batchv1.CronJobSpec) (cron.Schedule, error) {
	s := spec.Schedule
	if strings.Contains(s, "TZ=") {
		return nil, errors.New("spec.schedule: CRON_TZ and TZ are not supported; set spec.timeZone")
	}
	if tz := spec.TimeZone; tz != nil && *tz != "" {
		if _, err := time.LoadLocation(*tz); err != nil {
			return nil, fmt.Errorf("spec.timeZone: %w", err)
		}
		s = "CRON_TZ=" + *tz + " " + s
	}
	sched, err := cron.ParseStandard(s)
	if err != nil {
		return nil, fmt.Errorf("spec.schedule: %q: %w", spec.Schedule, err)
	}
	return sched, nil
}

// cronJobName is the name of the Job of start time t: the CronJob's name
// and t in minutes since the epoch, as Kubernetes names it, or in seconds
// for a start time within a minute (an @every schedule under a minute).
func cronJobName(cj string, t time.Time) string {
	if t.Second() == 0 {
		return fmt.Sprintf("%s-%d", cj, t.Unix()/60)
	}
	return fmt.Sprintf("%s-%d", cj, t.Unix())
}

// cronJob starts the Jobs of a CronJob's schedule (planCron), keeps its
// finished Jobs within successfulJobsHistoryLimit (default 3) and
// failedJobsHistoryLimit (default 1), and runs again at its next start
// time; a change of one of its Jobs runs it at once.
func (r *Reconciler) cronJob(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	k := projections.ObjectKey(obj)
	var spec batchv1.CronJobSpec
	if err := decode(obj, &spec); err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	sched, err := parseSchedule(&spec)
	if err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	tmpl := obj.GetSpec().GetFields()["jobTemplate"].GetStructValue()
	if tmpl.GetFields()["spec"].GetStructValue() == nil {
		return reconcilers.Result{}, reconcilers.Terminal(errors.New("spec.jobTemplate.spec: required"))
	}
	now := r.cfg.Now()
	var prev batchv1.CronJobStatus
	if d := obj.GetStatus().GetDetails(); d != nil {
		raw, _ := d.MarshalJSON()
		_ = jsonUnmarshal(raw, &prev)
	}
	st := batchv1.CronJobStatus{LastScheduleTime: prev.LastScheduleTime, LastSuccessfulTime: prev.LastSuccessfulTime}

	var active, succeeded, failed []*schemas.Object
	names := map[string]bool{}
	for _, j := range r.owned(k, KindJob) {
		if j.GetStatus().GetGoal() == projections.GoalDeleted {
			continue
		}
		names[j.GetMetadata().GetName()] = true
		switch jobStatus(j).finished {
		case ConditionComplete:
			succeeded = append(succeeded, j)
			if ct := jobStatus(j).CompletionTime; ct != nil && (st.LastSuccessfulTime == nil || ct.After(st.LastSuccessfulTime.Time)) {
				st.LastSuccessfulTime = ct
			}
		case ConditionFailed:
			failed = append(failed, j)
		default:
			active = append(active, j)
		}
	}

	var last time.Time
	if st.LastScheduleTime != nil {
		last = st.LastScheduleTime.Time
	}
	plan := planCron(sched, &spec, obj.GetMetadata().GetCreationTime().AsTime(), last, len(active), now)
	if !plan.start.IsZero() {
		if plan.replace {
			for _, j := range active {
				if err := r.cfg.Writer.Delete(ctx, obj, r.actor(k), projections.ObjectKey(j)); err != nil {
					return reconcilers.Result{}, err
				}
			}
			active = nil
		}
		name := cronJobName(k.Name, plan.start)
		if !names[name] {
			j, err := cronJobOf(tmpl, k.Namespace, name, plan.start)
			if err != nil {
				return reconcilers.Result{}, reconcilers.Terminal(err)
			}
			if err := r.cfg.Writer.Apply(ctx, obj, r.actor(k), []*schemas.Object{j}); err != nil {
				return reconcilers.Result{}, fmt.Errorf("create Job %s: %w", name, err)
			}
			active = append(active, j)
		}
		ts := metav1.NewTime(plan.start)
		st.LastScheduleTime = &ts
	}

	// Finished Jobs beyond the history limits go, oldest first.
	var errs []error
	for _, keep := range []struct {
		jobs  []*schemas.Object
		limit int32
	}{{succeeded, int32Or(spec.SuccessfulJobsHistoryLimit, 3)}, {failed, int32Or(spec.FailedJobsHistoryLimit, 1)}} {
		if over := len(keep.jobs) - int(keep.limit); over > 0 {
			slices.SortFunc(keep.jobs, func(a, b *schemas.Object) int {
				return a.GetMetadata().GetCreationTime().AsTime().Compare(b.GetMetadata().GetCreationTime().AsTime())
			})
			for _, j := range keep.jobs[:over] {
				if err := r.cfg.Writer.Delete(ctx, obj, r.actor(k), projections.ObjectKey(j)); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return reconcilers.Result{}, err
	}

	for _, j := range active {
		st.Active = append(st.Active, corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: k.Namespace, Name: j.GetMetadata().GetName()})
	}
	slices.SortFunc(st.Active, func(a, b corev1.ObjectReference) int { return strings.Compare(a.Name, b.Name) })
	res := reconcilers.Result{Details: reconcilers.DetailsOf(st), Phase: PhaseScheduled}
	switch {
	case spec.Suspend != nil && *spec.Suspend:
		res.Phase, res.Message = PhaseSuspended, "suspended: no Job starts"
	case plan.next.IsZero():
		res.Message = fmt.Sprintf("%d active; no start time ahead", len(active))
	default:
		res.Message = fmt.Sprintf("%d active; next start %s", len(active), plan.next.UTC().Format(time.RFC3339))
		res.RequeueAfter = plan.next.Sub(now) + 10*time.Millisecond
	}
	if plan.skipped != "" && plan.skipped != "suspended" {
		res.Message += "; " + plan.skipped
	}
	return res, nil
}

// cronJobOf is the Job of start time t, from spec.jobTemplate.
func cronJobOf(tmpl *structpb.Struct, ns, name string, t time.Time) (*schemas.Object, error) {
	md := tmpl.GetFields()["metadata"].GetStructValue().GetFields()
	ann := stringMap(md["annotations"])
	if ann == nil {
		ann = map[string]string{}
	}
	ann[AnnotationScheduledTimestamp] = t.UTC().Format(time.RFC3339)
	spec, err := structpb.NewStruct(tmpl.GetFields()["spec"].GetStructValue().AsMap())
	if err != nil {
		return nil, fmt.Errorf("spec.jobTemplate.spec: %w", err)
	}
	return &schemas.Object{ApiVersion: "batch/v1", Kind: "Job", Metadata: &schemas.ObjectMeta{
		Name: name, Namespace: ns, Labels: stringMap(md["labels"]), Annotations: ann,
	}, Spec: spec}, nil
}
