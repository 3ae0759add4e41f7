package pod

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/reconcilers"
	sm "github.com/jetplane/jetplane/reconcilers/statemachine"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// TestDetailsAsJSON checks the details built directly against the v1
// status's JSON for every state a pod enters, with and without exits
// (plain, failed, with a guest's message that is not valid UTF-8),
// restarts, digests, start times, one and several containers, under
// each restart policy; and that PodStatus reads them back as the status
// they were made of.
func TestDetailsAsJSON(t *testing.T) {
	states := []sm.State[*Run]{
		Registered{}, ImagePull{},
		ImagePullBackoff{Reason: "ErrImagePull", Message: "no such module \xff\xfe here", Delay: 10 * time.Second},
		Starting{}, Running{Since: time.Unix(2000, 0)}, Completed{},
		Error{Reason: "Error", Message: "exit 3", ExitCode: 3},
		Error{Reason: "DeadlineExceeded", Message: "past the deadline", Final: true},
		CrashLoopBackoff{Delay: 20 * time.Second}, Terminated{},
	}
	containers := [][]corev1.Container{
		{{Name: "main", Image: "workload:v1"}},
		{{Name: "a", Image: "a:v1"}, {Name: "b", Image: "b@sha256:00"}, {Name: "c\u2028<&>", Image: ""}},
	}
	exits := []map[string]Exit{
		nil,
		{"main": {}, "a": {}},
		{"main": {Code: 2, Message: "bad \xc3\x28 exit"}, "b": {Code: 137, Reason: "OOMKilled", Message: "memory"}, "c\u2028<&>": {Reason: "Trap", Message: "unreachable"}},
	}
	policies := []corev1.RestartPolicy{"", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}
	n := 0
	for _, cs := range containers {
		for _, ex := range exits {
			for _, pol := range policies {
				for _, started := range []time.Time{{}, time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))} {
					for _, s := range states {
						w := &podspec.Work{Namespace: "default", Name: "p", UID: "u", Spec: corev1.PodSpec{Containers: cs, RestartPolicy: pol}}
						run := NewRun(&fakeEnv{fakeClock: &fakeClock{now: time.Unix(3000, 5)}}, w)
						run.Started, run.LastStart, run.Exits, run.Restarts = started, started, ex, n%4
						run.Digests = map[string]string{"main": "sha256:aa", "b": "sha256:bb"}
						_, ps := enteredStatus(s, run)
						got, want := details(ps), reconcilers.DetailsOf(ps)
						if !proto.Equal(got, want) {
							t.Fatalf("%s, %d containers, exits %v, policy %q:\ngot  %v\nwant %v", sm.Name(s), len(cs), ex, pol, got, want)
						}
						back, err := PodStatus(Entered(s, run))
						if err != nil {
							t.Fatal(err)
						}
						if !proto.Equal(reconcilers.DetailsOf(back), want) {
							t.Fatalf("%s: read back as %+v", sm.Name(s), back)
						}
						n++
					}
				}
			}
		}
	}
}

// BenchmarkDetails: a Running pod's details built directly and through
// JSON, as a report sends them.
func BenchmarkDetails(b *testing.B) {
	w := &podspec.Work{Namespace: "default", Name: "p", UID: "u", Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "workload:v1"}}}}
	run := NewRun(&fakeEnv{fakeClock: &fakeClock{now: time.Unix(3000, 0)}}, w)
	run.LastStart = run.Started
	_, ps := enteredStatus(Running{}, run)
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			details(ps)
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reconcilers.DetailsOf(ps)
		}
	})
}
