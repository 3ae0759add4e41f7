package events_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

// Pipelined appends each get their own outcome: stored, a conflict, a
// duplicate of an id already stored; many more than one window's worth
// are all stored, in order; a log without its stream is reported by every entry, not
// waited for.
func TestAppendAsyncOutcomes(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	first, err := l.Append(ctx, events.Entry{Event: event(key("taken"), "e-taken"), Expect: 0})
	if err != nil {
		t.Fatal(err)
	}
	entries := []events.Entry{
		{Event: event(key("a"), ""), Expect: 0},
		{Event: event(key("taken"), ""), Expect: 0},                        // stale
		{Event: event(key("other"), "e-taken"), Expect: events.AnyVersion}, // a stored id
		{Event: event(key("b"), ""), Expect: events.AnyVersion},
	}
	res, errs := l.AppendAsync(ctx, entries)
	if errs == nil {
		t.Fatal("no errors, want a conflict")
	}
	if errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("errors %v, want only entry 1's", errs)
	}
	if !errors.Is(errs[1], events.ErrConflict) {
		t.Fatalf("stale entry: %v, want ErrConflict", errs[1])
	}
	if !res[2].Duplicate || res[2].Sequence != first.Sequence {
		t.Fatalf("stored id: %+v, want a duplicate of sequence %d", res[2], first.Sequence)
	}
	if res[0].Sequence == 0 || res[3].Sequence <= res[0].Sequence {
		t.Fatalf("results %+v, want growing sequences", res)
	}

	many := make([]events.Entry, 9000)
	for i := range many {
		many[i] = events.Entry{Event: event(key(fmt.Sprint("m-", i)), ""), Expect: events.AnyVersion}
	}
	res, errs = l.AppendAsync(ctx, many)
	if errs != nil {
		t.Fatal(errors.Join(errs...))
	}
	for i := 1; i < len(res); i++ {
		if res[i].Sequence <= res[i-1].Sequence {
			t.Fatalf("entry %d at sequence %d after %d: sent out of order", i, res[i].Sequence, res[i-1].Sequence)
		}
	}

	_, nc := testenv.NATS(t)
	gone := events.LogWithoutStream(nc)
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, errs = gone.AppendAsync(wait, entries[:2])
	for i, err := range errs {
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("entry %d with no stream: %v, want ErrNoStreamResponse", i, err)
		}
	}
	if wait.Err() != nil {
		t.Fatal("the appends waited for their context instead of reporting that no stream answers")
	}
}

// A call whose context ends before the acknowledgements come reports the
// context's error for each entry still waiting.
func TestAppendAsyncContextEnds(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, errs := l.AppendAsync(ctx, []events.Entry{{Event: event(key("x"), ""), Expect: events.AnyVersion}})
	if len(errs) != 1 || !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("errors %v, want context.Canceled", errs)
	}
}

// A write whose context has ended is not sent: its caller is told it
// failed, so it must not be in the log.
func TestAppendWithAnEndedContextStoresNothing(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Append(ctx, events.Entry{Event: event(key("x"), ""), Expect: events.AnyVersion}); !errors.Is(err, context.Canceled) {
		t.Fatalf("append: %v, want context.Canceled", err)
	}
	if _, errs := l.AppendAsync(ctx, []events.Entry{{Event: event(key("y"), ""), Expect: events.AnyVersion}}); !errors.Is(errs[0], context.Canceled) {
		t.Fatalf("append async: %v, want context.Canceled", errs[0])
	}
	// A later write flushes anything sent before it to the stream.
	res, err := l.Append(context.Background(), events.Entry{Event: event(key("z"), ""), Expect: events.AnyVersion})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sequence != 1 {
		t.Fatalf("the first write stored at %d: writes with an ended context were stored", res.Sequence)
	}
}

// An append waiting for its acknowledgement when the connection closes
// fails at once, not after its timeout.
func TestAppendEndsWithItsConnection(t *testing.T) {
	srv, nc := testenv.NATS(t)
	// Something takes the log's writes and never answers.
	mute, err := srv.Connect("mute")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	got := make(chan struct{}, 1)
	if _, err := mute.Subscribe(events.InputPrefix+".>", func(*nats.Msg) { got <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if err := mute.Flush(); err != nil {
		t.Fatal(err)
	}
	l := events.LogWithoutStream(nc)
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), events.Entry{Event: event(key("x"), ""), Expect: events.AnyVersion})
		done <- err
	}()
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the append never reached the subscriber")
	}
	began := time.Now()
	nc.Close()
	select {
	case err := <-done:
		if !errors.Is(err, nats.ErrConnectionClosed) {
			t.Fatalf("append: %v, want ErrConnectionClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("append still waiting %s after its connection closed", time.Since(began))
	}
}
