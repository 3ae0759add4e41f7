package events

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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
	// AckRuns acknowledges runs of deliveries with one message: the
	// consumer acknowledges everything up to the sequence it is sent
	// (the all-below policy, which a durable consumer cannot change
	// later: use a name that never had the explicit one), and Ack only
	// marks a delivery done. Once every delivery this read handed over up
	// to a sequence is done, that sequence is acknowledged, at most once
	// every AckDelay (default 10 ms). A delivery not yet done holds back
	// the acknowledgement of every later one.
	AckRuns  bool
	AckDelay time.Duration
}

// Delivery is a message from a durable consumer.
type Delivery struct {
	Message
	msg jetstream.Msg
	// run is the delivery's place in its read's acknowledgements when
	// the consumer acknowledges runs (ConsumerOptions.AckRuns).
	run *runAcks
	at  *pendingAck
}

// Ack acknowledges the delivery: the work it triggered is done (or its
// retry is scheduled) and it need not come again. With AckRuns, the
// acknowledgement is sent with the run it ends, later.
func (d Delivery) Ack() error {
	if d.run != nil {
		d.run.done(d.at)
		return nil
	}
	return d.msg.Ack()
}

// runAcks acknowledges the deliveries of one read of an all-below
// consumer: out holds those handed over and not yet acknowledged, in
// stream order; once a prefix of them is done, its last message is
// acknowledged, which covers the whole prefix on the server.
type runAcks struct {
	delay time.Duration

	mu    sync.Mutex
	out   []*pendingAck
	ready jetstream.Msg // the last message of the done prefix, not yet sent
	armed bool          // a send of ready is scheduled
}

type pendingAck struct {
	seq  uint64
	msg  jetstream.Msg
	done bool
}

// add records a delivery handed over, in stream order: a delivery made
// again (a lower sequence than the last) takes its place among the
// others, so that no acknowledgement covers it before it is done.
func (r *runAcks) add(seq uint64, msg jetstream.Msg) *pendingAck {
	p := &pendingAck{seq: seq, msg: msg}
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.out)
	for i > 0 && r.out[i-1].seq > seq {
		i--
	}
	r.out = slices.Insert(r.out, i, p)
	return p
}

// done marks p done and, once the deliveries before it are too, schedules
// the acknowledgement of the done prefix.
func (r *runAcks) done(p *pendingAck) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	n := 0
	for n < len(r.out) && r.out[n].done {
		n++
	}
	if n == 0 {
		return
	}
	r.ready = r.out[n-1].msg
	clear(r.out[:n])
	r.out = r.out[n:]
	if !r.armed {
		r.armed = true
		time.AfterFunc(r.delay, r.send)
	}
}

func (r *runAcks) send() {
	r.mu.Lock()
	m := r.ready
	r.ready, r.armed = nil, false
	r.mu.Unlock()
	if m != nil {
		_ = m.Ack()
	}
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
	var run *runAcks
	policy := jetstream.AckExplicitPolicy
	if opts.AckRuns {
		policy = jetstream.AckAllPolicy
		if opts.AckDelay <= 0 {
			opts.AckDelay = 10 * time.Millisecond
		}
		run = &runAcks{delay: opts.AckDelay}
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       opts.Name,
		AckPolicy:     policy,
		AckWait:       opts.AckWait,
		MaxAckPending: opts.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxDeliver:    -1,
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
	cons, err := l.stream.CreateOrUpdateConsumer(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("consumer %s: %w", opts.Name, err)
	}
	it, err := cons.Messages(pull...)
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
		d := Delivery{Message: Message{Data: msg.Data(), Sequence: meta.Sequence.Stream, Pending: meta.NumPending, Subject: msg.Subject()}, msg: msg}
		if run != nil {
			d.run, d.at = run, run.add(meta.Sequence.Stream, msg)
		}
		fn(d)
	}
}

// Unpin releases the pin of a pinned consumer's group, so that another
// reader waiting in the group is pinned at once instead of after the
// PinnedTTL. Unpinning a consumer nobody is pinned to is not an error.
func (l *Log) Unpin(ctx context.Context, consumer, group string) error {
	err := l.stream.UnpinConsumer(ctx, consumer, group)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("unpin consumer %s: %w", consumer, err)
	}
	return nil
}
