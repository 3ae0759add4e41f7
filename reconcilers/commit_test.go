package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/schemas"
)

// Statuses submitted together are written together, and one whose
// concurrency check fails fails alone: the others are stored. So with
// group commit (an atomic batch, written again entry by entry when one
// entry is refused) and without (pipelined).
//
// On the real log the log groups the statuses itself (events.Log.AppendEach,
// atomically or pipelined as it is configured); on a log without that the
// committer does (countingLog hides it).
func TestCommitterWritesTogetherAndFailsAlone(t *testing.T) {
	for _, group := range []bool{true, false} {
		for _, byLog := range []bool{true, false} {
			t.Run(fmt.Sprintf("group=%t/by-log=%t", group, byLog), func(t *testing.T) { testCommitterFailsAlone(t, group, byLog) })
		}
	}
}

func testCommitterFailsAlone(t *testing.T, group, byLog bool) {
	el := testenv.Log(t, events.Config{AtomicGroups: group})
	var l Log = el
	if !byLog {
		l = &countingLog{Log: el}
	}
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
	cm := newCommitter(l, group)
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

// countingLog counts the log calls the committer makes. It is the log
// without its own group commit (events.Log.AppendEach), so that the
// committer chooses between an atomic batch and a pipelined write.
type countingLog struct {
	Log
	mu                      sync.Mutex
	appends, batches, async int
}

func (c *countingLog) Append(ctx context.Context, e events.Entry) (events.Result, error) {
	c.mu.Lock()
	c.appends++
	c.mu.Unlock()
	return c.Log.Append(ctx, e)
}

func (c *countingLog) AppendBatch(ctx context.Context, es []events.Entry) ([]events.Result, error) {
	c.mu.Lock()
	c.batches++
	c.mu.Unlock()
	return c.Log.AppendBatch(ctx, es)
}

func (c *countingLog) AppendAsync(ctx context.Context, es []events.Entry) ([]events.Result, []error) {
	c.mu.Lock()
	c.async++
	c.mu.Unlock()
	return c.Log.AppendAsync(ctx, es)
}

// Statuses pending together are one atomic batch: one call, contiguous
// sequences in the order submitted.
func TestCommitterBatchesPendingStatuses(t *testing.T) {
	l := &countingLog{Log: testenv.Log(t, events.Config{})}
	cm := newCommitter(l, true)
	const n = 50
	seqs := make([]uint64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		cm.submit(commit{
			entry: events.Entry{Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED,
				Key: &schemas.ObjectKey{Kind: "Widget", Namespace: "ns", Name: fmt.Sprint("w", i)}, Object: &schemas.Object{Status: &schemas.Status{Phase: "Ready"}}},
				Expect: 0},
			done: func(res events.Result, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("w%d: %v", i, err)
				}
				seqs[i] = res.Sequence
			},
		})
	}
	go cm.run()
	wg.Wait()
	cm.close()
	if l.batches != 1 || l.appends != 0 || l.async != 0 {
		t.Fatalf("%d batches, %d appends, %d pipelined writes; want one batch", l.batches, l.appends, l.async)
	}
	for i := 1; i < n; i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("sequences %v are not contiguous", seqs)
		}
	}
}

// Without group commit, statuses pending together are one pipelined
// write: one call, no atomic batch, each stored.
func TestCommitterPipelinesWithoutGroupCommit(t *testing.T) {
	l := &countingLog{Log: testenv.Log(t, events.Config{})}
	cm := newCommitter(l, false)
	const n = 50
	seqs := make([]uint64, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		cm.submit(commit{
			entry: events.Entry{Event: &schemas.Event{Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED,
				Key: &schemas.ObjectKey{Kind: "Widget", Namespace: "ns", Name: fmt.Sprint("w", i)}, Object: &schemas.Object{Status: &schemas.Status{Phase: "Ready"}}},
				Expect: 0},
			done: func(res events.Result, err error) {
				defer wg.Done()
				if err != nil {
					t.Errorf("w%d: %v", i, err)
				}
				seqs[i] = res.Sequence
			},
		})
	}
	go cm.run()
	wg.Wait()
	cm.close()
	if l.batches != 0 || l.appends != 0 || l.async != 1 {
		t.Fatalf("%d batches, %d appends, %d pipelined writes; want one pipelined write", l.batches, l.appends, l.async)
	}
	for i := range n {
		if seqs[i] == 0 {
			t.Fatalf("w%d was not stored", i)
		}
	}
}
