package scheduler

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

// top keeps the TopScores best scores, higher tie-break hashes first among
// equal scores and the earlier node among equal hashes: the order a stable
// sort gives, over scores with many equal values and equal hashes.
func TestTopIsTheSortedHead(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		n := rng.IntN(40)
		scores := make([]NodeScore, n)
		ties := make([]uint64, n)
		for i := range scores {
			scores[i] = NodeScore{Name: fmt.Sprintf("n%d", i), Score: int64(rng.IntN(4))}
			ties[i] = uint64(rng.IntN(6))
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool {
			x, y := idx[a], idx[b]
			return scores[x].Score > scores[y].Score || (scores[x].Score == scores[y].Score && ties[x] > ties[y])
		})
		want := []NodeScore{}
		for _, i := range idx[:min(n, TopScores)] {
			want = append(want, scores[i])
		}
		if got := top(scores, ties); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: top(%v, %v) = %v, want %v", round, scores, ties, got, want)
		}
	}
}
