package gate

import (
	"context"
	"sync"
	"time"

	"github.com/jetplane/jetplane/events"
)

// groupWriteTimeout bounds one group's write: the requests in it wait on
// their own contexts as well, and one that gives up before the log answers
// may still have been written (as with any write the log did not answer).
const groupWriteTimeout = 10 * time.Second

// asyncLog is a log that also pipelines entries that are independent.
type asyncLog interface {
	AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
}

// eachLog is a log that commits independent entries together with its
// other writers' (events.Log.AppendEach, decision 0069). A gate on such a
// log leaves the grouping to it, so that single-object writes share their
// group with the reconcilers' statuses and the controllers' writes.
type eachLog interface {
	AppendEach(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
}

// groupWriter commits the single-entry writes of concurrent requests
// together (decision 0051): whatever arrives while one group is being
// written goes to the log as the next group, each request answered with
// its own result. With atomic (the log fsyncs every write) a group is one
// atomic batch, one fsync for all; should the log refuse it (one entry's
// concurrency check failed, or one is a stored retry), its entries are
// written again each on its own, so each gets its own outcome and a
// conflict stays with its object. Without atomic they are pipelined:
// one round trip, each entry succeeding or failing on its own.
type groupWriter struct {
	log    Log
	each   eachLog  // set: the log groups; the writer only passes entries on
	async  asyncLog // nil: the log cannot pipeline; entries go one by one
	atomic bool

	mu      sync.Mutex
	pending []*groupEntry
	busy    bool
}

type groupEntry struct {
	entry events.Entry
	res   events.Result
	err   error
	done  chan struct{}
}

func newGroupWriter(log Log, atomic bool) *groupWriter {
	w := &groupWriter{log: log, atomic: atomic}
	w.async, _ = log.(asyncLog)
	w.each, _ = log.(eachLog)
	return w
}

// write appends e with whatever other writes are waiting, and returns its
// own outcome.
func (w *groupWriter) write(ctx context.Context, e events.Entry) (events.Result, error) {
	if w.each != nil {
		res, errs := w.each.AppendEach(ctx, []events.Entry{e})
		if errs != nil {
			return res[0], errs[0]
		}
		return res[0], nil
	}
	ge := &groupEntry{entry: e, done: make(chan struct{})}
	w.mu.Lock()
	w.pending = append(w.pending, ge)
	lead := !w.busy
	w.busy = true
	w.mu.Unlock()
	if lead {
		// This request writes groups until none is waiting; its own entry
		// is in the first.
		go w.loop()
	}
	select {
	case <-ge.done:
		return ge.res, ge.err
	case <-ctx.Done():
		return events.Result{}, ctx.Err()
	}
}

func (w *groupWriter) loop() {
	for {
		w.mu.Lock()
		n := min(len(w.pending), events.MaxBatch)
		if n == 0 {
			w.busy = false
			w.mu.Unlock()
			return
		}
		group := w.pending[:n:n]
		w.pending = w.pending[n:]
		w.mu.Unlock()
		w.flush(group)
	}
}

func (w *groupWriter) flush(group []*groupEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), groupWriteTimeout)
	defer cancel()
	defer func() {
		for _, ge := range group {
			close(ge.done)
		}
	}()
	entries := make([]events.Entry, len(group))
	for i, ge := range group {
		entries[i] = ge.entry
	}
	if len(group) == 1 || w.async == nil {
		for _, ge := range group {
			res, err := w.log.AppendBatch(ctx, []events.Entry{ge.entry})
			if err == nil {
				ge.res = res[0]
			}
			ge.err = err
		}
		return
	}
	if w.atomic {
		res, err := w.log.AppendBatch(ctx, entries)
		if err == nil {
			for i, ge := range group {
				ge.res = res[i]
			}
			return
		}
		if ctx.Err() != nil {
			for _, ge := range group {
				ge.err = err
			}
			return
		}
	}
	res, errs := w.async.AppendAsync(ctx, entries)
	for i, ge := range group {
		ge.res = res[i]
		if errs != nil {
			ge.err = errs[i]
		}
	}
}
