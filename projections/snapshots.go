package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
)

// Snapshots are kept as a series, one blob per snapshot named by its
// sequence, so that a query as of any point starts from the nearest one
// at or before it and folds only the tail after it. The newest serves a
// restart.
//
// The series is thinned to SnapshotsKept: when one too many is stored,
// the one whose removal leaves the smallest gap is dropped (never the
// newest), so the kept ones stay spread over the whole log. A query at
// sequence s then folds at most the gap around s: about 2·N/kept events on
// a log of N, and at most SnapshotEvery after the newest.

// snapshotPrefix starts every snapshot's blob name; SnapshotName (without
// a sequence) is the single snapshot older versions kept.
const snapshotPrefix = SnapshotName + "."

// snapshotBlob names the snapshot at seq; zero-padded, so names sort by
// sequence.
func snapshotBlob(seq uint64) string { return fmt.Sprintf("%s%020d", snapshotPrefix, seq) }

// listTimeout bounds listing the snapshots. A listing reads the bucket
// with a consumer, which, while the cluster has no leader for the bucket
// (a cluster forming, an election), is never answered: the caller goes on
// without snapshots (a restore replays the log, a save skips thinning)
// rather than waiting for ever.
const listTimeout = 10 * time.Second

// snapshotSeqs lists the stored snapshots' sequences, ascending.
func snapshotSeqs(ctx context.Context, b Blobs) ([]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	names, err := b.List(ctx, snapshotPrefix)
	if err != nil {
		return nil, err
	}
	seqs := make([]uint64, 0, len(names))
	for _, n := range names {
		if s, err := strconv.ParseUint(strings.TrimPrefix(n, snapshotPrefix), 10, 64); err == nil {
			seqs = append(seqs, s)
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// thin picks the snapshot to drop from seqs (ascending, more than kept):
// the one, never the newest, whose removal merges the two smallest
// neighbouring gaps (the log's start counts as sequence 0).
func thin(seqs []uint64) int {
	best, bestGap := -1, uint64(0)
	for i := 0; i < len(seqs)-1; i++ {
		prev := uint64(0)
		if i > 0 {
			prev = seqs[i-1]
		}
		if gap := seqs[i+1] - prev; best < 0 || gap < bestGap {
			best, bestGap = i, gap
		}
	}
	return best
}

// saveSnapshot stores snap in the series and thins it to kept.
func saveSnapshot(ctx context.Context, b Blobs, snap *schemas.Snapshot, kept int) error {
	data, err := proto.Marshal(snap)
	if err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	if err := b.Put(ctx, snapshotBlob(snap.Sequence), data); err != nil {
		return err
	}
	seqs, err := snapshotSeqs(ctx, b)
	if err != nil {
		return err
	}
	for len(seqs) > kept {
		i := thin(seqs)
		if err := b.Delete(ctx, snapshotBlob(seqs[i])); err != nil {
			return err
		}
		seqs = slices.Delete(seqs, i, i+1)
	}
	return nil
}

// loadSnapshotAt returns the newest snapshot at or before seq, or
// events.ErrNotFound. A snapshot that cannot be read
// is passed over for an older one.
func loadSnapshotAt(ctx context.Context, b Blobs, seq uint64) (*schemas.Snapshot, error) {
	seqs, err := snapshotSeqs(ctx, b)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := len(seqs) - 1; i >= 0; i-- {
		if seqs[i] > seq {
			continue
		}
		snap, err := readSnapshot(ctx, b, snapshotBlob(seqs[i]))
		if err == nil {
			return snap, nil
		}
		errs = append(errs, err)
	}
	// The single snapshot of older versions.
	snap, err := readSnapshot(ctx, b, SnapshotName)
	if err == nil && snap.Sequence <= seq {
		return snap, nil
	}
	if err != nil && !errors.Is(err, events.ErrNotFound) {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return nil, fmt.Errorf("snapshot at or before %d: %w", seq, events.ErrNotFound)
}

func readSnapshot(ctx context.Context, b Blobs, name string) (*schemas.Snapshot, error) {
	data, err := b.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	snap := new(schemas.Snapshot)
	if err := proto.Unmarshal(data, snap); err != nil {
		return nil, fmt.Errorf("decode snapshot %s: %w", name, err)
	}
	return snap, nil
}
