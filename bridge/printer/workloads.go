package printer

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// kindTable is kubectl's own table for a list all of one kind it prints
// its own way: pods (NAME READY STATUS RESTARTS AGE, NODE when wide) and
// workloads (READY UP-TO-DATE AVAILABLE AGE and their kin). Other lists,
// and lists of several kinds, keep the object table.
func kindTable(items []Item, o Options) (*Table, bool) {
	if len(items) == 0 {
		return nil, false
	}
	kind := projections.ObjectKey(items[0].Object).Kind
	for _, it := range items[1:] {
		if projections.ObjectKey(it.Object).Kind != kind {
			return nil, false
		}
	}
	if o.Columns != nil && len(o.Columns(kind)) > 0 {
		return nil, false // printer columns given for the kind win
	}
	wide := o.Format == "wide"
	cols, row := kindColumnsOf(kind, wide)
	if cols == nil {
		return nil, false
	}
	if wide {
		// jetplane's own columns, as the object table has them.
		cols = append(cols, "GOAL", "PHASE", "RECONCILER", "MESSAGE")
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	t := &Table{Columns: append([]string{"NAMESPACE", "NAME"}, cols...)}
	if o.ShowLabels {
		t.Columns = append(t.Columns, "LABELS")
	}
	for _, it := range items {
		m := it.Object.GetMetadata()
		r := append([]string{Dash(m.GetNamespace()), m.GetName()}, row(it.Object, now)...)
		if wide {
			st := it.Object.GetStatus()
			rec := "?"
			if o.Reconciler != nil {
				if rec = o.Reconciler(kind); rec == "" {
					rec = "none (stored only)"
				}
			}
			r = append(r, Dash(st.GetGoal()), Dash(st.GetPhase()), rec, Dash(st.GetMessage()))
		}
		if o.ShowLabels {
			r = append(r, Labels(m.GetLabels()))
		}
		t.Rows = append(t.Rows, r)
	}
	return t, true
}

type rowFunc func(obj *schemas.Object, now time.Time) []string

func kindColumnsOf(kind string, wide bool) ([]string, rowFunc) {
	age := func(obj *schemas.Object, now time.Time) string {
		return Age(now, obj.GetMetadata().GetCreationTime().AsTime())
	}
	switch kind {
	case "Pod":
		cols := []string{"READY", "STATUS", "RESTARTS", "AGE"}
		if wide {
			cols = append(cols, "NODE")
		}
		return cols, func(obj *schemas.Object, now time.Time) []string {
			ready, total, restarts := podContainers(obj)
			r := []string{fmt.Sprintf("%d/%d", ready, total), PodStatus(obj), fmt.Sprint(restarts), age(obj, now)}
			if wide {
				r = append(r, orNone(field(obj.GetSpec(), "nodeName").GetStringValue()))
			}
			return r
		}
	case "Deployment.apps":
		cols := []string{"READY", "UP-TO-DATE", "AVAILABLE", "AGE"}
		if wide {
			cols = append(cols, "CONTAINERS", "IMAGES", "SELECTOR")
		}
		return cols, func(obj *schemas.Object, now time.Time) []string {
			d := obj.GetStatus().GetDetails()
			r := []string{fmt.Sprintf("%d/%d", num(d, "readyReplicas"), replicas(obj)), fmt.Sprint(num(d, "updatedReplicas")), fmt.Sprint(num(d, "availableReplicas")), age(obj, now)}
			if wide {
				r = append(r, containersOf(obj)...)
			}
			return r
		}
	case "ReplicaSet.apps":
		return []string{"DESIRED", "CURRENT", "READY", "AGE"}, func(obj *schemas.Object, now time.Time) []string {
			d := obj.GetStatus().GetDetails()
			return []string{fmt.Sprint(replicas(obj)), fmt.Sprint(num(d, "replicas")), fmt.Sprint(num(d, "readyReplicas")), age(obj, now)}
		}
	case "DaemonSet.apps":
		return []string{"DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"}, func(obj *schemas.Object, now time.Time) []string {
			d := obj.GetStatus().GetDetails()
			sel := field(field(field(obj.GetSpec(), "template").GetStructValue(), "spec").GetStructValue(), "nodeSelector").GetStructValue()
			return []string{fmt.Sprint(num(d, "desiredNumberScheduled")), fmt.Sprint(num(d, "currentNumberScheduled")), fmt.Sprint(num(d, "numberReady")),
				fmt.Sprint(num(d, "updatedNumberScheduled")), fmt.Sprint(num(d, "numberAvailable")), orNone(pairs(sel)), age(obj, now)}
		}
	case "Job.batch":
		return []string{"STATUS", "COMPLETIONS", "DURATION", "AGE"}, func(obj *schemas.Object, now time.Time) []string {
			d := obj.GetStatus().GetDetails()
			completions := 1
			if v, ok := obj.GetSpec().GetFields()["completions"]; ok {
				completions = int(v.GetNumberValue())
			}
			dur := "-"
			if start, err := time.Parse(time.RFC3339, field(d, "startTime").GetStringValue()); err == nil {
				end := now
				if done, err := time.Parse(time.RFC3339, field(d, "completionTime").GetStringValue()); err == nil {
					end = done
				}
				dur = Age(end, start)
			}
			return []string{Dash(obj.GetStatus().GetPhase()), fmt.Sprintf("%d/%d", num(d, "succeeded"), completions), dur, age(obj, now)}
		}
	case "CronJob.batch":
		return []string{"SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"}, func(obj *schemas.Object, now time.Time) []string {
			d, spec := obj.GetStatus().GetDetails(), obj.GetSpec()
			last := "<none>"
			if t, err := time.Parse(time.RFC3339, field(d, "lastScheduleTime").GetStringValue()); err == nil {
				last = Age(now, t)
			}
			tz := field(spec, "timeZone").GetStringValue()
			if tz == "" {
				tz = "<none>"
			}
			return []string{field(spec, "schedule").GetStringValue(), tz, fmt.Sprint(field(spec, "suspend").GetBoolValue()),
				fmt.Sprint(len(field(d, "active").GetListValue().GetValues())), last, age(obj, now)}
		}
	}
	return nil, nil
}

func field(s *structpb.Struct, name string) *structpb.Value { return s.GetFields()[name] }

func num(s *structpb.Struct, name string) int { return int(field(s, name).GetNumberValue()) }

func replicas(obj *schemas.Object) int {
	if v, ok := obj.GetSpec().GetFields()["replicas"]; ok {
		return int(v.GetNumberValue())
	}
	return 1
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func pairs(s *structpb.Struct) string {
	var out []string
	for k, v := range s.GetFields() {
		out = append(out, k+"="+v.GetStringValue())
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// containersOf is a workload's CONTAINERS, IMAGES and SELECTOR cells.
func containersOf(obj *schemas.Object) []string {
	t := field(obj.GetSpec(), "template").GetStructValue()
	var names, images []string
	for _, c := range field(field(t, "spec").GetStructValue(), "containers").GetListValue().GetValues() {
		names = append(names, field(c.GetStructValue(), "name").GetStringValue())
		images = append(images, field(c.GetStructValue(), "image").GetStringValue())
	}
	sel := field(field(obj.GetSpec(), "selector").GetStructValue(), "matchLabels").GetStructValue()
	return []string{strings.Join(names, ","), strings.Join(images, ","), orNone(pairs(sel))}
}

// podContainers counts a pod's ready containers, its containers and their
// restarts. No container is ready while the pod is not (Pending, Unknown).
func podContainers(obj *schemas.Object) (ready, total, restarts int) {
	total = len(field(obj.GetSpec(), "containers").GetListValue().GetValues())
	podReady := Ready(obj.GetStatus()) == "True"
	for _, cs := range field(obj.GetStatus().GetDetails(), "containerStatuses").GetListValue().GetValues() {
		s := cs.GetStructValue()
		if podReady && field(s, "ready").GetBoolValue() {
			ready++
		}
		restarts += num(s, "restartCount")
	}
	return ready, total, restarts
}

// PodStatus is kubectl's STATUS of a pod: Terminating while it is deleted,
// Unknown while its node is lost, else the pod's reason, else the first
// container's waiting or terminated reason, else its phase.
func PodStatus(obj *schemas.Object) string {
	st := obj.GetStatus()
	d := st.GetDetails()
	reason := field(d, "reason").GetStringValue()
	switch {
	case st.GetGoal() == projections.GoalDeleted:
		return "Terminating"
	case reason == "NodeLost" || st.GetPhase() == "Unknown":
		return "Unknown"
	}
	if reason != "" && reason != "Registered" {
		return reason
	}
	for _, cs := range field(d, "containerStatuses").GetListValue().GetValues() {
		state := field(cs.GetStructValue(), "state").GetStructValue()
		if w := field(state, "waiting").GetStructValue(); w != nil && field(w, "reason").GetStringValue() != "" {
			return field(w, "reason").GetStringValue()
		}
		if t := field(state, "terminated").GetStructValue(); t != nil {
			if r := field(t, "reason").GetStringValue(); r != "" {
				return r
			}
			return fmt.Sprintf("ExitCode:%d", num(t, "exitCode"))
		}
	}
	if ph := field(d, "phase").GetStringValue(); ph != "" {
		return ph
	}
	if st.GetPhase() != "" {
		return st.GetPhase()
	}
	return "Pending"
}
