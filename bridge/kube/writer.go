package kube

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
)

// item is one entry of a cluster's queue: an event to append, or a barrier
// that the writer closes once everything queued before it is appended.
type item struct {
	ev      *schemas.Event
	barrier chan struct{}
}

// writer appends a cluster's queued events in queue order. One writer per
// cluster; it is the only reader of its queue.
type writer struct {
	log      Log
	queue    <-chan item
	status   *tracker
	logger   *slog.Logger
	maxBatch int
	// retry is the first pause after a failed append; it doubles up to
	// maxRetry.
	retry, maxRetry time.Duration
}

// run appends until the queue is closed and drained, or ctx ends (whatever
// is still queued is then lost; the next start's relist recovers the
// objects' current state).
func (w *writer) run(ctx context.Context) {
	batch := make([]events.Entry, 0, w.maxBatch)
	for {
		var it item
		var ok bool
		select {
		case it, ok = <-w.queue:
		case <-ctx.Done():
			return
		}
		if !ok {
			return
		}
		batch = batch[:0]
		var barrier chan struct{}
		// Take what is waiting, up to a batch, without waiting for more:
		// a lone event is appended at once, a burst in few round trips.
	collect:
		for {
			if it.barrier != nil {
				barrier = it.barrier
				break
			}
			batch = append(batch, events.Entry{Event: it.ev, Expect: events.AnyVersion})
			if len(batch) == w.maxBatch {
				break
			}
			select {
			case it, ok = <-w.queue:
				if !ok {
					break collect
				}
			default:
				break collect
			}
		}
		w.write(ctx, batch)
		if barrier != nil {
			close(barrier)
		}
		if !ok {
			return
		}
	}
}

// write appends entries, retrying those that failed for a reason that may
// pass (the log unreachable, a timeout) until they are stored or ctx ends.
// Entries are pipelined in order; a retried entry can land after a later
// entry of the same key that succeeded, and the fold's stale check keeps
// the newer state.
func (w *writer) write(ctx context.Context, entries []events.Entry) {
	pause := w.retry
	for len(entries) > 0 {
		res, errs := w.log.AppendAsync(ctx, entries)
		var retry []events.Entry
		var stored, dups int
		var lastErr error
		for i, e := range entries {
			var err error
			if errs != nil {
				err = errs[i]
			}
			switch {
			case err == nil && res[i].Duplicate, errors.Is(err, events.ErrDuplicate):
				dups++
			case err == nil:
				stored++
			case errors.Is(err, events.ErrTooLarge):
				// It never fits; the object stays as last recorded.
				w.status.dropped(err)
				w.logger.Error("observed object too large for the log; not recorded", "key", e.Event.GetKey().String(), "id", e.Event.GetId(), "err", err)
			case ctx.Err() != nil:
				return
			default:
				retry = append(retry, e)
				lastErr = err
			}
		}
		w.status.appended(stored, dups)
		if len(retry) == 0 {
			return
		}
		w.status.appendFailed(lastErr)
		w.logger.Warn("appending observed changes failed; retrying", "events", len(retry), "in", pause, "err", lastErr)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, w.maxRetry)
		entries = retry
	}
}
