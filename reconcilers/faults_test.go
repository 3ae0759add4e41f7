package reconcilers_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/queue"
)

// flakyLog is the log with status writes failing while down is set, as
// they do while JetStream has no leader.
type flakyLog struct {
	*events.Log
	down atomic.Bool
}

var errLogDown = errors.New("injected: jetstream not available")

func (f *flakyLog) Append(ctx context.Context, e events.Entry) (events.Result, error) {
	if f.down.Load() {
		return events.Result{}, errLogDown
	}
	return f.Log.Append(ctx, e)
}

func (f *flakyLog) AppendBatch(ctx context.Context, es []events.Entry) ([]events.Result, error) {
	if f.down.Load() {
		return nil, errLogDown
	}
	return f.Log.AppendBatch(ctx, es)
}

func (f *flakyLog) AppendAsync(ctx context.Context, es []events.Entry) ([]events.Result, []error) {
	if f.down.Load() {
		errs := make([]error, len(es))
		for i := range errs {
			errs[i] = errLogDown
		}
		return make([]events.Result, len(es)), errs
	}
	return f.Log.AppendAsync(ctx, es)
}

// A run whose status cannot be written failed: it is retried with the
// key's backoff, growing while the outage lasts, and does not call the
// reconciler (and its outside system) in a tight loop.
func TestFailedStatusWriteBacksOff(t *testing.T) {
	var flaky *flakyLog
	c := &counter{runs: map[string]int{}}
	e := startWith(t, queue.Config{BaseDelay: 20 * time.Millisecond, MaxDelay: time.Minute},
		func(l *events.Log) reconcilers.Log { flaky = &flakyLog{Log: l}; return flaky }, c)
	e.apply(t, widget("w0", "s"))
	eventually(t, "w0 Ready", func() bool { return ready(e.store, "w0") })
	flaky.down.Store(true)
	before := c.fewest(1)
	e.apply(t, widget("w0", "m")) // the gate writes; the runtime cannot
	eventually(t, "a run on the change", func() bool { return c.fewest(1) > before })
	time.Sleep(1500 * time.Millisecond) // the outage: how many runs does it cost?
	during := c.fewest(1) - before
	// With backoff from 20 ms doubling (jitter takes up to half off),
	// 1.5 s hold at most 8 runs; a tight loop makes hundreds.
	if during > 12 {
		t.Fatalf("%d runs in 1.5 s of failing status writes; want backoff (at most 12)", during)
	}
	flaky.down.Store(false)
	eventually(t, "w0 Ready at generation 2 once the log is back", func() bool {
		return ready(e.store, "w0") && e.store.Get(key("w0")).Metadata.Generation == 2
	})
	t.Logf("%d runs during the outage", during)
}

// droppingLog's partition reads can end with a delivery dropped on the
// way, as a read that fails drops what the client had buffered: the log
// sends it again only after the consumer's AckWait (5 minutes).
type droppingLog struct {
	*events.Log
	drop atomic.Bool // drop the next delivery and end its read
	// runs reads the consumers acknowledging runs of deliveries
	// (events.ConsumerOptions.AckRuns), as controllers do.
	runs bool
}

var errReadEnded = errors.New("injected: read ended with deliveries buffered")

func (l *droppingLog) Consume(ctx context.Context, opts events.ConsumerOptions, fn func(events.Delivery)) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts.AckRuns = opts.AckRuns || l.runs
	dropped := false
	err := l.Log.Consume(rctx, opts, func(d events.Delivery) {
		if dropped {
			return
		}
		if l.drop.CompareAndSwap(true, false) {
			dropped = true
			cancel()
			return
		}
		fn(d)
	})
	if dropped && ctx.Err() == nil {
		return errReadEnded
	}
	return err
}

// A trigger lost with a read that ended is recovered within seconds, not
// after AckWait: the partition's keys are enqueued again.
func TestTriggerDroppedWithAReadIsRecovered(t *testing.T) { triggerDroppedWithARead(t, false) }

// The same when the consumers acknowledge runs of deliveries: the next
// read's acknowledgements cover the dropped delivery on the server, and
// the key runs all the same.
func TestTriggerDroppedWithAReadIsRecoveredAcknowledgingRuns(t *testing.T) {
	triggerDroppedWithARead(t, true)
}

func triggerDroppedWithARead(t *testing.T, runs bool) {
	var dl *droppingLog
	c := &counter{runs: map[string]int{}}
	e := startWith(t, queue.Config{}, func(l *events.Log) reconcilers.Log { dl = &droppingLog{Log: l, runs: runs}; return dl }, c)
	// w0 and w1 share a partition: w0's delivery makes its read one
	// that has delivered, w1's is dropped.
	n := e.log.Partitions()
	var second string
	for i := 1; second == ""; i++ {
		if name := fmt.Sprint("w", i); events.Partition(key(name).Proto(), n) == events.Partition(key("w0").Proto(), n) {
			second = name
		}
	}
	e.apply(t, widget("w0", "s"))
	eventually(t, "w0 Ready", func() bool { return ready(e.store, "w0") })
	dl.drop.Store(true)
	e.apply(t, widget(second, "s"))
	deadline := time.Now().Add(60 * time.Second) // AckWait is 5 minutes
	for !ready(e.store, second) {
		if time.Now().After(deadline) {
			t.Fatalf("%s not Ready a minute after its trigger was dropped (dropped: %v)", second, !dl.drop.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
