package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

// On a three-node cluster with an R3 stream, a stale expectation is a
// conflict too (the server answers 10164 there, not 10071), dedupe holds,
// and the log survives the loss of a node.
func TestReplicatedLog(t *testing.T) {
	c := testenv.NATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	l, err := events.Open(ctx, c.Connect(t), events.Config{Replicas: 3, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	k := key("r3")
	r1, err := l.Append(ctx, events.Entry{Event: event(k, "r3-1"), Expect: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, events.Entry{Event: event(k, "r3-2"), Expect: 0}); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("stale expectation on R3: err = %v, want ErrConflict", err)
	}
	if _, err := l.AppendBatch(ctx, []events.Entry{{Event: event(key("x"), ""), Expect: 0}, {Event: event(k, ""), Expect: 0}}); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("stale batch on R3: err = %v, want ErrConflict", err)
	}
	if dup, err := l.Append(ctx, events.Entry{Event: event(k, "r3-1"), Expect: events.AnyVersion}); err != nil || !dup.Duplicate {
		t.Fatalf("duplicate on R3 = %+v, %v", dup, err)
	}

	// Lose a node; the others keep the log and take writes.
	c.Servers[0].Shutdown()
	// Each attempt is bounded: a request sent while the client reconnects
	// or the stream elects a new leader may go unanswered. The same event
	// id makes a retry of an attempt that did land a duplicate, not a
	// second event.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = l.Append(actx, events.Entry{Event: event(k, "r3-3"), Expect: r1.Sequence})
		acancel()
		if err == nil || errors.Is(err, events.ErrConflict) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A conflict here means an earlier attempt landed (its answer was
	// lost); the history check below tells.
	if err != nil && !errors.Is(err, events.ErrConflict) {
		t.Fatalf("append after losing a node: %v", err)
	}
	// Reads may need a moment while the cluster moves leaders; each
	// attempt is bounded so a read stuck on the lost node is retried.
	deadline = time.Now().Add(2 * time.Minute)
	for {
		hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
		hist, err := l.History(hctx, k)
		hcancel()
		if err == nil && len(hist) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history after losing a node: %d events, %v; want 2", len(hist), err)
		}
	}
}

// A follower of the log (what the projection is) goes on when the log's
// leader dies: it reads the events appended after the loss, without a gap
// or a repeat.
func TestFollowOutlivesLeaderLoss(t *testing.T) {
	c := testenv.NATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := events.Open(ctx, c.Connect(t), events.Config{Replicas: 3, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	appendOne := func(name string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := l.Append(actx, events.Entry{Event: event(key(name), name), Expect: events.AnyVersion})
			acancel()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("append %s: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	appendOne("before")
	got := make(chan uint64, 16)
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- l.Read(rctx, events.ReadOptions{Follow: true}, func(m events.Message) error {
			got <- m.Sequence
			return nil
		})
	}()
	defer func() {
		rcancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("follow ended with %v", err)
		}
	}()
	want := func(seq uint64) time.Time {
		t.Helper()
		select {
		case s := <-got:
			if s != seq {
				t.Fatalf("follower read %d, want %d", s, seq)
			}
			return time.Now()
		case <-time.After(2 * time.Minute):
			t.Fatalf("follower did not read %d", seq)
		}
		return time.Time{}
	}
	want(1)
	leader := c.StreamLeader(t, events.StreamName)
	leader.Shutdown()
	lost := time.Now()
	appendOne("after")
	appended := time.Now()
	read := want(2)
	t.Logf("leader lost; append landed %s later, read by the follower %s after that",
		appended.Sub(lost).Round(time.Millisecond), read.Sub(appended).Round(time.Millisecond))
}

// A scan (a replay) goes on when the log's leader dies under it: every
// event arrives once, in order.
func TestScanOutlivesLeaderLoss(t *testing.T) {
	c := testenv.NATSCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l, err := events.Open(ctx, c.Connect(t), events.Config{Replicas: 3, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	entries := make([]events.Entry, n)
	for i := range entries {
		entries[i] = events.Entry{Event: event(key(fmt.Sprint("k", i%200)), ""), Expect: events.AnyVersion}
	}
	if _, errs := l.AppendAsync(ctx, entries); errs != nil {
		t.Fatal(errs)
	}
	var once sync.Once
	next := uint64(1)
	err = l.Scan(ctx, events.ScanOptions{Range: 1000, Parallel: 2, Prepare: func([]events.Message) any {
		once.Do(func() { c.StreamLeader(t, events.StreamName).Shutdown() })
		return nil
	}}, func(chunk []events.Message, _ any) error {
		for _, m := range chunk {
			if m.Sequence != next {
				return fmt.Errorf("got sequence %d, want %d", m.Sequence, next)
			}
			next++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if next != n+1 {
		t.Fatalf("scan ended at %d of %d", next-1, n)
	}
}
