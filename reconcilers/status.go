package reconcilers

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Condition types and phases the runtime writes.
const (
	ConditionReady = "Ready"

	PhaseReady      = "Ready"
	PhaseWaiting    = "Waiting"
	PhaseError      = "Error"
	PhaseFailed     = "Failed"
	PhaseFinalizing = "Finalizing"
)

// IsReady reports whether obj's Ready condition is True.
func IsReady(obj *schemas.Object) bool { return readyStatus(obj.GetStatus()) == "True" }

// readyStatus is the status of st's Ready condition ("" if it has none).
func readyStatus(st *schemas.Status) string {
	for _, c := range st.GetConditions() {
		if c.GetType() == ConditionReady {
			return c.GetStatus()
		}
	}
	return ""
}

// blockers returns why obj may not be reconciled yet: the dependencies that
// are missing or not Ready, described. get looks a key up in current state;
// handled tells whether a reconciler here runs a kind. A dependency of a
// kind nothing reconciles here (a ConfigMap) has no Ready condition to
// wait for: it is ready once stored. Empty means every dependency is Ready.
func blockers(obj *schemas.Object, get func(projections.Key) *schemas.Object, handled func(kind string) bool) []string {
	var out []string
	for _, d := range obj.GetMetadata().GetDependsOn() {
		k := projections.KeyOf(d)
		dep := get(k)
		switch {
		case dep == nil:
			out = append(out, k.String()+" does not exist")
		case dep.GetStatus().GetGoal() == projections.GoalDeleted:
			out = append(out, k.String()+" is being deleted")
		case readyStatus(dep.GetStatus()) == "" && !handled(k.Kind):
		case !IsReady(dep):
			out = append(out, k.String()+" is not Ready")
		}
	}
	return out
}

// outcome is what a run decided, before it becomes status.
type outcome struct {
	res      Result
	err      error
	waiting  string // set when the run waited (dependencies, dependents)
	finalize bool   // deletion is complete: write Finalized
}

// nextStatus builds the status to record after a run of obj. It keeps the
// goal and, for conditions whose status did not change, their transition
// time. It is pure: now and next run time come in as arguments.
func nextStatus(obj *schemas.Object, o outcome, nextRun, now time.Time) *schemas.Status {
	prev := obj.GetStatus()
	st := &schemas.Status{
		Goal:               prev.GetGoal(),
		ObservedGeneration: obj.GetMetadata().GetGeneration(),
		Phase:              o.res.Phase,
		Message:            o.res.Message,
		Details:            o.res.Details,
	}
	if !nextRun.IsZero() {
		st.NextRunTime = timestamppb.New(nextRun)
	}
	conds := slices.Clone(o.res.Conditions)
	ready := &schemas.Condition{Type: ConditionReady, Status: "True", Reason: "Reconciled"}
	switch {
	case o.waiting != "":
		ready = &schemas.Condition{Type: ConditionReady, Status: "False", Reason: "Waiting", Message: o.waiting}
		st.Phase, st.Message = PhaseWaiting, o.waiting
		if prev.GetGoal() == projections.GoalDeleted {
			st.Phase = PhaseFinalizing
		}
	case o.err != nil && IsTerminal(o.err):
		ready = &schemas.Condition{Type: ConditionReady, Status: "False", Reason: "TerminalError", Message: o.err.Error()}
		st.Phase, st.Message = PhaseFailed, o.err.Error()
	case o.err != nil:
		ready = &schemas.Condition{Type: ConditionReady, Status: "False", Reason: "Error", Message: o.err.Error()}
		st.Phase, st.Message = PhaseError, o.err.Error()
	case prev.GetGoal() == projections.GoalDeleted:
		ready = &schemas.Condition{Type: ConditionReady, Status: "False", Reason: "Finalizing"}
		if st.Phase == "" {
			st.Phase = PhaseFinalizing
		}
	default:
		if st.Phase == "" {
			st.Phase = PhaseReady
		}
	}
	if !slices.ContainsFunc(conds, func(c *schemas.Condition) bool { return c.GetType() == ConditionReady }) {
		conds = append(conds, ready)
	}
	for _, c := range conds {
		c.LastTransitionTime = timestamppb.New(now)
		for _, p := range prev.GetConditions() {
			if p.GetType() == c.GetType() && p.GetStatus() == c.GetStatus() && p.GetLastTransitionTime() != nil {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	st.Conditions = conds
	return st
}

// sameStatus reports whether writing next over prev would change nothing
// but the next run time. That time moves at every run; writing it would
// add an event per object per resync to the log, for no change. It lives
// in the runtime's queue instead (Runtime.NextRun); a status written for
// another reason still carries it.
func sameStatus(prev, next *schemas.Status) bool {
	if prev == nil {
		return false
	}
	// next is the caller's own, freshly built: borrow prev's time for the
	// comparison (prev belongs to the projection and is not touched).
	own := next.NextRunTime
	next.NextRunTime = prev.NextRunTime
	same := proto.Equal(prev, next)
	next.NextRunTime = own
	return same
}

func describe(blocked []string) string {
	return fmt.Sprintf("waiting for dependencies: %s", strings.Join(blocked, "; "))
}

// DetailsOf turns a value of a Kubernetes status type (a v1.PodStatus, an
// apps/v1 DeploymentStatus) into Status.details, through its JSON
// encoding: the fields as Kubernetes shows them.
func DetailsOf(v any) *structpb.Struct {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		panic(err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(err)
	}
	return s
}
