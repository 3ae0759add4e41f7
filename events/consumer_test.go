package events_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

// An AckAll consumer acknowledges every earlier delivery with one Ack, and
// the consumers it replaces are deleted before it is read (decision 0108).
func TestConsumeAckAllReplacesTheExplicitConsumer(t *testing.T) {
	_, nc := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := events.Open(ctx, nc, events.Config{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := l.Append(ctx, events.Entry{Event: event(key(fmt.Sprint("k", i)), ""), Expect: events.AnyVersion}); err != nil {
			t.Fatal(err)
		}
	}
	old, name := events.ExplicitAckPartitionConsumer("", 0), events.PartitionConsumer("", 0)
	if old == name {
		t.Fatalf("the ack-all consumer is named as the explicit one: %s", name)
	}
	// readAll reads opts's consumer until it has handed over want
	// deliveries, and returns them.
	readAll := func(opts events.ConsumerOptions, want int) []events.Delivery {
		t.Helper()
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		var got []events.Delivery
		err := l.Consume(rctx, opts, func(d events.Delivery) {
			if got = append(got, d); len(got) == want {
				stop()
			}
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("consume %s: %v", opts.Name, err)
		}
		return got
	}
	readAll(events.ConsumerOptions{Name: old, Filter: events.PartitionFilter(0)}, 3)

	got := readAll(events.ConsumerOptions{Name: name, Filter: events.PartitionFilter(0), AckAll: true, Replaces: []string{old}}, 3)
	if err := got[2].Ack(); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, events.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Consumer(ctx, old); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("replaced consumer %s: %v, want it deleted", old, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := stream.Consumer(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.AckPolicy != jetstream.AckAllPolicy {
			t.Fatalf("ack policy %v, want ack-all", info.Config.AckPolicy)
		}
		if info.NumAckPending == 0 && info.AckFloor.Stream == got[2].Sequence {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after acknowledging the third delivery: %d pending, ack floor %d; want 0 and %d",
				info.NumAckPending, info.AckFloor.Stream, got[2].Sequence)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A consumer whose state lives in memory starts after StartAfter when it
// is created, and reads on from where it is when it exists (decision
// 0109).
func TestConsumeMemoryStateStartsAfterAndKeepsItsPosition(t *testing.T) {
	_, nc := testenv.NATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := events.Open(ctx, nc, events.Config{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for i := range 5 {
		r, err := l.Append(ctx, events.Entry{Event: event(key(fmt.Sprint("k", i)), ""), Expect: events.AnyVersion})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, r.Sequence)
	}
	opts := events.ConsumerOptions{Name: events.PartitionConsumer("", 0), Filter: events.PartitionFilter(0), AckAll: true, MemoryState: true, StartAfter: seqs[2],
		// What a read had buffered when it ended comes again after it.
		AckWait: time.Second}
	// first reads opts's consumer until it delivers, and returns the
	// first delivery.
	first := func(opts events.ConsumerOptions) events.Delivery {
		t.Helper()
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		var got events.Delivery
		err := l.Consume(rctx, opts, func(d events.Delivery) {
			if got.Sequence == 0 {
				got = d
				stop()
			}
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("consume: %v", err)
		}
		return got
	}
	d := first(opts)
	if d.Sequence != seqs[3] {
		t.Fatalf("a new consumer started at %d; want %d, after StartAfter %d", d.Sequence, seqs[3], seqs[2])
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	// Read again with another StartAfter: the consumer exists and reads
	// on after what it acknowledged.
	opts.StartAfter = seqs[0]
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := first(opts)
		if d.Sequence == seqs[4] {
			break
		}
		if d.Sequence != seqs[3] || time.Now().After(deadline) {
			t.Fatalf("the existing consumer delivered %d; want %d, after its acknowledged %d", d.Sequence, seqs[4], seqs[3])
		}
		// The acknowledgement had not arrived before the read ended:
		// the redelivery comes after AckWait; acknowledge this one.
		_ = d.Ack()
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(ctx, events.StreamName, opts.Name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	if !cfg.MemoryStorage || cfg.AckPolicy != jetstream.AckAllPolicy || cfg.OptStartSeq != seqs[3] {
		t.Fatalf("consumer config: memory %v, ack policy %v, start %d; want memory, ack-all, %d", cfg.MemoryStorage, cfg.AckPolicy, cfg.OptStartSeq, seqs[3])
	}
}
