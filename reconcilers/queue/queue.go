// Package queue is the reconciler runtime's keyed work queue: the part that
// decides which key runs when. It is a pure state machine in the style of
// etcd's raft core: no goroutines, no timers, no clock reads. Time arrives
// as an argument, and the runner around it sleeps until NextWake and calls
// Next from its workers.
//
// Its contract (docs/ARCHITECTURE.md, "The runtime's rules", 1, 2, 4 and 5):
//
//   - A key waiting to run is queued once however often it is added.
//   - A key added while it runs runs exactly once more after it.
//   - A key never runs twice at once; at most MaxRunning keys run at once,
//     not counting keys parked while their outcome is recorded (Park).
//   - An error retries with per-key exponential backoff (BaseDelay doubling
//     to MaxDelay, with jitter); success resets it. A terminal error is not
//     retried until the key is added again (its object changed).
//   - A success schedules the key's next run: after RequeueAfter if set,
//     else after the resync period (with jitter). NextRun tells the runner
//     what to record as the status's nextRunTime.
//
// A Queue is not safe for concurrent use; the runner serializes calls.
package queue

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Config tunes a Queue. Zero fields take the defaults of docs/ARCHITECTURE.md.
type Config struct {
	// MaxRunning caps concurrent runs (default 8).
	MaxRunning int
	// BaseDelay is the first retry delay after an error (default 5 ms).
	BaseDelay time.Duration
	// MaxDelay caps the retry delay (default 1000 s).
	MaxDelay time.Duration
	// Resync is how long after a success a key runs again without any
	// change (default 10 min); negative disables resync.
	Resync time.Duration
	// Jitter returns a number in [0, 1) used to spread delays; default
	// math/rand. Tests pass a fixed function.
	Jitter func() float64
}

func (c *Config) setDefaults() error {
	if c.MaxRunning == 0 {
		c.MaxRunning = 8
	}
	if c.BaseDelay == 0 {
		c.BaseDelay = 5 * time.Millisecond
	}
	if c.MaxDelay == 0 {
		c.MaxDelay = 1000 * time.Second
	}
	if c.Resync == 0 {
		c.Resync = 10 * time.Minute
	}
	if c.Jitter == nil {
		c.Jitter = rand.Float64
	}
	switch {
	case c.MaxRunning < 0:
		return fmt.Errorf("queue: max running %d must be positive", c.MaxRunning)
	case c.BaseDelay < 0 || c.MaxDelay < c.BaseDelay:
		return fmt.Errorf("queue: delays must satisfy 0 < base (%s) <= max (%s)", c.BaseDelay, c.MaxDelay)
	}
	return nil
}

// Outcome is how a run ended.
type Outcome int

const (
	// Succeeded resets the key's backoff and schedules its next run.
	Succeeded Outcome = iota
	// Failed retries the key after its backoff delay.
	Failed
	// FailedTerminal records the failure and waits for the key to change.
	FailedTerminal
	// Conflicted means the run's status write lost an optimistic-concurrency
	// race: the key runs again at once, on fresh state, without backoff.
	Conflicted
)

// Result reports a finished run.
type Result struct {
	Outcome Outcome
	// RequeueAfter, on success, runs the key again after this long (0: at
	// the resync period).
	RequeueAfter time.Duration
}

// state is what the queue knows of one key.
type state int

const (
	idle      state = iota // known, nothing pending (terminal, or resync off)
	ready                  // in the ready FIFO
	scheduled              // in the timer heap
	running                // handed out by Next, not yet Done
)

type entry struct {
	key      string
	state    state
	dirty    bool      // added while running
	forget   bool      // forgotten while running
	planned  time.Time // set by Plan, used by Done
	hasPlan  bool
	parked   bool      // running, but no longer counted in MaxRunning
	at       time.Time // when scheduled
	failures int
	index    int // position in the timer heap, -1 when not in it
}

// Queue is the keyed work queue.
type Queue struct {
	cfg     Config
	entries map[string]*entry
	ready   []*entry // FIFO; entries removed lazily keep state != ready
	head    int
	nready  int // entries in state ready (the FIFO also holds stale ones)
	timers  timerHeap
	running int
}

// New returns an empty queue.
func New(cfg Config) (*Queue, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Queue{cfg: cfg, entries: map[string]*entry{}}, nil
}

func (q *Queue) entry(key string) *entry {
	e := q.entries[key]
	if e == nil {
		e = &entry{key: key, index: -1}
		q.entries[key] = e
	}
	return e
}

// Add says key's object changed (or must be looked at): it runs as soon as
// a slot is free. A scheduled retry or requeue is superseded.
func (q *Queue) Add(key string) {
	e := q.entry(key)
	switch e.state {
	case running:
		e.dirty, e.forget = true, false
	case ready:
	case scheduled:
		heap.Remove(&q.timers, e.index)
		q.push(e)
	case idle:
		q.push(e)
	}
}

// AddAfter runs key at time at, unless it is due earlier already.
func (q *Queue) AddAfter(key string, at time.Time) {
	e := q.entry(key)
	switch e.state {
	case running, ready:
	case scheduled:
		if at.Before(e.at) {
			e.at = at
			heap.Fix(&q.timers, e.index)
		}
	case idle:
		q.schedule(e, at)
	}
}

func (q *Queue) push(e *entry) {
	e.state = ready
	q.nready++
	q.ready = append(q.ready, e)
}

func (q *Queue) schedule(e *entry, at time.Time) {
	e.state = scheduled
	e.at = at
	heap.Push(&q.timers, e)
}

// promote moves every key due at now into the ready FIFO, earliest first.
func (q *Queue) promote(now time.Time) {
	for len(q.timers) > 0 && !q.timers[0].at.After(now) {
		e := heap.Pop(&q.timers).(*entry)
		q.push(e)
	}
}

// Next hands out the next key to run at now, or false when nothing is due
// or MaxRunning keys already run. The caller must call Done for it.
func (q *Queue) Next(now time.Time) (string, bool) {
	if q.running >= q.cfg.MaxRunning {
		return "", false
	}
	q.promote(now)
	for q.head < len(q.ready) {
		e := q.ready[q.head]
		q.ready[q.head] = nil
		q.head++
		if q.head == len(q.ready) {
			q.ready, q.head = q.ready[:0], 0
		}
		if e.state != ready {
			continue
		}
		e.state = running
		q.nready--
		q.running++
		return e.key, true
	}
	return "", false
}

// ErrNotRunning is returned by Done for a key Next did not hand out.
var ErrNotRunning = errors.New("queue: key is not running")

// Plan says when a run of key ending with r at now would run the key next
// (zero: when it changes), and commits Done to that time, so that the
// runner can record it in status before it calls Done. A change arriving
// before Done still makes the key run at once.
func (q *Queue) Plan(key string, r Result, now time.Time) (time.Time, error) {
	e := q.entries[key]
	if e == nil || e.state != running {
		return time.Time{}, fmt.Errorf("%w: %q", ErrNotRunning, key)
	}
	e.planned, e.hasPlan = q.nextRun(e, r, now), true
	return e.planned, nil
}

// nextRun is when a key whose run ended with r at now runs next, unless
// something changes first; failures counts the run's own failure.
func (q *Queue) nextRun(e *entry, r Result, now time.Time) time.Time {
	switch r.Outcome {
	case Succeeded:
		switch {
		case r.RequeueAfter > 0:
			return now.Add(r.RequeueAfter)
		case q.cfg.Resync > 0:
			// Jitter spreads the resync of keys that all succeeded at once.
			return now.Add(q.cfg.Resync - time.Duration(q.cfg.Jitter()*float64(q.cfg.Resync)/10))
		}
	case Failed:
		return now.Add(q.Backoff(e.failures + 1))
	case Conflicted:
		return now
	}
	return time.Time{}
}

// Park frees a running key's slot among MaxRunning while the key stays
// running: its run's own work is over and the runner only records its
// outcome (a status write), which needs no worker. No second run of key
// starts before Done, and an Add meanwhile still makes it run once more
// after Done.
func (q *Queue) Park(key string) error {
	e := q.entries[key]
	if e == nil || e.state != running || e.parked {
		return fmt.Errorf("%w: %q", ErrNotRunning, key)
	}
	e.parked = true
	q.running--
	return nil
}

// Done ends key's run at now. It returns when the key runs next (zero when
// it waits for a change): the nextRunTime to record in status.
func (q *Queue) Done(key string, r Result, now time.Time) (time.Time, error) {
	e := q.entries[key]
	if e == nil || e.state != running {
		return time.Time{}, fmt.Errorf("%w: %q", ErrNotRunning, key)
	}
	if !e.parked {
		q.running--
	}
	e.parked = false
	e.state = idle
	planned, hasPlan := e.planned, e.hasPlan
	e.planned, e.hasPlan = time.Time{}, false
	if e.forget {
		delete(q.entries, key)
		return time.Time{}, nil
	}
	if !hasPlan {
		planned = q.nextRun(e, r, now)
	}
	switch r.Outcome {
	case Succeeded:
		e.failures = 0
	case Failed, FailedTerminal:
		e.failures++
	}
	if e.dirty || r.Outcome == Conflicted {
		// A change arrived during the run (or the run lost a write race):
		// run once more, now, on the fresh state.
		e.dirty = false
		q.push(e)
		return now, nil
	}
	if !planned.IsZero() {
		q.schedule(e, planned)
	}
	return planned, nil
}

// Backoff is the delay before retry number n (n >= 1): BaseDelay doubling
// per failure, capped at MaxDelay, then reduced by up to half at random so
// that keys failing together do not retry together.
func (q *Queue) Backoff(n int) time.Duration {
	d := q.cfg.BaseDelay
	for i := 1; i < n && d < q.cfg.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, q.cfg.MaxDelay)
	return d - time.Duration(q.cfg.Jitter()*float64(d)/2)
}

// Forget drops key (its object left current state). A running key is
// forgotten when its run is Done.
func (q *Queue) Forget(key string) {
	e := q.entries[key]
	if e == nil {
		return
	}
	switch e.state {
	case running:
		e.dirty, e.forget = false, true
		return
	case scheduled:
		heap.Remove(&q.timers, e.index)
	case ready:
		q.nready-- // its FIFO slot goes stale
	}
	e.state = idle
	delete(q.entries, key)
}

// NextWake is the earliest time a scheduled key falls due (zero if none):
// the runner sleeps until then or until the next Add.
func (q *Queue) NextWake() time.Time {
	if len(q.timers) == 0 {
		return time.Time{}
	}
	return q.timers[0].at
}

// Stats are the queue's gauges.
type Stats struct {
	Ready, Scheduled, Running int
}

// Stats counts keys by state, in constant time.
func (q *Queue) Stats() Stats {
	return Stats{Ready: q.nready, Scheduled: len(q.timers), Running: q.running}
}

// timerHeap orders scheduled entries by due time.
type timerHeap []*entry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *timerHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}
