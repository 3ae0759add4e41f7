package builtin

import (
	"slices"
	"strings"
)

// Suggest returns the names in cands a person probably meant by word: the
// same name in another case, or the closest within a small edit distance
// (a swap of neighbours counts as one edit), at most three, closest first.
func Suggest(word string, cands []string) []string {
	type cand struct {
		name string
		d    int
	}
	var cs []cand
	lw := strings.ToLower(word)
	for _, c := range cands {
		lc := strings.ToLower(c)
		if lc == lw {
			return []string{c}
		}
		d := distance(lw, lc)
		if d <= max(1, min(3, len(c)/3)) {
			cs = append(cs, cand{c, d})
		}
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for i, c := range cs {
		if i == 3 {
			break
		}
		out = append(out, c.name)
	}
	return out
}

// distance is the optimal-string-alignment Damerau–Levenshtein distance.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
