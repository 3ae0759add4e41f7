package projections_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
)

// countingLog counts the events a fold reads from the log.
type countingLog struct {
	*events.Log
	read atomic.Int64
}

func (c *countingLog) Read(ctx context.Context, opts events.ReadOptions, fn events.Handler) error {
	return c.Log.Read(ctx, opts, func(m events.Message) error { c.read.Add(1); return fn(m) })
}

func (c *countingLog) Scan(ctx context.Context, opts events.ScanOptions, fn func([]events.Message, any) error) error {
	return c.Log.Scan(ctx, opts, func(ms []events.Message, p any) error { c.read.Add(int64(len(ms))); return fn(ms, p) })
}

// The projector keeps a series of snapshots spread over the log, and a
// query as of any sequence starts from the nearest snapshot at or before it:
// it reads only the tail after that snapshot, and reaches the same state as
// a replay from sequence 1.
func TestStateAtFoldsOnlyTheTailAfterTheNearestSnapshot(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	blobs, err := l.Blobs(ctx, events.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	live := projections.NewStore(projections.StoreOptions{})
	startProjector(t, projections.ProjectorConfig{Log: l, Store: live, Blobs: blobs, SnapshotEvery: 200, SnapshotsKept: 5})

	r := rand.New(rand.NewPCG(7, 7))
	var last uint64
	for b := range 20 {
		evs := randomEvents(r, 200)
		for i, ev := range evs {
			ev.Id = fmt.Sprintf("b%d-%d", b, i) // unique, or the log dedupes them
		}
		last = appendAll(t, l, evs)
		waitFor(t, live, last)
	}
	// Snapshots are taken from the live fold, after it applied the event;
	// the last one (at last: 200 events after the one before) may still be
	// on its way. Their sequences are in their names.
	var seqs []uint64
	deadline := time.Now().Add(30 * time.Second)
	// A snapshot is stored before the series is thinned: wait for both.
	for len(seqs) == 0 || seqs[len(seqs)-1] != last || len(seqs) > 5 {
		if time.Now().After(deadline) {
			t.Fatalf("snapshots %v; want the newest at %d and at most 5", seqs, last)
		}
		time.Sleep(10 * time.Millisecond)
		names, err := blobs.List(ctx, projections.SnapshotName+".")
		if err != nil {
			t.Fatal(err)
		}
		seqs = seqs[:0]
		for _, n := range names {
			s, err := strconv.ParseUint(strings.TrimPrefix(n, projections.SnapshotName+"."), 10, 64)
			if err != nil {
				t.Fatalf("snapshot blob %q: %v", n, err)
			}
			seqs = append(seqs, s)
		}
		slices.Sort(seqs)
	}
	if len(seqs) < 2 || len(seqs) > 5 {
		t.Fatalf("snapshots kept at %v; want 2 to 5", seqs)
	}
	nearest := func(at uint64) uint64 {
		best := uint64(0)
		for _, s := range seqs {
			if s <= at && s > best {
				best = s
			}
		}
		return best
	}

	counted := &countingLog{Log: l}
	for _, at := range []uint64{1, seqs[0], seqs[0] + 1, (seqs[0] + seqs[1]) / 2, seqs[len(seqs)-1] - 1, last} {
		counted.read.Store(0)
		viaSnap, err := projections.StateAt(ctx, counted, blobs, at)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := uint64(counted.read.Load()), at-nearest(at); got != want {
			t.Fatalf("state at %d read %d events; want %d (the tail after the snapshot at %d, of %v)", at, got, want, nearest(at), seqs)
		}
		plain, err := projections.StateAt(ctx, l, nil, at)
		if err != nil {
			t.Fatal(err)
		}
		requireSameState(t, "as-of via the nearest snapshot", plain, viaSnap)
	}

	// A restart starts from the newest snapshot.
	restarted := projections.NewStore(projections.StoreOptions{})
	startProjector(t, projections.ProjectorConfig{Log: counted, Store: restarted, Blobs: blobs})
	waitFor(t, restarted, last)
	requireSameState(t, "restart from the newest snapshot", live, restarted)
}
