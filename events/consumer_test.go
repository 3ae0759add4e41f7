package events_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/internal/testenv"
)

// A consumer read with AckRuns acknowledges everything up to a sequence
// with one message: a delivery not done keeps the server's acknowledgement
// floor below it, and once every delivery is done the floor is the last.
func TestConsumeAckRuns(t *testing.T) {
	_, nc := testenv.NATS(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := events.Open(ctx, nc, events.Config{Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	var last uint64
	for i := range n {
		r, err := l.Append(ctx, events.Entry{Event: event(key(fmt.Sprint("k", i)), fmt.Sprint("e", i))})
		if err != nil {
			t.Fatal(err)
		}
		last = r.Sequence
	}
	got := make(chan events.Delivery, n)
	done := make(chan error, 1)
	go func() {
		done <- l.Consume(ctx, events.ConsumerOptions{Name: "runs", Filter: events.PartitionFilter(0), AckRuns: true, AckDelay: time.Millisecond}, func(d events.Delivery) { got <- d })
	}()
	ds := make([]events.Delivery, 0, n)
	for range n {
		select {
		case d := <-got:
			ds = append(ds, d)
		case err := <-done:
			t.Fatalf("consume ended: %v", err)
		}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(ctx, events.StreamName, "runs")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.CachedInfo().Config.AckPolicy; p != jetstream.AckAllPolicy {
		t.Fatalf("ack policy %v, want all", p)
	}
	floor := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			info, err := c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.AckFloor.Stream == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("ack floor %d, want %d", info.AckFloor.Stream, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The first half done, then every other one of the rest: the floor
	// is the first half's last.
	for _, d := range ds[:n/2] {
		_ = d.Ack()
	}
	for i := n/2 + 1; i < n; i += 2 {
		_ = ds[i].Ack()
	}
	floor(ds[n/2-1].Sequence)
	for i := n / 2; i < n; i += 2 {
		_ = ds[i].Ack()
	}
	floor(last)
	cancel()
	<-done
}
