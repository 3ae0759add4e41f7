package projections

import (
	"slices"
	"testing"
)

// Thinning keeps the snapshots spread over the whole log: after a long
// series, no gap (the log's start counting as 0) is much wider than an
// even spread, and the newest is always kept.
func TestThinKeepsSnapshotsSpread(t *testing.T) {
	for _, tt := range []struct {
		name       string
		every, n   uint64
		kept       int
		wantMaxGap uint64
	}{
		{"32 kept of 1000", 100, 100_000, 32, 2 * 100_000 / 32},
		{"8 kept of 500", 50, 25_000, 8, 2 * 25_000 / 8},
		{"fewer than kept", 100, 1_000, 32, 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var seqs []uint64
			for s := tt.every; s <= tt.n; s += tt.every {
				seqs = append(seqs, s)
				for len(seqs) > tt.kept {
					i := thin(seqs)
					if i == len(seqs)-1 {
						t.Fatal("thinning dropped the newest snapshot")
					}
					seqs = slices.Delete(seqs, i, i+1)
				}
			}
			if seqs[len(seqs)-1] != tt.n {
				t.Fatalf("newest kept is %d, want %d", seqs[len(seqs)-1], tt.n)
			}
			prev, maxGap := uint64(0), uint64(0)
			for _, s := range seqs {
				maxGap = max(maxGap, s-prev)
				prev = s
			}
			if maxGap > tt.wantMaxGap {
				t.Fatalf("widest gap between kept snapshots %d, want at most %d (kept %v)", maxGap, tt.wantMaxGap, seqs)
			}
		})
	}
}
