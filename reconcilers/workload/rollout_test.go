package workload

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestFenceposts(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	n := func(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }
	for _, tc := range []struct {
		name                  string
		surge, unavail        *intstr.IntOrString
		desired               int32
		wantSurge, wantUnavil int32
	}{
		{name: "defaults of 4", desired: 4, wantSurge: 1, wantUnavil: 1},
		{name: "defaults of 10: surge rounds up, unavailable down", desired: 10, wantSurge: 3, wantUnavil: 2},
		{name: "both zero moves one at a time", surge: n(0), unavail: n(0), desired: 3, wantSurge: 0, wantUnavil: 1},
		{name: "percent of 1", surge: pct("50%"), unavail: pct("50%"), desired: 1, wantSurge: 1, wantUnavil: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, u, err := Fenceposts(tc.surge, tc.unavail, tc.desired)
			if err != nil || s != tc.wantSurge || u != tc.wantUnavil {
				t.Fatalf("Fenceposts = %d, %d, %v; want %d, %d", s, u, err, tc.wantSurge, tc.wantUnavil)
			}
		})
	}
}

// TestRollingUpdateSteps walks a rollout of 4 replicas (surge 1,
// unavailable 1) step by step, with every pod available as soon as it
// exists, and checks each step stays within the bounds.
func TestRollingUpdateSteps(t *testing.T) {
	const desired, surge, unavail = 4, 1, 1
	newRS := &rsView{}
	oldRS := &rsView{replicas: 4}
	oldRS.status.AvailableReplicas = 4
	for step := 0; step < 10; step++ {
		newRS.before, oldRS.before = newRS.replicas, oldRS.replicas
		rollingUpdate(desired, surge, unavail, newRS, []*rsView{oldRS})
		if total := newRS.replicas + oldRS.replicas; total > desired+surge {
			t.Fatalf("step %d: %d pods, more than desired+surge", step, total)
		}
		// Pods come and go; the available ones are those that remain.
		avail := min(newRS.before, newRS.replicas) + min(oldRS.before, oldRS.replicas)
		if avail < desired-unavail {
			t.Fatalf("step %d: %d available, fewer than desired-unavailable", step, avail)
		}
		newRS.status.AvailableReplicas, oldRS.status.AvailableReplicas = newRS.replicas, oldRS.replicas
		if newRS.replicas == desired && oldRS.replicas == 0 {
			return
		}
	}
	t.Fatalf("no progress: new %d, old %d", newRS.replicas, oldRS.replicas)
}
