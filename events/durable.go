package events

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// durability makes what the log's server acknowledged durable before an
// append returns, when the log does its own fsyncs (Config.Sync, decision
// 0083): one fsync covers every append acknowledged before it began, so
// concurrent writers of any kind — single-object applies, statuses, the
// controllers' door, atomic batches — share fsyncs without waiting for
// each other's writes. Safe for concurrent use.
type durability struct {
	fn func() error

	mu sync.Mutex
	// next is the round that starts after the one running: callers that
	// arrive now wait for it, since the running one may have begun before
	// their writes were acknowledged.
	next *syncRound
	busy bool
	// failed is the first fsync error; only the loop running reads and
	// sets it (one runs at a time, handed over under mu).
	failed error

	rounds, waits atomic.Int64
}

// syncRound is one call of fn and the callers it covers.
type syncRound struct {
	done chan struct{}
	err  error
}

// wait returns once an fsync that began after the call has ended, with
// its error.
func (d *durability) wait(ctx context.Context) error {
	d.mu.Lock()
	// Counted once it has joined a round (tests wait for that).
	d.waits.Add(1)
	if d.next == nil {
		d.next = &syncRound{done: make(chan struct{})}
	}
	r := d.next
	if !d.busy {
		d.busy = true
		go d.loop()
	}
	d.mu.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop runs rounds, one at a time, while callers wait for them.
func (d *durability) loop() {
	for {
		d.mu.Lock()
		r := d.next
		if r == nil {
			d.busy = false
			d.mu.Unlock()
			return
		}
		d.next = nil
		d.mu.Unlock()
		d.rounds.Add(1)
		// A failed fsync is final: the kernel may have dropped the dirty
		// pages it could not write, so a later fsync that succeeds says
		// nothing of them. Every wait from then on fails with it.
		if d.failed == nil {
			if err := d.fn(); err != nil {
				d.failed = fmt.Errorf("%w: fsync: %w", ErrStorageUnavailable, err)
			}
		}
		r.err = d.failed
		close(r.done)
	}
}

// durable waits until what the log acknowledged so far is durable, when
// the log does its own fsyncs; at once otherwise.
func (l *Log) durable(ctx context.Context) error {
	if l.sync == nil {
		return nil
	}
	return l.sync.wait(ctx)
}

// syncStream makes a stream other than the log's durable after a write,
// when the log does its own fsyncs (Config.Sync); every says the write
// may have changed blocks before the newest (an erase).
func (l *Log) syncStream(name string, every bool) error {
	if l.syncFn == nil {
		return nil
	}
	if err := l.syncFn(name, every); err != nil {
		return fmt.Errorf("%w: fsync %s: %v", ErrStorageUnavailable, name, err)
	}
	return nil
}

// Syncs is how many fsyncs the log made (Config.Sync) and how many
// appends waited for one: their ratio is how many writes one fsync
// covered.
func (l *Log) Syncs() (syncs, waits int64) {
	if l.sync == nil {
		return 0, 0
	}
	return l.sync.rounds.Load(), l.sync.waits.Load()
}
