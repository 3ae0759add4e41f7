package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
)

// fakeLog is a Log whose AppendAsync is a function.
type fakeLog struct {
	appendAsync func(entries []events.Entry) ([]events.Result, []error)
}

func (f fakeLog) AppendAsync(_ context.Context, entries []events.Entry) ([]events.Result, []error) {
	return f.appendAsync(entries)
}

func (fakeLog) LastSequence(context.Context) (uint64, error) { return 0, nil }

// nopLog stores everything and holds nothing.
type nopLog struct{}

func (nopLog) AppendAsync(_ context.Context, entries []events.Entry) ([]events.Result, []error) {
	return make([]events.Result, len(entries)), nil
}

func (nopLog) LastSequence(context.Context) (uint64, error) { return 0, nil }

func ev(id string) *schemas.Event {
	return &schemas.Event{Id: id, Key: &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "c/ns", Name: id}}
}

// TestWriter: the writer appends in queue order and in batches, counts
// duplicates as stored, drops what can never fit, retries the rest until
// it lands, and closes a barrier only after everything before it.
func TestWriter(t *testing.T) {
	var mu sync.Mutex
	var stored []string
	calls := 0
	log := fakeLog{appendAsync: func(entries []events.Entry) ([]events.Result, []error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		res := make([]events.Result, len(entries))
		var errs []error
		for i, e := range entries {
			id := e.Event.Id
			switch {
			case id == "big":
				errs = append(make([]error, i), fmt.Errorf("append: %w", events.ErrTooLarge))
				errs = append(errs, make([]error, len(entries)-i-1)...)
				continue
			case id == "flaky" && calls < 3:
				errs = append(make([]error, i), errors.New("nats: timeout"))
				errs = append(errs, make([]error, len(entries)-i-1)...)
				continue
			case id == "dup":
				res[i].Duplicate = true
			}
			if e.Expect != events.AnyVersion {
				t.Errorf("%s appended with a concurrency check", id)
			}
			stored = append(stored, id)
		}
		return res, errs
	}}
	q := make(chan item, 16)
	tr := &tracker{now: time.Now}
	w := &writer{log: log, queue: q, status: tr, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), maxBatch: 3, retry: time.Millisecond, maxRetry: time.Millisecond}
	for _, id := range []string{"a", "b", "big", "c", "flaky", "dup"} {
		q <- item{ev: ev(id)}
	}
	barrier := make(chan struct{})
	q <- item{barrier: barrier}
	q <- item{ev: ev("after")}
	close(q)
	done := make(chan struct{})
	go func() {
		w.run(context.Background())
		close(done)
	}()
	select {
	case <-barrier:
	case <-time.After(10 * time.Second):
		t.Fatal("barrier not closed")
	}
	mu.Lock()
	got := fmt.Sprint(stored)
	mu.Unlock()
	if want := "[a b c dup flaky]"; got != want && got != "[a b c dup flaky after]" {
		t.Fatalf("stored %s at the barrier, want %s", got, want)
	}
	<-done
	var s Status
	tr.fill(&s)
	if s.Appended != 5 || s.Duplicates != 1 || s.Dropped != 1 || s.LastEvent.IsZero() {
		t.Fatalf("status %+v", s)
	}
	if fmt.Sprint(stored) != "[a b c dup flaky after]" {
		t.Fatalf("stored %v", stored)
	}
}

// TestWriterStopsRetrying: a writer whose context ends gives up on an
// append that keeps failing.
func TestWriterStopsRetrying(t *testing.T) {
	log := fakeLog{appendAsync: func(entries []events.Entry) ([]events.Result, []error) {
		errs := make([]error, len(entries))
		for i := range errs {
			errs[i] = errors.New("nats: no responders")
		}
		return make([]events.Result, len(entries)), errs
	}}
	q := make(chan item, 1)
	tr := &tracker{now: time.Now}
	w := &writer{log: log, queue: q, status: tr, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), maxBatch: 3, retry: time.Millisecond, maxRetry: 10 * time.Millisecond}
	q <- item{ev: ev("a")}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	w.run(ctx)
	tr.setSynced()
	var s Status
	tr.fill(&s)
	if s.State != StateError || s.LastError != "nats: no responders" || s.Appended != 0 {
		t.Fatalf("status %+v", s)
	}
}
