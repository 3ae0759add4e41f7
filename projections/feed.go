package projections

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
)

// Feed hands out every change of the log after a sequence, each with the
// object as it stood right after it: the subscriptions' source and
// `jetplane subscribe`'s. Recent changes come from the live store's watch
// window; older ones are folded from the log (from the newest snapshot at
// or before the start), so a feed may start anywhere in history.
type Feed struct {
	Store *Store
	Log   Log
	// Blobs holds the snapshots; nil folds from the log's first event.
	Blobs Blobs
}

// FeedOptions narrows a feed read.
type FeedOptions struct {
	// From is the sequence after which changes are read (0: from the first
	// event of the log).
	From uint64
	// Follow keeps reading new changes until the context ends; without it
	// the read ends once it has reached what the store held when it began.
	Follow bool
	// Max ends the read after this many changes (0: no limit).
	Max int
}

// errFeedFull ends a read that reached Max.
var errFeedFull = errors.New("feed read reached its maximum")

// Read calls fn with every change after opts.From in log order. A change
// of a deleted object carries the object's last state. fn's error ends the
// read and is returned.
func (f Feed) Read(ctx context.Context, opts FeedOptions, fn func(Change) error) error {
	n := 0
	emit := func(c Change) error {
		if err := fn(c); err != nil {
			return err
		}
		n++
		if opts.Max > 0 && n >= opts.Max {
			return errFeedFull
		}
		return nil
	}
	at := opts.From
	for {
		err := f.live(ctx, at, opts.Follow, emit, &at)
		switch {
		case errors.Is(err, errFeedFull):
			return nil
		case errors.Is(err, ErrGone):
			// Older than the window (or from the log's start): fold the log
			// up to what the store holds now, then try the window again.
			if err := f.fold(ctx, at, emit, &at); err != nil {
				if errors.Is(err, errFeedFull) {
					return nil
				}
				return err
			}
			if !opts.Follow && at >= f.Store.Seq() {
				return nil
			}
		case errors.Is(err, ErrCatchingUp):
			// The store is still replaying the log; try again shortly.
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		case err != nil:
			return err
		default:
			return nil
		}
	}
}

// live reads from the store's watch window. It returns ErrGone when from
// is older than the window (or 0), nil when a read that does not follow has
// handed out every change up to the store's sequence as it began. at tracks
// the last sequence handed out.
func (f Feed) live(ctx context.Context, from uint64, follow bool, emit func(Change) error, at *uint64) error {
	if from == 0 {
		return ErrGone
	}
	end := f.Store.Seq()
	if !follow && from >= end {
		return nil
	}
	// Watch puts every change after from that the store already holds into
	// the channel before it returns, so a read that does not follow is done
	// once the channel is empty.
	ch, stop, err := f.Store.Watch(Query{}, from)
	if err != nil {
		return err
	}
	defer stop()
	for {
		var c Change
		var ok bool
		if follow {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case c, ok = <-ch:
			}
		} else {
			select {
			case c, ok = <-ch:
			default:
				*at = end
				return nil
			}
		}
		if !ok {
			// The watcher fell behind; go on from where it got to.
			return ErrGone
		}
		if !follow && c.Sequence > end {
			*at = end
			return nil
		}
		if err := emit(c); err != nil {
			return err
		}
		*at = c.Sequence
	}
}

// fold rebuilds the state at from and folds the log after it up to the
// store's current sequence, handing out each change.
func (f Feed) fold(ctx context.Context, from uint64, emit func(Change) error, at *uint64) error {
	to := f.Store.Seq()
	if to <= from {
		return nil
	}
	st := NewStore(StoreOptions{WatchWindow: 1})
	st.BeginBulk()
	if from > 0 {
		base, err := StateAt(ctx, f.Log, f.Blobs, from)
		if err != nil {
			return err
		}
		st = base
	}
	err := scanLog(ctx, f.Log, from+1, to, 0, func(ev *schemas.EventRecord) error {
		k := KeyOf(ev.GetKey())
		prev := st.GetRecord(k)
		st.Apply(ev)
		next := st.GetRecord(k)
		*at = ev.GetSequence()
		if prev == next {
			return nil // a stale observation or an event for nothing
		}
		c := newChange(k, prev, next, ev)
		return emit(c.decode(c.typ))
	}, func(events.Message, error) {})
	if err != nil {
		return fmt.Errorf("changes after %d: %w", from, err)
	}
	*at = max(*at, to)
	return nil
}
