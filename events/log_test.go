package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/schemas"
)

func key(name string) *schemas.ObjectKey {
	return &schemas.ObjectKey{Kind: "ConfigMap", Namespace: "default", Name: name}
}

func event(k *schemas.ObjectKey, id string) *schemas.Event {
	return &schemas.Event{Id: id, Type: schemas.EventType_EVENT_TYPE_APPLIED, Key: k, Actor: "user/test"}
}

func TestOpenIsIdempotentAndKeepsPartitions(t *testing.T) {
	_, nc := testenv.NATS(t)
	ctx := context.Background()
	l, err := events.Open(ctx, nc, events.Config{Partitions: 8})
	if err != nil {
		t.Fatal(err)
	}
	l2, err := events.Open(ctx, nc, events.Config{Partitions: 32, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if l.Partitions() != 8 || l2.Partitions() != 8 {
		t.Fatalf("partitions = %d, %d; want 8 kept", l.Partitions(), l2.Partitions())
	}
	if _, err := events.Open(ctx, nc, events.Config{Replicas: 2}); err == nil || !strings.Contains(err.Error(), "replicas") {
		t.Fatalf("Open with 2 replicas: err = %v, want a replicas error", err)
	}
}

func TestAppendConflictAndDedupe(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	k := key("a")

	r1, err := l.Append(ctx, events.Entry{Event: event(k, "e1"), Expect: 0})
	if err != nil {
		t.Fatal(err)
	}
	// Creating again (expecting no events) conflicts.
	if _, err := l.Append(ctx, events.Entry{Event: event(k, "e2"), Expect: 0}); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("second create: err = %v, want ErrConflict", err)
	}
	// Another key's writes do not disturb this key's version.
	if _, err := l.Append(ctx, events.Entry{Event: event(key("b"), "b1"), Expect: 0}); err != nil {
		t.Fatal(err)
	}
	r2, err := l.Append(ctx, events.Entry{Event: event(k, "e3"), Expect: r1.Sequence})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, events.Entry{Event: event(k, "e4"), Expect: r1.Sequence}); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("stale expectation: err = %v, want ErrConflict", err)
	}
	// The same id again is stored once.
	dup, err := l.Append(ctx, events.Entry{Event: event(k, "e3"), Expect: events.AnyVersion})
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || dup.Sequence != r2.Sequence {
		t.Fatalf("duplicate append = %+v, want duplicate of %d", dup, r2.Sequence)
	}
	hist, err := l.History(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range hist {
		ids = append(ids, fmt.Sprintf("%s@%d", ev.Id, ev.Sequence))
	}
	if got, want := strings.Join(ids, ","), fmt.Sprintf("e1@%d,e3@%d", r1.Sequence, r2.Sequence); got != want {
		t.Fatalf("history = %s, want %s", got, want)
	}
}

// The stored subject carries a partition the server computed; a publisher
// cannot write a stored subject, and the concurrency check applies to the
// stored subject.
func TestPartitionIsChosenByServer(t *testing.T) {
	l := testenv.Log(t, events.Config{Partitions: 4})
	ctx := context.Background()
	js, err := jetstream.New(l.Conn())
	if err != nil {
		t.Fatal(err)
	}
	// Publishing straight to a stored subject reaches no stream.
	_, err = js.Publish(ctx, "jp.ev.3.ConfigMap.default.x", []byte("x"))
	if !errors.Is(err, jetstream.ErrNoStreamResponse) && !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("publish to stored subject: err = %v, want no stream to answer", err)
	}
	seen := map[int]bool{}
	for i := range 64 {
		k := key(fmt.Sprintf("obj-%d", i))
		r, err := l.Append(ctx, events.Entry{Event: event(k, ""), Expect: 0})
		if err != nil {
			t.Fatal(err)
		}
		s, err := jetstreamStream(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := s.GetMsg(ctx, r.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		p, got, err := events.ParseSubject(raw.Subject)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != k.Name || p != events.Partition(k, 4) {
			t.Fatalf("stored subject %q for key %v; want partition %d", raw.Subject, k, events.Partition(k, 4))
		}
		seen[p] = true
		// The version check sees the stored subject: expecting the
		// sequence just written succeeds.
		if _, err := l.Append(ctx, events.Entry{Event: event(k, ""), Expect: r.Sequence}); err != nil {
			t.Fatalf("append expecting %d: %v", r.Sequence, err)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("64 keys landed in partitions %v, want all 4", seen)
	}
}

func jetstreamStream(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	return js.Stream(ctx, events.StreamName)
}

func TestAppendBatchIsAtomic(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	first, err := l.Append(ctx, events.Entry{Event: event(key("x"), ""), Expect: 0})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := l.Count(ctx)
	// The last entry's expectation is stale: nothing of the batch lands.
	batch := []events.Entry{
		{Event: event(key("p"), ""), Expect: 0},
		{Event: event(key("q"), ""), Expect: 0},
		{Event: event(key("x"), ""), Expect: 0},
	}
	if _, err := l.AppendBatch(ctx, batch); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("batch with stale entry: err = %v, want ErrConflict", err)
	}
	if after, _ := l.Count(ctx); after != before {
		t.Fatalf("log grew from %d to %d events after a rejected batch", before, after)
	}
	batch[2] = events.Entry{Event: event(key("x"), ""), Expect: first.Sequence}
	res, err := l.AppendBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Sequence != first.Sequence+1+uint64(i) {
			t.Fatalf("batch results %+v are not contiguous after %d", res, first.Sequence)
		}
	}
	// Resending a stored batch (same event ids) stores nothing.
	for i := range batch {
		batch[i].Expect = events.AnyVersion
	}
	before, _ = l.Count(ctx)
	if _, err := l.AppendBatch(ctx, batch); !errors.Is(err, events.ErrDuplicate) {
		t.Fatalf("resent batch: err = %v, want ErrDuplicate", err)
	}
	if after, _ := l.Count(ctx); after != before {
		t.Fatalf("resent batch grew the log from %d to %d", before, after)
	}
}

func TestReadFollowAndSequenceAt(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 5 {
		if _, err := l.Append(ctx, events.Entry{Event: event(key(fmt.Sprint("k", i)), ""), Expect: events.AnyVersion}); err != nil {
			t.Fatal(err)
		}
	}
	mid := time.Now()
	time.Sleep(5 * time.Millisecond) // stored timestamps must differ from mid
	var got []uint64
	if err := l.Read(ctx, events.ReadOptions{From: 3}, func(m events.Message) error {
		got = append(got, m.Sequence)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[3 4 5]" {
		t.Fatalf("read from 3 = %v", got)
	}
	seq, err := l.SequenceAt(ctx, mid)
	if err != nil || seq != 5 {
		t.Fatalf("SequenceAt(mid) = %d, %v; want 5", seq, err)
	}
	if seq, err := l.SequenceAt(ctx, mid.Add(-time.Hour)); err != nil || seq != 0 {
		t.Fatalf("SequenceAt(an hour before) = %d, %v; want 0", seq, err)
	}

	// Follow sees events appended after it started.
	done := make(chan error, 1)
	seen := make(chan uint64, 16)
	fctx, fcancel := context.WithCancel(ctx)
	go func() {
		done <- l.Read(fctx, events.ReadOptions{From: 6, Follow: true}, func(m events.Message) error {
			seen <- m.Sequence
			return nil
		})
	}()
	if _, err := l.Append(ctx, events.Entry{Event: event(key("late"), ""), Expect: 0}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-seen:
		if s != 6 {
			t.Fatalf("follow saw %d, want 6", s)
		}
	case <-ctx.Done():
		t.Fatal("follow did not see the new event")
	}
	fcancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("follow ended with %v, want context.Canceled", err)
	}
}

func TestKeyVersion(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	k := key("kv")
	if v, err := l.KeyVersion(ctx, k); err != nil || v != 0 {
		t.Fatalf("KeyVersion of a new key = %d, %v; want 0", v, err)
	}
	var last uint64
	for range 3 {
		r, err := l.Append(ctx, events.Entry{Event: event(k, ""), Expect: last})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, events.Entry{Event: event(key("other"), ""), Expect: events.AnyVersion}); err != nil {
			t.Fatal(err)
		}
		last = r.Sequence
	}
	if v, err := l.KeyVersion(ctx, k); err != nil || v != last {
		t.Fatalf("KeyVersion = %d, %v; want %d", v, err, last)
	}
}

// An outside publisher that puts another key's event on a key's subject is
// refused by readers: the payload's key must be the one its subject names.
func TestReadRefusesKeyMismatch(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx := context.Background()
	ev := event(key("victim"), "forged")
	data, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(l.Conn())
	if _, err := js.Publish(ctx, events.InputSubject(key("attacker")), data); err != nil {
		t.Fatal(err)
	}
	var got error
	if err := l.Read(ctx, events.ReadOptions{}, func(m events.Message) error {
		_, got = m.Record()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(got, events.ErrKeyMismatch) {
		t.Fatalf("decoding a forged event: err = %v, want ErrKeyMismatch", got)
	}
	// Neither key's history shows it.
	for _, k := range []string{"victim", "attacker"} {
		if h, err := l.History(ctx, key(k)); err != nil || len(h) != 0 {
			t.Fatalf("history of %s = %v, %v; want empty", k, h, err)
		}
	}
}

// A read its handler ends early leaves no consumer behind on the server.
func TestReadEndedEarlyRemovesItsConsumer(t *testing.T) {
	_, nc := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := events.Open(ctx, nc, events.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := l.Append(ctx, events.Entry{Event: event(key(fmt.Sprint("k", i)), ""), Expect: events.AnyVersion}); err != nil {
			t.Fatal(err)
		}
	}
	stop := errors.New("enough")
	for _, follow := range []bool{false, true} {
		err := l.Read(ctx, events.ReadOptions{Follow: follow}, func(events.Message) error { return stop })
		if !errors.Is(err, stop) {
			t.Fatalf("read (follow %v) = %v, want the handler's error", follow, err)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var names []string
		for n := range stream.ConsumerNames(ctx).Name() {
			names = append(names, n)
		}
		if len(names) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumers left behind: %v", names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
