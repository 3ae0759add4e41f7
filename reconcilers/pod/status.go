package pod

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sm "github.com/jetplane/jetplane/reconcilers/statemachine"
	"github.com/jetplane/jetplane/schemas"
)

// Condition and reason names pod statuses use.
const (
	ConditionReady = "Ready"
	// ReasonUnschedulable is an unbound pod's reason while no scheduler
	// places it.
	ReasonUnschedulable = "Unschedulable-until-scheduled"
	ReasonNodeLost      = "NodeLost"
	// ConditionPassed, on a status an agent reported, names (in its
	// message, comma-separated, earliest first) the states the pod
	// entered and left before the one reported, whose reports were
	// still queued on the node when this one was sent: the pod started
	// faster than its node's reports travel, and one event records them
	// all (decision 0089). Passed reads it back.
	ConditionPassed = "jetplane.dev/PassedStates"
	PhaseFailed     = "Failed"
	PhasePending    = "Pending"
)

// Entered is the status to record on entering state: the one place a
// pod's status is made. Phase is the Kubernetes phase (Pending, Running,
// Succeeded, Failed); the state's name, jetplane's finer state, is the
// reason of the Ready condition (StateOf reads it back); details hold the
// v1.PodStatus fields (phase, reason, message, containerStatuses with
// restart counts and exit codes).
func Entered(state sm.State[*Run], r *Run) *schemas.Status {
	st, ps := enteredStatus(state, r)
	st.Details = details(ps)
	return st
}

// enteredStatus is Entered without Status.details, and the v1 status they are
// made of (a snapshot: nothing in it is shared with r). The agent's
// reports build the details when they are sent, so a state whose report
// a later one stands for (coalesce) never pays for them: three of a
// started pod's five states.
func enteredStatus(state sm.State[*Run], r *Run) (*schemas.Status, *corev1.PodStatus) {
	name := sm.Name(state)
	now := r.Env.Now()
	ps := corev1.PodStatus{Phase: corev1.PodPending}
	if !r.Started.IsZero() {
		t := metav1.NewTime(r.Started)
		ps.StartTime = &t
	}
	var waiting *corev1.ContainerStateWaiting
	var terminated *corev1.ContainerStateTerminated
	ready := false
	msg := ""
	switch s := state.(type) {
	case Registered:
		ps.Reason, msg = "Registered", "accepted by the node"
	case ImagePull:
		ps.Reason, msg = "Pulling", "pulling images"
		waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	case ImagePullBackoff:
		ps.Reason, msg = s.Reason, fmt.Sprintf("%s (retry in %s)", s.Message, s.Delay)
		waiting = &corev1.ContainerStateWaiting{Reason: s.Reason, Message: s.Message}
	case Starting:
		ps.Reason, msg = "ContainerCreating", "starting containers"
		waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	case Running:
		ps.Phase, msg, ready = corev1.PodRunning, "running", true
	case Completed:
		ps.Phase, ps.Reason, msg = corev1.PodSucceeded, "Completed", "every container exited 0"
		if r.policy() == corev1.RestartPolicyAlways {
			ps.Phase = corev1.PodRunning // it restarts
		}
	case Error:
		ps.Phase, ps.Reason, msg = corev1.PodFailed, s.Reason, s.Message
		if !s.Final && r.policy() != corev1.RestartPolicyNever {
			ps.Phase = corev1.PodRunning
		}
	case CrashLoopBackoff:
		ps.Phase, ps.Reason = corev1.PodRunning, "CrashLoopBackOff"
		msg = fmt.Sprintf("back-off %s restarting failed container (restart %d)", s.Delay, r.Restarts+1)
		waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: msg}
	case Terminated:
		ps.Phase, ps.Reason, msg = corev1.PodFailed, "Terminated", "stopped: deletion requested"
		terminated = &corev1.ContainerStateTerminated{Reason: "Terminated", ExitCode: 137, FinishedAt: metav1.NewTime(now)}
	}
	ps.Message = msg
	for _, c := range r.Work.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: r.Digests[c.Name], RestartCount: int32(r.Restarts), Ready: ready}
		ex, exited := r.Exits[c.Name]
		term := func() *corev1.ContainerStateTerminated {
			reason := ex.Reason
			if reason == "" {
				reason = "Completed"
				if ex.Code != 0 {
					reason = "Error"
				}
			}
			return &corev1.ContainerStateTerminated{ExitCode: ex.Code, Reason: reason, Message: ex.Message}
		}
		switch state.(type) {
		case Running:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(r.LastStart)}
			if exited { // the run before this one
				cs.LastTerminationState.Terminated = term()
			}
		case Completed, Error:
			if exited {
				cs.State.Terminated = term()
			} else {
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: ps.Reason, Message: msg}
			}
		default:
			switch {
			case terminated != nil:
				cs.State.Terminated = terminated
			case waiting != nil:
				cs.State.Waiting = waiting
			}
			if exited {
				cs.LastTerminationState.Terminated = term()
			}
		}
		ps.ContainerStatuses = append(ps.ContainerStatuses, cs)
	}
	readyCond := &schemas.Condition{Type: ConditionReady, Status: "False", Reason: name, Message: msg}
	if ready {
		readyCond = &schemas.Condition{Type: ConditionReady, Status: "True", Reason: name}
	}
	return &schemas.Status{
		Phase:              string(ps.Phase),
		Message:            msg,
		Conditions:         []*schemas.Condition{readyCond},
		ObservedGeneration: r.Work.Generation,
	}, &ps
}

// details turns a v1 status, as enteredStatus makes it, into
// Status.details: the value its JSON encoding decodes to (detailsJSON),
// built directly. A start sends two reports, and the JSON round trip was
// 14 µs of each (decision 0103). It writes the fields enteredStatus sets
// (phase, reason, message, startTime, containerStatuses' name, state,
// lastState, ready, restartCount, image, imageID); TestDetailsAsJSON
// checks it against detailsJSON for every state.
func details(ps *corev1.PodStatus) *structpb.Struct {
	f := make(map[string]*structpb.Value, 5)
	putString(f, "phase", string(ps.Phase))
	putString(f, "message", ps.Message)
	putString(f, "reason", ps.Reason)
	if ps.StartTime != nil {
		f["startTime"] = timeValue(*ps.StartTime)
	}
	if len(ps.ContainerStatuses) > 0 {
		list := make([]*structpb.Value, len(ps.ContainerStatuses))
		for i := range ps.ContainerStatuses {
			cs := &ps.ContainerStatuses[i]
			c := make(map[string]*structpb.Value, 7)
			c["name"] = stringValue(cs.Name)
			c["state"] = containerState(&cs.State)
			c["lastState"] = containerState(&cs.LastTerminationState)
			c["ready"] = structpb.NewBoolValue(cs.Ready)
			c["restartCount"] = structpb.NewNumberValue(float64(cs.RestartCount))
			c["image"] = stringValue(cs.Image)
			c["imageID"] = stringValue(cs.ImageID)
			list[i] = structpb.NewStructValue(&structpb.Struct{Fields: c})
		}
		f["containerStatuses"] = structpb.NewListValue(&structpb.ListValue{Values: list})
	}
	return &structpb.Struct{Fields: f}
}

// containerState is a v1 container state as its JSON decodes: an object
// always (the field is a struct), with the states that are set.
func containerState(s *corev1.ContainerState) *structpb.Value {
	f := make(map[string]*structpb.Value, 1)
	if w := s.Waiting; w != nil {
		m := make(map[string]*structpb.Value, 2)
		putString(m, "reason", w.Reason)
		putString(m, "message", w.Message)
		f["waiting"] = structpb.NewStructValue(&structpb.Struct{Fields: m})
	}
	if r := s.Running; r != nil {
		f["running"] = structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{"startedAt": timeValue(r.StartedAt)}})
	}
	if t := s.Terminated; t != nil {
		m := make(map[string]*structpb.Value, 7)
		m["exitCode"] = structpb.NewNumberValue(float64(t.ExitCode))
		if t.Signal != 0 {
			m["signal"] = structpb.NewNumberValue(float64(t.Signal))
		}
		putString(m, "reason", t.Reason)
		putString(m, "message", t.Message)
		m["startedAt"] = timeValue(t.StartedAt)
		m["finishedAt"] = timeValue(t.FinishedAt)
		putString(m, "containerID", t.ContainerID)
		f["terminated"] = structpb.NewStructValue(&structpb.Struct{Fields: m})
	}
	return structpb.NewStructValue(&structpb.Struct{Fields: f})
}

// putString sets a string field JSON omits when empty (omitempty).
func putString(f map[string]*structpb.Value, name, s string) {
	if s != "" {
		f[name] = stringValue(s)
	}
}

// stringValue is s as JSON carries it: each byte that is not part of
// valid UTF-8 (a guest's exit message may hold any) becomes U+FFFD.
func stringValue(s string) *structpb.Value {
	if !utf8.ValidString(s) {
		var b strings.Builder
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b.WriteRune(utf8.RuneError)
			} else {
				b.WriteString(s[i : i+n])
			}
			i += n
		}
		s = b.String()
	}
	return structpb.NewStringValue(s)
}

// timeValue is a v1 time as JSON carries it: RFC 3339 in UTC to the
// second, null when zero.
func timeValue(t metav1.Time) *structpb.Value {
	if t.IsZero() {
		return structpb.NewNullValue()
	}
	return structpb.NewStringValue(t.UTC().Format(time.RFC3339))
}

// PodStatus reads a pod's Status.details back as a v1.PodStatus.
func PodStatus(st *schemas.Status) (*corev1.PodStatus, error) {
	ps := new(corev1.PodStatus)
	if st.GetDetails() == nil {
		return ps, nil
	}
	raw, err := st.Details.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return ps, json.Unmarshal(raw, ps)
}

// stamp sets each condition's transition time: now, or prev's when the
// condition's status did not change.
func stamp(st, prev *schemas.Status, now time.Time) {
	for _, c := range st.GetConditions() {
		c.LastTransitionTime = timestamppb.New(now)
		for _, p := range prev.GetConditions() {
			if p.GetType() == c.GetType() && p.GetStatus() == c.GetStatus() && p.GetLastTransitionTime() != nil {
				c.LastTransitionTime = p.LastTransitionTime
			}
		}
	}
}

// StateOf is jetplane's finer state of a pod (Registered, ImagePull,
// Running, CrashLoopBackoff, Terminated, ...), as its agent last reported
// it: the reason of its Ready condition. A status no agent wrote (Pending
// before a report, Unknown while its node is lost) has the reason its
// writer gave.
func StateOf(st *schemas.Status) string {
	for _, c := range st.GetConditions() {
		if c.GetType() == ConditionReady {
			return c.GetReason()
		}
	}
	return st.GetPhase()
}

// Passed is the states a status says the pod entered and left before
// the one it reports (ConditionPassed), earliest first.
func Passed(st *schemas.Status) []string {
	for _, c := range st.GetConditions() {
		if c.GetType() == ConditionPassed && c.GetMessage() != "" {
			return strings.Split(c.GetMessage(), ", ")
		}
	}
	return nil
}

// finished reports whether a pod's status says it ended for good: the v1
// phase an agent reported is Succeeded or Failed.
func finished(st *schemas.Status) bool {
	if StateOf(st) == "Terminated" {
		return false
	}
	switch st.GetDetails().GetFields()["phase"].GetStringValue() {
	case string(corev1.PodSucceeded), string(corev1.PodFailed):
		return true
	}
	return false
}
