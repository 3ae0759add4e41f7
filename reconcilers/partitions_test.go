package reconcilers_test

import (
	"fmt"
	"testing"

	"github.com/jetplane/jetplane/reconcilers"
)

func TestAssignSpreadsEvenlyAndMovesLittle(t *testing.T) {
	for _, n := range []int{1, 7, 16, 64} {
		for members := 1; members <= 5; members++ {
			var live []string
			for i := range members {
				live = append(live, fmt.Sprintf("instance-%d", i))
			}
			a := reconcilers.Assign(n, live)
			if len(a) != n {
				t.Fatalf("n=%d members=%d: %d partitions assigned", n, members, len(a))
			}
			load := map[string]int{}
			for _, inst := range a {
				load[inst]++
			}
			for _, inst := range live {
				if load[inst] != n/members && load[inst] != n/members+1 {
					t.Fatalf("n=%d members=%d: load %v is uneven", n, members, load)
				}
			}
			// Every instance computes the same answer from the same set,
			// whatever order it lists it in.
			rev := append([]string(nil), live...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			if b := reconcilers.Assign(n, rev); fmt.Sprint(b) != fmt.Sprint(a) {
				t.Fatalf("n=%d members=%d: assignment depends on order", n, members)
			}
		}
	}
	// A fourth instance joining 3 takes about a quarter of 64 partitions
	// and moves few others.
	three := reconcilers.Assign(64, []string{"a", "b", "c"})
	four := reconcilers.Assign(64, []string{"a", "b", "c", "d"})
	moved := 0
	for p, inst := range four {
		if inst != three[p] && inst != "d" {
			moved++
		}
	}
	if moved > 8 {
		t.Fatalf("%d partitions moved between the old instances when one joined", moved)
	}
}
