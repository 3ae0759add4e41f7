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
	// Filters, when set, are several such filters instead of Filter
	// (KindPartitionFilter of each kind a controller runs).
	Filters []string
	// AckWait is how long a delivery may stay unacknowledged before it is
	// delivered again (default 5 min).
	AckWait time.Duration
	// MaxAckPending bounds unacknowledged deliveries (default 100,000).
	MaxAckPending int
	// PriorityGroup, when set, pins the consumer: the server delivers to
	// one reader of the group at a time, and moves the pin to another
	// reader only when the pinned one is unpinned (Unpin) or has not
	// pulled for PinnedTTL (default 4 s).
	PriorityGroup string
	PinnedTTL     time.Duration
	// AckAll makes the consumer's acknowledgement policy ack-all: Ack of a
	// delivery acknowledges it and every earlier delivery of the consumer
	// at once, so a reader that tracks which deliveries are done sends one
	// acknowledgement for many (decision 0108). A durable consumer keeps
	// the policy it was created with: an AckAll consumer needs a name of
	// its own.
	AckAll bool
	// MemoryState keeps the consumer's state — what it delivered, what is
	// acknowledged — in the servers' memory instead of a file each server
	// rewrites up to ten times a second while the consumer is busy
	// (decision 0109). A restart of the server (of every server, on a
	// cluster) loses the consumer; the next read creates it again,
	// starting after StartAfter. A reader that covers what came before
	// some sequence in another way (the runtime's take-over runs every
	// key) loses no trigger by it. Like AckAll, it needs a name of its
	// own: a durable consumer keeps the storage it was created with.
	MemoryState bool
	// StartAfter, when not 0, is the sequence after which a consumer that
	// does not exist yet starts delivering (0: from the log's first
	// event). A consumer that exists reads on from where it is.
	StartAfter uint64
	// Replaces names durable consumers this one supersedes (the same
	// reader under an earlier name): they are deleted before it is read.
	// One that does not exist, or cannot be deleted with the reader's
	// credential, is left as it is.
	Replaces []string
}

// Delivery is a message from a durable consumer.
type Delivery struct {
	Message
	msg jetstream.Msg
	// ack, when set, is what Ack does instead (OnAck).
	ack func() error
}

// Ack acknowledges the delivery: the work it triggered is done (or its
// retry is scheduled) and it need not come again. On an AckAll consumer
// it acknowledges every earlier delivery of the consumer too.
func (d Delivery) Ack() error {
	if d.ack != nil {
		return d.ack()
	}
	return d.msg.Ack()
}

// OnAck returns d whose Ack calls fn instead of acknowledging: a reader
// that acknowledges many deliveries with one (AckAll) hands its workers
// such deliveries, and acknowledges the original itself.
func (d Delivery) OnAck(fn func() error) Delivery {
	d.ack = fn
	return d
}

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
	for _, old := range opts.Replaces {
		// Best effort: a consumer left behind costs its state, not
		// correctness (nobody reads it).
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_ = l.stream.DeleteConsumer(dctx, old)
		cancel()
	}
	policy := jetstream.AckExplicitPolicy
	if opts.AckAll {
		policy = jetstream.AckAllPolicy
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       opts.Name,
		AckPolicy:     policy,
		AckWait:       opts.AckWait,
		MaxAckPending: opts.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxDeliver:    -1,
		MemoryStorage: opts.MemoryState,
	}
	switch {
	case len(opts.Filters) == 1:
		cfg.FilterSubject = opts.Filters[0]
	case len(opts.Filters) > 1:
		cfg.FilterSubjects = opts.Filters
	case opts.Filter != "":
		cfg.FilterSubject = opts.Filter
	}
	pull := []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(1024)}
	if opts.PriorityGroup != "" {
		if opts.PinnedTTL <= 0 {
			opts.PinnedTTL = 4 * time.Second
		}
		cfg.PriorityPolicy = jetstream.PriorityPolicyPinned
		cfg.PriorityGroups = []string{opts.PriorityGroup}
		cfg.PinnedTTL = opts.PinnedTTL
		// The pinned reader keeps its pin by pulling within PinnedTTL.
		pull = append(pull, jetstream.PullPriorityGroup(opts.PriorityGroup),
			jetstream.PullExpiry(opts.PinnedTTL/2))
	}
	// Bounded: a request sent while the stream elects a leader may go
	// unanswered, and the caller's next attempt may find the new one.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	cons, err := l.ensureConsumer(cctx, cfg, opts.StartAfter)
	cancel()
	if err != nil {
		return fmt.Errorf("consumer %s: %w", ShownConsumer(opts.Name), err)
	}
	it, err := cons.Messages(pull...)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", ShownConsumer(opts.Name), err)
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
			return fmt.Errorf("consumer %s: %w", ShownConsumer(opts.Name), err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("consumer %s: %w", ShownConsumer(opts.Name), err)
		}
		fn(Delivery{Message: Message{Data: msg.Data(), Sequence: meta.Sequence.Stream, Pending: meta.NumPending, Subject: msg.Subject()}, msg: msg})
	}
}

// ensureConsumer creates cfg's durable consumer, starting after
// startAfter (0: at the log's first event), or, when it exists, updates
// what may change of it (its filters, its limits) and keeps where it
// reads from.
func (l *Log) ensureConsumer(ctx context.Context, cfg jetstream.ConsumerConfig, startAfter uint64) (jetstream.Consumer, error) {
	if startAfter == 0 {
		return l.stream.CreateOrUpdateConsumer(ctx, cfg)
	}
	for {
		cur, err := l.stream.Consumer(ctx, cfg.Durable)
		switch {
		case err == nil:
			was := cur.CachedInfo().Config
			cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = was.DeliverPolicy, was.OptStartSeq, was.OptStartTime
			return l.stream.CreateOrUpdateConsumer(ctx, cfg)
		case !errors.Is(err, jetstream.ErrConsumerNotFound):
			return nil, err
		}
		fresh := cfg
		fresh.DeliverPolicy, fresh.OptStartSeq = jetstream.DeliverByStartSequencePolicy, startAfter+1
		c, err := l.stream.CreateConsumer(ctx, fresh)
		if !errors.Is(err, jetstream.ErrConsumerExists) {
			return c, err
		}
		// Another reader created it meanwhile: read it as it is.
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// Unpin releases the pin of a pinned consumer's group, so that another
// reader waiting in the group is pinned at once instead of after the
// PinnedTTL. Unpinning a consumer nobody is pinned to is not an error.
func (l *Log) Unpin(ctx context.Context, consumer, group string) error {
	err := l.stream.UnpinConsumer(ctx, consumer, group)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("unpin consumer %s: %w", ShownConsumer(consumer), err)
	}
	return nil
}
