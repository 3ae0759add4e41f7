package reconcilers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
)

// ackWire is the log with every acknowledgement the runtime sends on the
// wire recorded, by partition.
type ackWire struct {
	*events.Log
	mu    sync.Mutex
	acked map[int][]uint64 // in the order sent
	seen  map[int]uint64   // the newest sequence delivered
}

func (l *ackWire) Consume(ctx context.Context, opts events.ConsumerOptions, fn func(events.Delivery)) error {
	return l.Log.Consume(ctx, opts, func(d events.Delivery) {
		p, _, err := events.ParseSubject(d.Subject)
		if err != nil {
			panic(err)
		}
		l.mu.Lock()
		l.seen[p] = max(l.seen[p], d.Sequence)
		l.mu.Unlock()
		orig := d
		fn(d.OnAck(func() error {
			l.mu.Lock()
			l.acked[p] = append(l.acked[p], orig.Sequence)
			l.mu.Unlock()
			return orig.Ack()
		}))
	})
}

// newest is the newest acknowledgement sent for partition p, and how
// many were sent; and the newest sequence delivered on p.
func (l *ackWire) newest(p int) (acked uint64, n int, seen uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.acked[p] {
		acked = max(acked, s)
	}
	return acked, len(l.acked[p]), l.seen[p]
}

// Rule 8 with ack-all consumers (decision 0108): a delivery is
// acknowledged only after the run covering it ends, although the runs of
// later deliveries of its partition ended before; then one
// acknowledgement covers them all.
func TestAckAllWaitsForTheRunOfAnEarlierDelivery(t *testing.T) {
	var wire *ackWire
	release, slowRunning := make(chan struct{}), make(chan struct{})
	var once sync.Once
	rec := reconcilers.Funcs{
		KindList: []string{"Widget"},
		ReconcileFunc: func(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
			if obj.GetMetadata().GetName() == "slow" {
				once.Do(func() { close(slowRunning) })
				select {
				case <-release:
				case <-ctx.Done():
					return reconcilers.Result{}, ctx.Err()
				}
			}
			return reconcilers.Result{Message: "done"}, nil
		},
	}
	e := startWith(t, queue.Config{}, func(l *events.Log) reconcilers.Log {
		wire = &ackWire{Log: l, acked: map[int][]uint64{}, seen: map[int]uint64{}}
		return wire
	}, rec)
	n := e.log.Partitions()
	p := events.Partition(key("slow").Proto(), n)
	var others []string
	for i := 0; len(others) < 5; i++ {
		if name := fmt.Sprint("w", i); events.Partition(key(name).Proto(), n) == p {
			others = append(others, name)
		}
	}
	e.apply(t, widget("slow", "1"))
	<-slowRunning
	slowSeq := e.store.Get(key("slow")).GetMetadata().GetResourceVersion()
	for _, name := range others {
		e.apply(t, widget(name, "1"))
	}
	var last uint64
	for _, name := range others {
		eventually(t, name+" Ready", func() bool { return ready(e.store, name) })
		last = max(last, e.store.Get(key(name)).GetMetadata().GetResourceVersion())
	}
	eventually(t, "the statuses delivered to the runtime", func() bool { _, _, seen := wire.newest(p); return seen >= last })
	// Every later run has ended; give the runtime many times its
	// acknowledgement delay to acknowledge wrongly.
	time.Sleep(100 * time.Millisecond)
	if acked, _, _ := wire.newest(p); acked >= slowSeq {
		t.Fatalf("sequence %d acknowledged while the run of %d (slow) still runs", acked, slowSeq)
	}
	close(release)
	eventually(t, "slow Ready", func() bool { return ready(e.store, "slow") })
	final := e.store.Get(key("slow")).GetMetadata().GetResourceVersion()
	eventually(t, "every delivery of the partition acknowledged", func() bool {
		acked, _, _ := wire.newest(p)
		return acked >= final
	})
	// 2 deliveries per object (its Applied and its status), 6 objects.
	if _, sent, _ := wire.newest(p); sent >= 12 {
		t.Fatalf("%d acknowledgements for 12 deliveries; want fewer, one for many", sent)
	}
}

// A partition consumer lost with its server (its state lives in memory,
// decision 0109) is created again by the next read, and changes after
// that are run.
func TestLostPartitionConsumerIsCreatedAgain(t *testing.T) {
	rec := newRecorder()
	e := start(t, queue.Config{}, rec)
	e.apply(t, widget("a", "1"))
	eventually(t, "a Ready", func() bool { return ready(e.store, "a") })
	js, err := jetstream.New(e.log.Conn())
	if err != nil {
		t.Fatal(err)
	}
	name := events.PartitionConsumer("", events.Partition(key("a").Proto(), e.log.Partitions()))
	ctx := context.Background()
	if err := js.DeleteConsumer(ctx, events.StreamName, name); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the consumer created again", func() bool {
		c, err := js.Consumer(ctx, events.StreamName, name)
		return err == nil && c.CachedInfo().Config.MemoryStorage
	})
	e.apply(t, widget("a", "2"))
	eventually(t, "a Ready at generation 2", func() bool {
		return ready(e.store, "a") && e.store.Get(key("a")).Metadata.Generation == 2
	})
}
