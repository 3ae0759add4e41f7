package events

import (
	"context"
	"fmt"
)

// ScanOptions narrows a Scan.
type ScanOptions struct {
	// From is the first sequence to read; 0 or 1 reads from the start.
	From uint64
	// To is the last sequence to read; 0 reads to the log's last event as
	// the scan begins.
	To uint64
	// Range is how many sequences one reader covers (default 131072).
	Range uint64
	// Parallel is how many ranges are read, and prepared, at once
	// (default 2).
	Parallel int
	// Prepare, when set, runs on each chunk of a range as it arrives, on
	// the goroutine reading that range, so ranges are prepared in parallel
	// (a replay decodes here). What it returns is handed to fn with the
	// chunk.
	Prepare func([]Message) any
}

// scanChunk is how many messages a range reader hands on at a time.
const scanChunk = 1024

// Scan reads the events From..To over disjoint sequence ranges, Parallel
// ranges at a time, each on its own server-side reader, and hands them to
// fn in chunks in log order, on the caller's goroutine. It is the fast
// path for a bounded read of a long stretch of the log (a replay): the
// server delivers ranges in parallel, and Prepare runs on them in
// parallel, while fn sees one ordered log. Each range's reader outlives
// leader elections as Read's does. fn owns the chunk; returning an error
// from it stops the scan and is returned by it.
func (l *Log) Scan(ctx context.Context, opts ScanOptions, fn func(chunk []Message, prepared any) error) error {
	if opts.Range == 0 {
		opts.Range = 128 << 10
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 2
	}
	if opts.From == 0 {
		opts.From = 1
	}
	if opts.To == 0 {
		last, err := l.LastSequence(ctx)
		if err != nil {
			return fmt.Errorf("scan log: %w", err)
		}
		opts.To = last
	}
	if opts.From > opts.To {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type chunk struct {
		msgs     []Message
		prepared any
	}
	type job struct {
		from, to uint64
		out      chan chunk // closed when the range is done
		err      chan error // the range's outcome, after out is closed
	}
	jobs := make(chan job)
	// ranges holds each range's job in log order; its capacity bounds how
	// far reading runs ahead of fn.
	ranges := make(chan job, opts.Parallel)
	go func() {
		defer close(jobs)
		defer close(ranges)
		for from := opts.From; ; {
			to := min(from+opts.Range-1, opts.To)
			j := job{from: from, to: to, out: make(chan chunk, int(opts.Range/scanChunk)+1), err: make(chan error, 1)}
			select {
			case ranges <- j:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
			if to == opts.To {
				return
			}
			from = to + 1
		}
	}()
	for range opts.Parallel {
		go func() {
			for j := range jobs {
				err := l.readRange(ctx, j.from, j.to, opts.To, func(msgs []Message) {
					c := chunk{msgs: msgs}
					if opts.Prepare != nil {
						c.prepared = opts.Prepare(msgs)
					}
					select {
					case j.out <- c:
					case <-ctx.Done():
					}
				})
				close(j.out)
				j.err <- err
			}
		}()
	}
	for j := range ranges {
		for c := range j.out {
			if err := fn(c.msgs, c.prepared); err != nil {
				return err
			}
		}
		if err := <-j.err; err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("scan log: %w", err)
	}
	return nil
}
