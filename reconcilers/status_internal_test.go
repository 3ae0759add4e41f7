package reconcilers

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// A run's status counts as changed when anything but the next run time
// differs, details included.
func TestSameStatusIgnoresOnlyTheNextRunTime(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	obj := &schemas.Object{Metadata: &schemas.ObjectMeta{Generation: 1}}
	details := func(phase string) *structpb.Struct {
		s, err := structpb.NewStruct(map[string]any{"phase": phase, "restartCount": 0})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	obj.Status = nextStatus(obj, outcome{res: Result{Details: details("Running")}}, t0.Add(time.Minute), t0)
	if obj.Status.GetDetails().GetFields()["phase"].GetStringValue() != "Running" {
		t.Fatalf("details not recorded: %v", obj.Status)
	}
	for _, tc := range []struct {
		name string
		res  Result
		next time.Time
		want bool
	}{
		{"only the next run moved", Result{Details: details("Running")}, t0.Add(time.Hour), true},
		{"details changed", Result{Details: details("Succeeded")}, t0.Add(time.Minute), false},
		{"details dropped", Result{}, t0.Add(time.Minute), false},
		{"message changed", Result{Details: details("Running"), Message: "new"}, t0.Add(time.Minute), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := nextStatus(obj, outcome{res: tc.res}, tc.next, t0.Add(time.Second))
			own := next.NextRunTime
			if got := sameStatus(obj.Status, next); got != tc.want {
				t.Fatalf("sameStatus = %v, want %v", got, tc.want)
			}
			if next.NextRunTime != own {
				t.Fatal("sameStatus changed its argument")
			}
		})
	}
}

// A dependency of a kind nothing reconciles here is ready once stored; one
// of a reconciled kind waits for its Ready condition.
func TestBlockersWaitOnlyForReconciledKinds(t *testing.T) {
	cm := &schemas.Object{Kind: "ConfigMap", Metadata: &schemas.ObjectMeta{Name: "c", Namespace: "n"}}
	rel := &schemas.Object{Kind: "HelmRelease", Metadata: &schemas.ObjectMeta{Name: "r", Namespace: "n"}}
	state := map[string]*schemas.Object{"ConfigMap": cm, "HelmRelease": rel}
	get := func(k projections.Key) *schemas.Object { return state[k.Kind] }
	handled := func(kind string) bool { return kind == "HelmRelease" }
	obj := &schemas.Object{Metadata: &schemas.ObjectMeta{DependsOn: []*schemas.ObjectKey{{Kind: "ConfigMap", Namespace: "n", Name: "c"}}}}
	if b := blockers(obj, get, handled); len(b) != 0 {
		t.Errorf("a stored ConfigMap blocks: %v", b)
	}
	obj.Metadata.DependsOn = append(obj.Metadata.DependsOn, &schemas.ObjectKey{Kind: "HelmRelease", Namespace: "n", Name: "r"})
	if b := blockers(obj, get, handled); len(b) != 1 {
		t.Errorf("an unreconciled HelmRelease does not block: %v", b)
	}
}
