package projections

import (
	"context"
	"errors"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/schemas"
)

// foldBatch is how many events are decoded together before folding.
const foldBatch = 256

// errDone ends a fold once it reached its last sequence.
var errDone = errors.New("fold done")

// scanLog folds the events from..to, read by Log.Scan: ranges of the log
// are read and decoded in parallel (decoding on the range readers'
// goroutines) and apply runs on the caller's goroutine in log order.
func scanLog(ctx context.Context, log Log, from, to uint64, parallel int, apply func(*schemas.EventRecord) error, skip func(events.Message, error)) error {
	err := log.Scan(ctx, events.ScanOptions{From: from, To: to, Parallel: parallel, Prepare: func(msgs []events.Message) any {
		recs := make([]*schemas.EventRecord, len(msgs))
		for i, m := range msgs {
			rec, err := m.Record()
			if err != nil {
				skip(m, err)
				continue
			}
			recs[i] = rec
		}
		return recs
	}}, func(_ []events.Message, prepared any) error {
		for _, rec := range prepared.([]*schemas.EventRecord) {
			if rec == nil {
				continue
			}
			if err := apply(rec); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errDone) {
		return nil
	}
	return err
}

// foldLog reads the log with opts and hands every event, decoded as a
// record, to apply in log order. Decoding runs on its own goroutine, in
// parallel with apply (on the caller's goroutine) and with the log's pull
// loop: decoding and folding each cost about as much as reading, so the
// pipeline keeps every core busy during a replay. A batch is handed on as
// soon as the reader is caught up, so a follower folds each new event at
// once. apply may return errDone to end the fold without error. Events that
// do not decode (only an outside publisher could write one) cannot change
// state and are skipped, reported to skip.
func foldLog(ctx context.Context, log Log, opts events.ReadOptions, apply func(*schemas.EventRecord) error, skip func(events.Message, error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	raw := make(chan []events.Message, 8)
	decoded := make(chan []*schemas.EventRecord, 8)
	readErr := make(chan error, 1)
	go func() {
		defer close(raw)
		batch := make([]events.Message, 0, foldBatch)
		readErr <- log.Read(ctx, opts, func(m events.Message) error {
			batch = append(batch, m)
			if len(batch) == foldBatch || m.Pending == 0 {
				select {
				case raw <- batch:
				case <-ctx.Done():
					return ctx.Err()
				}
				batch = make([]events.Message, 0, events.BatchCap(m.Pending, foldBatch))
			}
			return nil
		})
	}()
	go func() {
		defer close(decoded)
		for batch := range raw {
			recs := make([]*schemas.EventRecord, 0, len(batch))
			for _, m := range batch {
				rec, err := m.Record()
				if err != nil {
					skip(m, err)
					continue
				}
				recs = append(recs, rec)
			}
			select {
			case decoded <- recs:
			case <-ctx.Done():
				return
			}
		}
	}()
	for recs := range decoded {
		for _, rec := range recs {
			if err := apply(rec); err != nil {
				cancel()
				for range decoded {
				}
				<-readErr
				if errors.Is(err, errDone) {
					return nil
				}
				return err
			}
		}
	}
	return <-readErr
}
