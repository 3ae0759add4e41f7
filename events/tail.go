package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetplane/jetplane/internal/retry"
)

// tail follows a stream in order with an ephemeral consumer, and goes on
// from the message after the last one it returned, on a new consumer,
// whenever the read fails: the consumer's server died (the stream's leader
// in a cluster), heartbeats stopped, or messages were dropped. Each
// attempt to create a consumer is bounded and the next follows quickly, so
// a read resumes within about a second of the stream having a leader
// again. (An ordered consumer retries by itself, but with a backoff that
// grows to ten seconds and attempts that wait as long: after a leader
// election its readers could stall for tens of seconds.)
type tail struct {
	js     jetstream.JetStream
	stream string
	cfg    jetstream.ConsumerConfig // as for the first consumer
	pull   []jetstream.PullMessagesOpt
	// attempt bounds one attempt to create a consumer.
	attempt time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	it     jetstream.MessagesContext
	stop   func() bool
	name   string
	next   uint64 // stream sequence to go on from (0: as cfg says)
	dseq   uint64 // consumer sequence of the last message returned
	// pending is how many messages the first consumer had to deliver
	// when created.
	pending uint64
}

// openTail creates the first consumer, retrying attempts that time out
// until ctx ends; any other failure is returned at once, so that a caller
// learns of a missing stream or a bad filter.
func openTail(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig, attempt time.Duration, pull ...jetstream.PullMessagesOpt) (*tail, error) {
	return openTailWithin(ctx, ctx, js, stream, cfg, attempt, pull...)
}

// openTailWithin is openTail whose first open gives up when within ends
// (the read itself lives until ctx ends): a caller with a deadline, such
// as a join, gets an error to retry and report instead of waiting for as
// long as the server cannot place the consumer.
func openTailWithin(within, ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig, attempt time.Duration, pull ...jetstream.PullMessagesOpt) (*tail, error) {
	cfg.AckPolicy = jetstream.AckNonePolicy
	cfg.MemoryStorage = true
	cfg.Replicas = 1
	if cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = time.Minute
	}
	t := &tail{js: js, stream: stream, cfg: cfg, pull: pull, attempt: attempt}
	t.ctx, t.cancel = context.WithCancel(ctx)
	if err := t.retry(within, true); err != nil {
		t.cancel()
		return nil, err
	}
	return t, nil
}

func (t *tail) open(bound time.Duration) error {
	cfg := t.cfg
	// Named here, so that a consumer whose creation was answered too late
	// can still be removed.
	cfg.Name = nuid.Next()
	if t.next > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = t.next
		cfg.OptStartTime = nil
	}
	ctx, cancel := context.WithTimeout(t.ctx, bound)
	defer cancel()
	cons, err := t.js.CreateConsumer(ctx, t.stream, cfg)
	if err != nil {
		if !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.remove(cfg.Name)
		}
		return fmt.Errorf("read %s: %w", t.stream, err)
	}
	it, err := cons.Messages(t.pull...)
	if err != nil {
		t.remove(cons.CachedInfo().Name)
		return fmt.Errorf("read %s: %w", t.stream, err)
	}
	t.it, t.name, t.dseq = it, cons.CachedInfo().Name, 0
	if t.next == 0 {
		t.pending = cons.CachedInfo().NumPending
	}
	// When the read ends, the consumer goes at once, even if Next is not
	// called again (a reader that stopped reading).
	name := t.name
	t.stop = context.AfterFunc(t.ctx, func() {
		it.Stop()
		t.remove(name)
	})
	return nil
}

// remove deletes a consumer given up on, in the background; if that
// fails too, the server removes it once inactive.
func (t *tail) remove(name string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), 5*time.Second)
		defer cancel()
		_ = t.js.DeleteConsumer(ctx, t.stream, name)
	}()
}

// close stops the current consumer's read and removes it.
func (t *tail) close() {
	if t.it == nil {
		return
	}
	if t.stop() { // else the read's end stopped and removed it
		t.it.Stop()
		t.remove(t.name)
	}
	t.it = nil
}

// Stop ends the read: Next returns, and the consumer is removed. It may be
// called from any goroutine.
func (t *tail) Stop() { t.cancel() }

// Next returns the next message and its metadata, waiting for it. It
// returns an error only when the context ends or the stream is gone.
func (t *tail) Next() (jetstream.Msg, *jetstream.MsgMetadata, error) {
	for {
		if t.it == nil {
			if err := t.retry(t.ctx, false); err != nil {
				return nil, nil, err
			}
		}
		msg, err := t.it.Next()
		if err == nil {
			meta, merr := msg.Metadata()
			if merr == nil && meta.Sequence.Consumer == t.dseq+1 {
				t.dseq = meta.Sequence.Consumer
				t.next = meta.Sequence.Stream + 1
				return msg, meta, nil
			}
			// A gap (messages dropped on the way): read again from the
			// last one returned.
		}
		t.close()
		// A pause, so that a read failing at once does not spin.
		if !retry.Sleep(t.ctx, 50*time.Millisecond) {
			return nil, nil, t.ctx.Err()
		}
	}
}

// retry creates a consumer going on from the last message returned,
// until it succeeds or the context ends. An attempt that timed out makes
// the next one longer (up to four times the first), for a server too
// loaded to answer within the first bound. Other failures are retried too
// (the stream may have no leader for a while), except on the first
// creation, where they are returned: a missing stream or a bad filter.
func (t *tail) retry(within context.Context, first bool) error {
	bound := t.attempt
	rctx, stop := context.WithCancel(t.ctx)
	defer stop()
	defer context.AfterFunc(within, stop)()
	return retry.Do(rctx, retry.Constant(100*time.Millisecond), nil, func(int) error {
		err := t.open(bound)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, context.DeadlineExceeded):
			bound = min(2*bound, 4*t.attempt)
		case first || errors.Is(err, jetstream.ErrStreamNotFound):
			return retry.Permanent(err)
		}
		return err
	})
}
