package projections_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// randomEvents produces n events over a few keys: applies with changing
// labels, groups and dependsOn, status writes, delete requests, finalizers,
// and events for keys that do not exist.
func randomEvents(r *rand.Rand, n int) []*schemas.Event {
	out := make([]*schemas.Event, 0, n)
	for i := range n {
		k := &schemas.ObjectKey{Kind: []string{"ConfigMap", "Deployment.apps"}[r.IntN(2)], Namespace: []string{"", "a", "b"}[r.IntN(3)], Name: fmt.Sprintf("o%d", r.IntN(30))}
		ev := &schemas.Event{Id: fmt.Sprintf("ev-%d", i), Key: k, Actor: "user/test", Time: timestamppb.New(time.Unix(int64(1e9+i), 0))}
		switch x := r.IntN(10); {
		case x < 5:
			ev.Type = schemas.EventType_EVENT_TYPE_APPLIED
			spec, _ := structpb.NewStruct(map[string]any{"n": float64(r.IntN(5))})
			ev.Object = &schemas.Object{ApiVersion: "v1", Kind: "ConfigMap", Spec: spec, Metadata: &schemas.ObjectMeta{
				Labels:     map[string]string{"app": fmt.Sprint("app", r.IntN(3)), "tier": fmt.Sprint(r.IntN(2))},
				Group:      fmt.Sprint("g", r.IntN(2)),
				Generation: int64(r.IntN(4) + 1),
			}}
			if r.IntN(2) == 0 {
				ev.Object.Metadata.DependsOn = []*schemas.ObjectKey{{Kind: "ConfigMap", Name: fmt.Sprintf("o%d", r.IntN(30))}}
			}
		case x < 7:
			ev.Type = schemas.EventType_EVENT_TYPE_STATUS_CHANGED
			ev.Object = &schemas.Object{Status: &schemas.Status{Phase: fmt.Sprint("p", r.IntN(3)), ObservedGeneration: int64(r.IntN(4))}}
		case x < 8:
			ev.Type = schemas.EventType_EVENT_TYPE_DELETE_REQUESTED
		case x < 9:
			ev.Type = schemas.EventType_EVENT_TYPE_FINALIZED
		default:
			ev.Type = schemas.EventType_EVENT_TYPE_APPLIED // no object: ignored
		}
		out = append(out, ev)
	}
	return out
}

func appendAll(t *testing.T, l *events.Log, evs []*schemas.Event) uint64 {
	t.Helper()
	entries := make([]events.Entry, len(evs))
	for i, ev := range evs {
		entries[i] = events.Entry{Event: ev, Expect: events.AnyVersion}
	}
	res, errs := l.AppendAsync(context.Background(), entries)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return res[len(res)-1].Sequence
}

func startProjector(t *testing.T, cfg projections.ProjectorConfig) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p, err := projections.NewProjector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Start(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func waitFor(t *testing.T, s *projections.Store, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, seq); err != nil {
		t.Fatalf("store stuck at %d, want %d: %v", s.Seq(), seq, err)
	}
}

func requireSameState(t *testing.T, what string, want, got *projections.Store) {
	t.Helper()
	a, b := want.Snapshot(), got.Snapshot()
	if !proto.Equal(a, b) {
		t.Fatalf("%s: state differs from the live fold: live %d objects at %d, got %d objects at %d", what, len(a.Entries), a.Sequence, len(b.Entries), b.Sequence)
	}
}

// Replaying the log from sequence 1, and restoring a snapshot then folding
// the tail, both reach exactly the state the live fold reached.
func TestReplayEqualsLive(t *testing.T) {
	for seed := range uint64(5) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 99))
			l := testenv.Log(t, events.Config{})
			ctx := context.Background()
			blobs, err := l.Blobs(ctx, events.SnapshotBucket)
			if err != nil {
				t.Fatal(err)
			}
			live := projections.NewStore(projections.StoreOptions{})
			startProjector(t, projections.ProjectorConfig{Log: l, Store: live})

			evs := randomEvents(r, 3000)
			mid := appendAll(t, l, evs[:1500])
			last := appendAll(t, l, evs[1500:])
			waitFor(t, live, last)
			if live.Len() == 0 {
				t.Fatal("live state is empty; the event mix is wrong")
			}

			replayed, err := projections.StateAt(ctx, l, nil, last)
			if err != nil {
				t.Fatal(err)
			}
			requireSameState(t, "replay from 1", live, replayed)

			// Snapshot at mid, then a fresh projector resumes from it.
			atMid, err := projections.StateAt(ctx, l, nil, mid)
			if err != nil {
				t.Fatal(err)
			}
			p, err := projections.NewProjector(projections.ProjectorConfig{Log: l, Store: atMid, Blobs: blobs, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.SaveSnapshot(ctx); err != nil {
				t.Fatal(err)
			}
			resumed := projections.NewStore(projections.StoreOptions{})
			startProjector(t, projections.ProjectorConfig{Log: l, Store: resumed, Blobs: blobs})
			waitFor(t, resumed, last)
			requireSameState(t, "snapshot + tail", live, resumed)

			// As-of through the snapshot gives the same as a replay from 1.
			viaSnap, err := projections.StateAt(ctx, l, blobs, mid+10)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := projections.StateAt(ctx, l, nil, mid+10)
			if err != nil {
				t.Fatal(err)
			}
			requireSameState(t, "as-of via snapshot", plain, viaSnap)
		})
	}
}
