package reconcilers

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/schemas"
)

// Statuses submitted together are written together, and one whose
// concurrency check fails fails alone: the others are stored.
func TestCommitterWritesTogetherAndFailsAlone(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	names := []string{"a", "b", "c", "d"}
	versions := map[string]uint64{}
	for _, n := range names {
		res, err := l.Append(ctx, events.Entry{Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_APPLIED,
			Key: &schemas.ObjectKey{Kind: "Widget", Namespace: "ns", Name: n}, Object: &schemas.Object{}}})
		if err != nil {
			t.Fatal(err)
		}
		versions[n] = res.Sequence
	}
	cm := newCommitter(l)
	var mu sync.Mutex
	got := map[string]error{}
	seqs := map[string]uint64{}
	var wg sync.WaitGroup
	for _, n := range names {
		expect := versions[n]
		if n == "b" {
			expect-- // read before someone else's write
		}
		wg.Add(1)
		cm.submit(commit{
			entry: events.Entry{Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED,
				Key: &schemas.ObjectKey{Kind: "Widget", Namespace: "ns", Name: n}, Object: &schemas.Object{Status: &schemas.Status{Phase: "Ready"}}},
				Expect: expect},
			done: func(res events.Result, err error) {
				defer wg.Done()
				mu.Lock()
				got[n], seqs[n] = err, res.Sequence
				mu.Unlock()
			},
		})
	}
	go cm.run() // everything is pending: one batch
	wg.Wait()
	cm.close()
	for _, n := range names {
		switch {
		case n == "b" && !errors.Is(got[n], events.ErrConflict):
			t.Fatalf("b's write = %v, want a conflict", got[n])
		case n != "b" && (got[n] != nil || seqs[n] == 0):
			t.Fatalf("%s's write = %v (sequence %d), want stored", n, got[n], seqs[n])
		}
	}
	head, err := l.LastSequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if head != versions["d"]+3 {
		t.Fatalf("log head %d, want %d: three statuses stored once each", head, versions["d"]+3)
	}
}
