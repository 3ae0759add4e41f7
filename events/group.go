package events

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// groupWriteTimeout bounds one group's write. Callers wait on their own
// contexts as well; one that gives up before the log answers may still
// have been written, as with any write the log did not answer.
const groupWriteTimeout = 10 * time.Second

// AppendEach appends entries that do not depend on each other, each with
// its own outcome. With Config.AtomicGroups (for a server that fsyncs
// every write) they are committed together with whatever other callers'
// entries are waiting (group commit, decision 0069): the gate's
// single-object writes, the reconcilers' statuses and the controllers'
// door all pass here, so concurrent writers of any kind share one fsync.
//
// While one group is being written, the entries that arrive form the
// next; a group of at least Config.MinAtomicGroup entries is one atomic
// batch: one round trip and one fsync for all (a smaller one is
// pipelined, which costs less than the server's staging of a batch).
// Should the log refuse it — an entry's concurrency check failed, or one
// is a stored retry — its entries are written again pipelined, each
// with its own outcome, so a conflict stays with its entry and the others
// land (entries keep their event ids, so none is stored twice). Without
// AtomicGroups entries are pipelined at once (AppendAsync): with nothing
// fsynced per write, waiting for the group before costs more than it
// saves.
//
// results[i] and errs[i] are entry i's; errs is nil when every entry was
// stored. An entry is durable as the log's server promises once its
// outcome is returned.
func (l *Log) AppendEach(ctx context.Context, entries []Entry) (results []Result, errs []error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if !l.group.atomic {
		// Pipelined writes need no group: they share the connection's
		// writes already, and a group in flight would only make the next
		// callers wait for its acknowledgements.
		if len(entries) == 1 {
			// Append waits for the acknowledgement at most the client's
			// timeout: a server that cannot write its store does not
			// answer, and the caller's context may have no deadline.
			r, err := l.Append(ctx, entries[0])
			if err != nil {
				return []Result{r}, []error{err}
			}
			return []Result{r}, nil
		}
		return l.AppendAsync(ctx, entries)
	}
	w := &groupWait{entries: entries, done: make(chan struct{})}
	l.group.add(l, w)
	select {
	case <-w.done:
		return w.results, w.errs
	case <-ctx.Done():
		errs = make([]error, len(entries))
		for i := range errs {
			errs[i] = ctx.Err()
		}
		return make([]Result, len(entries)), errs
	}
}

// Groups is how many groups of more than one entry AppendEach wrote, and
// how many entries they held.
func (l *Log) Groups() (groups, entries int64) {
	return l.group.groups.Load(), l.group.grouped.Load()
}

// RefusedGroups is how many groups the log refused as a whole (a failed
// concurrency check or a stored retry in them) and AppendEach wrote again
// entry by entry.
func (l *Log) RefusedGroups() int64 { return l.group.refused.Load() }

// grouper gathers AppendEach's callers into groups. Safe for concurrent
// use; its zero value is ready.
type grouper struct {
	atomic    bool
	minAtomic int // fewer entries than this are pipelined even when atomic
	// groups and grouped count the groups of more than one entry written
	// and the entries in them, refused those the log refused as a whole
	// and that were written again entry by entry (for tests and metrics).
	groups, grouped, refused atomic.Int64

	mu      sync.Mutex
	pending []*groupWait
	busy    bool
}

// groupWait is one caller's entries and, once written, their outcomes.
type groupWait struct {
	entries []Entry
	results []Result
	errs    []error
	done    chan struct{}
}

func (g *grouper) add(l *Log, w *groupWait) {
	g.mu.Lock()
	g.pending = append(g.pending, w)
	lead := !g.busy
	g.busy = true
	g.mu.Unlock()
	if lead {
		// Writes groups until none is waiting.
		go g.loop(l)
	}
}

func (g *grouper) loop(l *Log) {
	for {
		g.mu.Lock()
		// A group takes whole callers up to MaxBatch entries (a caller
		// with more is a group of its own, written in chunks).
		n, size := 0, 0
		for n < len(g.pending) && (n == 0 || size+len(g.pending[n].entries) <= MaxBatch) {
			size += len(g.pending[n].entries)
			n++
		}
		if n == 0 {
			g.busy = false
			g.pending = nil
			g.mu.Unlock()
			return
		}
		group := g.pending[:n:n]
		g.pending = g.pending[n:]
		g.mu.Unlock()
		g.write(l, group, size)
	}
}

// write writes one group and answers its callers.
func (g *grouper) write(l *Log, group []*groupWait, size int) {
	ctx, cancel := context.WithTimeout(context.Background(), groupWriteTimeout)
	defer cancel()
	entries := group[0].entries
	if len(group) > 1 {
		entries = make([]Entry, 0, size)
		for _, w := range group {
			entries = append(entries, w.entries...)
		}
	}
	if len(entries) > 1 {
		g.groups.Add(1)
		g.grouped.Add(int64(len(entries)))
	}
	results, errs := g.append(ctx, l, entries)
	for _, w := range group {
		n := len(w.entries)
		w.results = results[:n:n]
		if errs != nil {
			for _, err := range errs[:n] {
				if err != nil {
					w.errs = errs[:n:n]
					break
				}
			}
		}
		results = results[n:]
		if errs != nil {
			errs = errs[n:]
		}
		close(w.done)
	}
}

func (g *grouper) append(ctx context.Context, l *Log, entries []Entry) ([]Result, []error) {
	if len(entries) == 1 {
		r, err := l.Append(ctx, entries[0])
		if err != nil {
			return []Result{r}, []error{err}
		}
		return []Result{r}, nil
	}
	if g.atomic && len(entries) >= g.minAtomic && len(entries) <= MaxBatch {
		results, err := l.AppendBatch(ctx, entries)
		switch {
		case err == nil:
			return results, nil
		case ctx.Err() != nil:
			// The log did not answer in time: writing each again would
			// only wait as long.
			errs := make([]error, len(entries))
			for i := range errs {
				errs[i] = err
			}
			return make([]Result, len(entries)), errs
		}
		// Refused: each entry on its own.
		g.refused.Add(1)
	}
	return l.AppendAsync(ctx, entries)
}
