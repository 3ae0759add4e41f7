package pod

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	sm "github.com/jetplane/jetplane/reconcilers/statemachine"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

func TestCoalesceKeepsWhatWaitsAndFoldsWhatPassed(t *testing.T) {
	a, b, a2 := &podRunner{uid: "a"}, &podRunner{uid: "b"}, &podRunner{uid: "a2"}
	rep := func(r *podRunner, s sm.State[*Run]) report {
		return report{r: r, w: &podspec.Work{Namespace: "default", Name: r.uid, UID: r.uid}, state: sm.Name(s), passing: passing(s)}
	}
	show := func(q []report) string {
		var out []string
		for _, r := range q {
			s := r.r.uid + ":" + r.state
			if len(r.passed) > 0 {
				s += "[" + strings.Join(r.passed, ",") + "]"
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	tests := []struct {
		name string
		q    []report
		want string
	}{
		{"a start queued whole", []report{rep(a, Registered{}), rep(a, ImagePull{}), rep(a, Starting{}), rep(a, Running{}), rep(a, Completed{})},
			"a:Running[Registered,ImagePull,Starting] a:Completed"},
		{"the last report of a pod is kept, passing or not", []report{rep(a, Registered{}), rep(a, ImagePull{})},
			"a:ImagePull[Registered]"},
		{"pods interleaved", []report{rep(a, Registered{}), rep(b, Registered{}), rep(a, ImagePull{}), rep(b, Starting{}), rep(a, Starting{})},
			"b:Starting[Registered] a:Starting[Registered,ImagePull]"},
		{"states that wait or end are kept", []report{rep(a, CrashLoopBackoff{}), rep(a, Starting{}), rep(a, Error{}), rep(a, CrashLoopBackoff{}), rep(a, Terminated{})},
			"a:CrashLoopBackoff a:Error[Starting] a:CrashLoopBackoff a:Terminated"},
		{"a backoff between pulls is kept", []report{rep(a, ImagePull{}), rep(a, ImagePullBackoff{}), rep(a, ImagePull{}), rep(a, Starting{}), rep(a, Running{})},
			"a:ImagePullBackoff[ImagePull] a:Running[ImagePull,Starting]"},
		{"another incarnation's reports are its own", []report{rep(a, Registered{}), rep(a2, Registered{}), rep(a2, Running{})},
			"a:Registered a2:Running[Registered]"},
		{"nothing queued", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := show(coalesce(tt.q)); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestCoalescedReportRecordsPassedStatesFirst(t *testing.T) {
	r := &podRunner{uid: "u"}
	w := &podspec.Work{Namespace: "default", Name: "p", UID: "u"}
	run := NewRun(&fakeEnv{fakeClock: &fakeClock{}}, w)
	q := coalesce([]report{
		{r: r, w: w, state: "Registered", passing: true, st: Entered(Registered{}, run)},
		{r: r, w: w, state: "Running", st: Entered(Running{}, run)},
	})
	if len(q) != 1 {
		t.Fatalf("%d reports", len(q))
	}
	before := proto.CloneOf(q[0].st)
	st := q[0].withPassed()
	if st.GetDetails() == nil || !proto.Equal(st.GetDetails(), before.GetDetails()) {
		t.Fatalf("details sent %v, want %v", st.GetDetails(), before.GetDetails())
	}
	if !proto.Equal(q[0].st, before) {
		t.Fatalf("the queued status was changed: %v", q[0].st)
	}
	if got := Passed(st); len(got) != 1 || got[0] != "Registered" {
		t.Fatalf("passed %v", got)
	}
	if StateOf(st) != "Running" || st.GetConditions()[0].GetType() != ConditionPassed {
		t.Fatalf("conditions %v", st.GetConditions())
	}
	if len(q[0].st.GetConditions()) != 1 {
		t.Fatal("the queued status was changed")
	}
}

func TestTakeHoldsJustEnteredPassingStates(t *testing.T) {
	now := time.Unix(1000, 0)
	a, b, c := &podRunner{uid: "a"}, &podRunner{uid: "b"}, &podRunner{uid: "c"}
	rep := func(r *podRunner, s sm.State[*Run], age time.Duration) report {
		return report{r: r, state: sm.Name(s), passing: passing(s), at: now.Add(-age)}
	}
	names := func(q []report) string {
		var out []string
		for _, r := range q {
			out = append(out, r.r.uid+":"+r.state)
		}
		return strings.Join(out, " ")
	}
	q := []report{rep(a, Running{}, 0), rep(b, Starting{}, time.Millisecond), rep(c, ImagePull{}, reportLinger), rep(a, Completed{}, 0)}
	batch, rest, wait := take(q, now, 10)
	if names(batch) != "a:Running c:ImagePull a:Completed" || names(rest) != "b:Starting" || wait != reportLinger-time.Millisecond {
		t.Fatalf("batch %s, rest %s, wait %s", names(batch), names(rest), wait)
	}
	batch, rest, _ = take(q, now, 1)
	if names(batch) != "a:Running" || names(rest) != "b:Starting c:ImagePull a:Completed" {
		t.Fatalf("max 1: batch %s, rest %s", names(batch), names(rest))
	}
	if batch, rest, wait := take(nil, now, 10); len(batch)+len(rest) != 0 || wait != 0 {
		t.Fatal("empty queue")
	}
}

// A report sends the status Entered makes of its state, details and
// all, though it builds the details only when it is sent: a report a
// later one stands for never builds them.
func TestReportsBuildDetailsWhenSent(t *testing.T) {
	r := &podRunner{uid: "u"}
	w := &podspec.Work{Namespace: "default", Name: "p", UID: "u", Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "workload:v1"}}}}
	run := NewRun(&fakeEnv{fakeClock: &fakeClock{}}, w)
	run.Started, run.LastStart = time.Unix(1000, 0), time.Unix(1000, 0)
	rp := &reporter{wake: make(chan struct{}, 1)}
	states := []sm.State[*Run]{Registered{}, ImagePull{}, Starting{}, Running{}}
	for _, s := range states {
		rp.add(r, w, s, run)
	}
	run.Exits = map[string]Exit{"main": {}}
	rp.add(r, w, Completed{}, run)
	states = append(states, Completed{})
	for i, rep := range rp.q {
		if rep.st.Details != nil {
			t.Fatalf("%s: details built when queued", rep.state)
		}
		// What Entered would have made of the run as it was then.
		if i < 4 {
			run.Exits = nil
		} else {
			run.Exits = map[string]Exit{"main": {}}
		}
		want := Entered(states[i], run)
		got := proto.CloneOf(rep.st)
		(&report{st: got, details: rep.details}).withPassed()
		if !proto.Equal(got, want) {
			t.Fatalf("%s: sent\n%v\nwant\n%v", rep.state, got, want)
		}
	}
	var queued []*schemas.Status
	for _, rep := range rp.q {
		queued = append(queued, rep.st)
	}
	q := coalesce(rp.q)
	for _, rep := range q {
		if _, err := rep.encode(); err != nil {
			t.Fatal(err)
		}
	}
	built := 0
	for _, st := range queued {
		if st.Details != nil {
			built++
		}
	}
	if len(q) != 2 || built != 2 {
		t.Fatalf("%d reports sent, %d built details; want 2 and 2", len(q), built)
	}
}
