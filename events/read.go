package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/jetplane/jetplane/schemas"
)

// Handler receives events in log order. It owns ev. Returning an error stops
// the read and is returned by it; returning ErrStop stops it cleanly.
type Handler func(ev *schemas.Event) error

// ErrStop, returned by a Handler, ends a read without error.
var ErrStop = errors.New("stop reading")

// ReadOptions narrows a read.
type ReadOptions struct {
	// From is the first sequence to read; 0 or 1 reads from the start.
	From uint64
	// Filter is a stored-subject filter (KeyFilter, PartitionFilter); empty
	// reads every event.
	Filter string
	// Follow keeps reading new events until the context ends. Without it the
	// read stops at the last event that matched when it began.
	Follow bool
}

// Read delivers events to fn in log order.
func (l *Log) Read(ctx context.Context, opts ReadOptions, fn Handler) error {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: time.Minute}
	if opts.From > 1 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = opts.From
	}
	if opts.Filter != "" {
		cfg.FilterSubjects = []string{opts.Filter}
	}
	cons, err := l.stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	if !opts.Follow && cons.CachedInfo().NumPending == 0 {
		return nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(4096))
	if err != nil {
		return fmt.Errorf("read log: %w", err)
	}
	defer it.Stop()
	// Messages blocks without a context; stopping the iterator unblocks it.
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				if opts.Follow {
					return ctx.Err()
				}
				return fmt.Errorf("read log: %w", ctx.Err())
			}
			return fmt.Errorf("read log: %w", err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		ev, err := Decode(msg.Data(), meta.Sequence.Stream)
		if err != nil {
			return err
		}
		if err := fn(ev); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
		if !opts.Follow && meta.NumPending == 0 {
			return nil
		}
	}
}

// Decode parses an event payload as stored in the log. seq is the log
// sequence it was stored at.
func Decode(data []byte, seq uint64) (*schemas.Event, error) {
	ev := new(schemas.Event)
	if err := proto.Unmarshal(data, ev); err != nil {
		return nil, fmt.Errorf("decode event %d: %w", seq, err)
	}
	if ev.GetKey() == nil {
		return nil, fmt.Errorf("decode event %d: no key", seq)
	}
	ev.Sequence = seq
	return ev, nil
}

// History returns every event of one key, oldest first.
func (l *Log) History(ctx context.Context, key *schemas.ObjectKey) ([]*schemas.Event, error) {
	var out []*schemas.Event
	err := l.Read(ctx, ReadOptions{Filter: KeyFilter(key)}, func(ev *schemas.Event) error {
		out = append(out, ev)
		return nil
	})
	return out, err
}

// SequenceAt is the sequence of the last event stored at or before t (0 if
// none was).
func (l *Log) SequenceAt(ctx context.Context, t time.Time) (uint64, error) {
	cons, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		// The server's start time is inclusive; everything stored at t
		// belongs to the state at t.
		OptStartTime: ptr(t.Add(time.Nanosecond)),
		HeadersOnly:  true,
	})
	if err != nil {
		return 0, fmt.Errorf("find sequence at %s: %w", t.Format(time.RFC3339Nano), err)
	}
	if cons.CachedInfo().NumPending == 0 {
		return l.LastSequence(ctx)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		return 0, fmt.Errorf("find sequence at %s: %w", t.Format(time.RFC3339Nano), err)
	}
	meta, err := msg.Metadata()
	if err != nil {
		return 0, err
	}
	return meta.Sequence.Stream - 1, nil
}

func ptr[T any](v T) *T { return &v }
