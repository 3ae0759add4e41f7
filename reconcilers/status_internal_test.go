package reconcilers

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

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
