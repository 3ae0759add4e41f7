package reconcilers

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrLeaseLost is the cause (context.Cause) of a run's context cancelled
// because this instance's membership lease ended: the process was paused,
// or cut off from the members bucket, for so long that the others may have
// counted it gone and taken its partitions. The run must stop without
// further side effects; the key's new holder runs it.
var ErrLeaseLost = errors.New("reconcilers: this instance's membership lease ended (the process was paused or cut off); another instance may be running the key")

type leaseKey struct{}

// LeaseDeadline reports until when the run whose context ctx is (or derives
// from) may go on: the end of the instance's membership lease, renewed by
// every heartbeat, so a later call may give a later time. A run that is
// still working at that time must stop; the context is cancelled then, with
// cause ErrLeaseLost. It reports false for a context that is not a run's.
//
// The lease is not the context's Deadline: that could not move with the
// renewals, and would cut every call longer than the lease short.
func LeaseDeadline(ctx context.Context) (time.Time, bool) {
	c, ok := ctx.Value(leaseKey{}).(*runContext)
	if !ok {
		return time.Time{}, false
	}
	return c.lease(), true
}

// runContext is the context a partition's runs get: the partition's own
// (cancelled when it is given up and the grace period has passed, see
// partitions.giveUp), also cancelled when the lease the partition was
// claimed under ends. Err looks at the lease itself: a process resuming
// after a pause finds its lease over (by the clock) and its runs' contexts
// cancelled at their first check, even before the runtime has noticed.
type runContext struct {
	context.Context
	members Members
	lost    <-chan struct{}
	cancel  context.CancelCauseFunc

	mu    sync.Mutex
	until time.Time // the lease's end, as last seen while it held
}

func newRunContext(parent context.Context, members Members, lost <-chan struct{}) *runContext {
	ctx, cancel := context.WithCancelCause(parent)
	rc := &runContext{Context: ctx, members: members, lost: lost, cancel: cancel}
	rc.lease()
	go rc.watch()
	return rc
}

// watch cancels the runs once the lease ends (or the context ends first).
func (c *runContext) watch() {
	select {
	case <-c.lost:
		c.cancel(ErrLeaseLost)
	case <-c.Context.Done():
	}
}

// lease looks at the lease (ending it if its time has come: the clock is
// read at every look) and returns its end: the latest seen while it was
// the lease the partition was claimed under.
func (c *runContext) lease() time.Time {
	until, lost := c.members.Lease()
	c.mu.Lock()
	defer c.mu.Unlock()
	if lost == c.lost && until.After(c.until) {
		c.until = until
	}
	return c.until
}

// Err is the partition context's, after a look at the lease.
func (c *runContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	c.lease()
	select {
	case <-c.lost:
		c.cancel(ErrLeaseLost)
	default:
	}
	return c.Context.Err()
}

func (c *runContext) Value(key any) any {
	if key == (leaseKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// stop cancels the runs (the partition is given up).
func (c *runContext) stop() { c.cancel(context.Canceled) }
