package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ConsumerOptions describe a durable consumer: a named read position kept
// by the server, whose deliveries must be acknowledged. A delivery not
// acknowledged within AckWait, or still unacknowledged when its reader
// dies, is delivered again: no trigger is lost to a crash.
type ConsumerOptions struct {
	// Name is the durable name; readers with the same name share one
	// position.
	Name string
	// Filter is a stored-subject filter (PartitionFilter, "jp.ev.>").
	Filter string
	// AckWait is how long a delivery may stay unacknowledged before it is
	// delivered again (default 5 min).
	AckWait time.Duration
	// MaxAckPending bounds unacknowledged deliveries (default 100,000).
	MaxAckPending int
}

// Delivery is a message from a durable consumer.
type Delivery struct {
	Message
	msg jetstream.Msg
}

// Ack acknowledges the delivery: the work it triggered is done (or its
// retry is scheduled) and it need not come again.
func (d Delivery) Ack() error { return d.msg.Ack() }

// Consume reads a durable consumer, creating or updating it, and hands each
// delivery to fn in order until ctx ends. fn must not block for long; it
// acknowledges deliveries when their work is done, possibly later and from
// another goroutine.
func (l *Log) Consume(ctx context.Context, opts ConsumerOptions, fn func(Delivery)) error {
	if opts.Name == "" {
		return errors.New("consume: a durable name is required")
	}
	if opts.AckWait == 0 {
		opts.AckWait = 5 * time.Minute
	}
	if opts.MaxAckPending == 0 {
		opts.MaxAckPending = 100_000
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       opts.Name,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       opts.AckWait,
		MaxAckPending: opts.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxDeliver:    -1,
	}
	if opts.Filter != "" {
		cfg.FilterSubject = opts.Filter
	}
	cons, err := l.stream.CreateOrUpdateConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", opts.Name, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1024))
	if err != nil {
		return fmt.Errorf("consumer %s: %w", opts.Name, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("consumer %s: %w", opts.Name, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("consumer %s: %w", opts.Name, err)
		}
		fn(Delivery{Message: Message{Data: msg.Data(), Sequence: meta.Sequence.Stream, Pending: meta.NumPending, Subject: msg.Subject()}, msg: msg})
	}
}
