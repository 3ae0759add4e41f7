package events_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

// A scan over parallel ranges hands on exactly what a read does, in the
// same order, for any bounds, range size and parallelism; what Prepare
// made of a chunk arrives with it.
func TestScanEqualsRead(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 3000
	entries := make([]events.Entry, n)
	for i := range entries {
		entries[i] = events.Entry{Event: event(key(fmt.Sprint("k", i%700)), ""), Expect: events.AnyVersion}
	}
	if _, errs := l.AppendAsync(ctx, entries); errs != nil {
		t.Fatal(errs)
	}
	var all []events.Message
	if err := l.Read(ctx, events.ReadOptions{}, func(m events.Message) error { all = append(all, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("read %d events, want %d", len(all), n)
	}
	tests := []struct {
		name     string
		opts     events.ScanOptions
		from, to uint64 // what should arrive
	}{
		{"whole log", events.ScanOptions{}, 1, n},
		{"many small ranges", events.ScanOptions{Range: 100, Parallel: 3}, 1, n},
		{"one reader", events.ScanOptions{Range: 1000, Parallel: 1}, 1, n},
		{"bounded", events.ScanOptions{From: 17, To: 2345, Range: 256, Parallel: 4}, 17, 2345},
		{"one event", events.ScanOptions{From: 500, To: 500}, 500, 500},
		{"past the end", events.ScanOptions{From: n + 1, To: n + 5}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Prepare = func(c []events.Message) any { return c[0].Sequence }
			var got []events.Message
			err := l.Scan(ctx, opts, func(c []events.Message, prepared any) error {
				if prepared.(uint64) != c[0].Sequence {
					return fmt.Errorf("chunk from %d came with what Prepare made of the chunk from %d", c[0].Sequence, prepared)
				}
				got = append(got, c...)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			var want []events.Message
			if tt.to >= tt.from {
				want = all[tt.from-1 : tt.to]
			}
			if len(got) != len(want) {
				t.Fatalf("scan gave %d events, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i].Sequence != want[i].Sequence || got[i].Subject != want[i].Subject || !proto.Equal(mustRecord(t, got[i]), mustRecord(t, want[i])) {
					t.Fatalf("event %d: scan gave sequence %d %s, read gave %d %s", i, got[i].Sequence, got[i].Subject, want[i].Sequence, want[i].Subject)
				}
			}
		})
	}
}

func mustRecord(t *testing.T, m events.Message) proto.Message {
	t.Helper()
	r, err := m.Record()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A scan its handler ends early returns the handler's error and leaves no
// consumer behind.
func TestScanEndedEarlyRemovesItsConsumers(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	entries := make([]events.Entry, 500)
	for i := range entries {
		entries[i] = events.Entry{Event: event(key(fmt.Sprint("k", i)), ""), Expect: events.AnyVersion}
	}
	if _, errs := l.AppendAsync(ctx, entries); errs != nil {
		t.Fatal(errs)
	}
	stop := errors.New("enough")
	err := l.Scan(ctx, events.ScanOptions{Range: 50, Parallel: 4}, func([]events.Message, any) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("scan = %v, want the handler's error", err)
	}
	js, err := jetstream.New(l.Conn())
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

// A range whose consumer is lost mid-read (its server died, the stream
// changed leader: here the consumers are deleted under it) goes on from
// the last event it handed on, on a new consumer: every event arrives
// exactly once, in order.
func TestScanGoesOnAfterItsConsumerIsLost(t *testing.T) {
	l := testenv.Log(t, events.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 5000
	entries := make([]events.Entry, n)
	for i := range entries {
		entries[i] = events.Entry{Event: event(key(fmt.Sprint("k", i%300)), ""), Expect: events.AnyVersion}
	}
	if _, errs := l.AppendAsync(ctx, entries); errs != nil {
		t.Fatal(errs)
	}
	js, err := jetstream.New(l.Conn())
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	lost := 0
	next := uint64(1)
	err = l.Scan(ctx, events.ScanOptions{Range: 2500, Parallel: 2, Prepare: func(c []events.Message) any {
		once.Do(func() {
			for name := range stream.ConsumerNames(ctx).Name() {
				if js.DeleteConsumer(ctx, events.StreamName, name) == nil {
					lost++
				}
			}
		})
		return nil
	}}, func(c []events.Message, _ any) error {
		for _, m := range c {
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
	if lost == 0 {
		t.Fatal("no consumer was deleted under the scan; the test shows nothing")
	}
}

// Events the log no longer holds (dropped by its size limit) are skipped:
// ranges that lie wholly or partly before the log's first event give what
// is left of them.
func TestScanSkipsDroppedEvents(t *testing.T) {
	l := testenv.Log(t, events.Config{MaxBytes: 40_000})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	entries := make([]events.Entry, 1000)
	for i := range entries {
		entries[i] = events.Entry{Event: event(key(fmt.Sprint("k", i)), ""), Expect: events.AnyVersion}
	}
	if _, errs := l.AppendAsync(ctx, entries); errs != nil {
		t.Fatal(errs)
	}
	var want []uint64
	if err := l.Read(ctx, events.ReadOptions{}, func(m events.Message) error { want = append(want, m.Sequence); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || want[0] < 250 || want[0]%100 == 1 {
		t.Fatalf("the log kept events from %v on; the test needs whole and partial ranges dropped", want[:min(len(want), 1)])
	}
	var got []uint64
	if err := l.Scan(ctx, events.ScanOptions{Range: 100, Parallel: 3, To: 1000}, func(c []events.Message, _ any) error {
		for _, m := range c {
			got = append(got, m.Sequence)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("scan gave %d events from %v, want %d from %d", len(got), got[:min(len(got), 3)], len(want), want[0])
	}
}
