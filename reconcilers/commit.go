package reconcilers

import (
	"context"
	"sync"
	"time"

	"github.com/jetplane/jetplane/events"
)

// statusWriteTimeout bounds one write of statuses: a write sent while the
// log elects a leader goes unanswered, and waiting out the client's
// default (15 s) would hold every key in it long after the election. A
// write that landed all the same makes the next run's write conflict and
// that run read it.
const statusWriteTimeout = 5 * time.Second

// committer writes the statuses of many keys' runs together (group
// commit): whatever runs finished while the previous write was under way
// goes to the log as one atomic batch, one round trip and, with
// --sync=always, one fsync, instead of one each. Should the batch be
// refused (one entry's failed concurrency check rejects it whole), each
// entry is written again on its own, pipelined, and gets its own outcome;
// entries keep their event ids, so one that landed with the batch is
// recognised as a duplicate. A batch the log did not answer in time fails
// every entry in it.
//
// The atomic batch is for a log that fsyncs every write. Without that
// (the default durability) the statuses are written pipelined instead,
// still one round trip: the server stages an atomic batch of a
// single-replica file stream in a file store of its own, made on disk for
// each batch (a directory and its metadata files): a sixth of a burst's
// CPU when the disk is busy (decision 0027), for nothing when nothing is
// fsynced per write.
type committer struct {
	log Log
	// group writes statuses as atomic batches (one fsync); otherwise
	// they are pipelined.
	group bool

	mu      sync.Mutex
	pending []commit
	kick    chan struct{}
	closing bool
	done    chan struct{}
}

// commit is one status to write, and what to do with the outcome. done
// runs on the committer's goroutine when the write succeeded, else on its
// own goroutine (it may call the log).
type commit struct {
	entry events.Entry
	done  func(events.Result, error)
}

// eachLog is a log that commits independent entries together with its
// other writers' (events.Log.AppendEach, decision 0069): statuses then
// share their group with the gate's single-object writes, and the log
// decides between an atomic batch and a pipelined one.
type eachLog interface {
	AppendEach(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
}

func newCommitter(log Log, group bool) *committer {
	return &committer{log: log, group: group, kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// submit queues a write. It does not block.
func (cm *committer) submit(c commit) {
	cm.mu.Lock()
	cm.pending = append(cm.pending, c)
	cm.mu.Unlock()
	select {
	case cm.kick <- struct{}{}:
	default:
	}
}

// run writes until close is called and nothing is left.
func (cm *committer) run() {
	defer close(cm.done)
	for {
		cm.mu.Lock()
		n := min(len(cm.pending), events.MaxBatch)
		batch := cm.pending[:n:n]
		cm.pending = cm.pending[n:]
		if len(cm.pending) == 0 {
			cm.pending = nil
		}
		closing := cm.closing
		cm.mu.Unlock()
		if n > 0 {
			cm.write(batch)
			continue
		}
		if closing {
			return
		}
		<-cm.kick
	}
}

// close waits until every write submitted has been made; submit must not
// be called after.
func (cm *committer) close() {
	cm.mu.Lock()
	cm.closing = true
	cm.mu.Unlock()
	select {
	case cm.kick <- struct{}{}:
	default:
	}
	<-cm.done
}

func (cm *committer) write(batch []commit) {
	ctx, cancel := context.WithTimeout(context.Background(), statusWriteTimeout)
	defer cancel()
	entries := make([]events.Entry, len(batch))
	for i, c := range batch {
		entries[i] = c.entry
	}
	if each, ok := cm.log.(eachLog); ok {
		res, errs := each.AppendEach(ctx, entries)
		for i, c := range batch {
			var err error
			if errs != nil {
				err = errs[i]
			}
			cm.deliver(c, res[i], err)
		}
		return
	}
	if len(batch) == 1 {
		res, err := cm.log.Append(ctx, entries[0])
		cm.deliver(batch[0], res, err)
		return
	}
	if !cm.group {
		cm.pipelined(ctx, batch, entries)
		return
	}
	res, err := cm.log.AppendBatch(ctx, entries)
	switch {
	case err == nil:
		for i, c := range batch {
			c.done(res[i], nil)
		}
		return
	case ctx.Err() != nil:
		// The log did not answer in time: writing each again would only
		// wait as long. Failed runs, retried with backoff; a batch that
		// landed all the same makes their next writes conflict.
		for _, c := range batch {
			cm.deliver(c, events.Result{}, err)
		}
		return
	}
	cm.pipelined(ctx, batch, entries)
}

// pipelined writes each entry on its own, without waiting for one before
// sending the next; each gets its own outcome.
func (cm *committer) pipelined(ctx context.Context, batch []commit, entries []events.Entry) {
	res, errs := cm.log.AppendAsync(ctx, entries)
	for i, c := range batch {
		var err error
		if errs != nil {
			err = errs[i]
		}
		cm.deliver(c, res[i], err)
	}
}

func (cm *committer) deliver(c commit, res events.Result, err error) {
	if err == nil {
		c.done(res, nil)
		return
	}
	go c.done(res, err)
}
