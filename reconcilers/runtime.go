package reconcilers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
)

// Log is what the runtime reads and writes.
type Log interface {
	Consume(ctx context.Context, opts events.ConsumerOptions, fn func(events.Delivery)) error
	Append(ctx context.Context, e events.Entry) (events.Result, error)
	LastSequence(ctx context.Context) (uint64, error)
}

// State is the projection runs read.
type State interface {
	Get(k projections.Key) *schemas.Object
	List(q projections.Query) ([]*schemas.Object, uint64)
	Dependents(k projections.Key) []projections.Key
	WaitFor(ctx context.Context, seq uint64) error
}

var (
	_ Log   = (*events.Log)(nil)
	_ State = (*projections.Store)(nil)
)

// Config configures a Runtime.
type Config struct {
	Log         Log
	State       State
	Reconcilers []Reconciler
	// Instance names this process in actors ("reconciler/<kind>@<instance>");
	// default host-pid.
	Instance string
	// Queue tunes every kind's queue (concurrency, backoff, resync).
	Queue queue.Config
	// Consumer is the durable consumer's name (default "jp-reconcilers").
	Consumer string
	// Now is the clock; default time.Now.
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *Metrics
}

// Runtime runs reconcilers: it turns log events into keyed work, runs each
// key on the latest projected state, records status, and acknowledges an
// event only once the run that covers it has finished.
type Runtime struct {
	cfg    Config
	byKind map[string]*controller
}

// New validates cfg and returns a runtime.
func New(cfg Config) (*Runtime, error) {
	if cfg.Log == nil || cfg.State == nil {
		return nil, errors.New("reconcilers: log and state are required")
	}
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.Consumer == "" {
		cfg.Consumer = "jp-reconcilers"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	r := &Runtime{cfg: cfg, byKind: map[string]*controller{}}
	for _, rec := range cfg.Reconcilers {
		for _, kind := range rec.Kinds() {
			if _, dup := r.byKind[kind]; dup {
				return nil, fmt.Errorf("reconcilers: two reconcilers register kind %s", kind)
			}
			q, err := queue.New(cfg.Queue)
			if err != nil {
				return nil, err
			}
			r.byKind[kind] = &controller{rt: r, kind: kind, rec: rec, q: q, notify: make(chan struct{}, 1),
				pending: map[string][]events.Delivery{}, seen: map[string]uint64{}, actor: "reconciler/" + kind + "@" + cfg.Instance}
		}
	}
	return r, nil
}

// Handles reports whether a reconciler is registered for kind (and so
// finalizes its objects).
func (r *Runtime) Handles(kind string) bool { _, ok := r.byKind[kind]; return ok }

// Start runs until ctx ends. It waits for the projection to reach the
// log's head, enqueues every key of every handled kind (a trigger that was
// in flight when an earlier process died is not lost), then consumes the
// log. On shutdown it stops taking work and lets runs in flight finish.
func (r *Runtime) Start(ctx context.Context) error {
	if len(r.byKind) == 0 {
		<-ctx.Done()
		return ctx.Err()
	}
	head, err := r.cfg.Log.LastSequence(ctx)
	if err != nil {
		return err
	}
	if err := r.cfg.State.WaitFor(ctx, head); err != nil {
		return err
	}
	var wg sync.WaitGroup
	runCtx, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	for kind, c := range r.byKind {
		objs, _ := r.cfg.State.List(projections.Query{Kind: kind})
		c.mu.Lock()
		for _, o := range objs {
			// A bare kind lists every group's; keep this kind's own.
			if k := projections.ObjectKey(o); k.Kind == kind {
				c.q.Add(encodeKey(k))
				c.seen[encodeKey(k)] = head
			}
		}
		c.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.dispatch(ctx, runCtx)
		}()
	}
	err = r.cfg.Log.Consume(ctx, events.ConsumerOptions{Name: r.cfg.Consumer, Filter: events.StoredPrefix + ".>"}, r.trigger)
	// Stop taking work; runs in flight finish (the dispatchers wait for
	// their workers) unless they take longer than the grace period.
	grace := time.AfterFunc(10*time.Second, stopRuns)
	defer grace.Stop()
	wg.Wait()
	return err
}

// trigger turns one log event into work: its key's run (unless the event is
// the key's own reconciler reporting status), and runs of the keys that
// depend on it. A delivery is acknowledged when the run covering it ends;
// one that triggers no run of its own key is acknowledged at once (the
// keys it wakes are enqueued again at every start, so nothing is lost).
func (r *Runtime) trigger(d events.Delivery) {
	ev, err := d.Record()
	if err != nil {
		r.cfg.Logger.Warn("skipping undecodable event", "sequence", d.Sequence, "err", err)
		_ = d.Ack()
		return
	}
	k := projections.KeyOf(ev.Key)
	attached := false
	if c := r.byKind[k.Kind]; c != nil && !(ev.Type == schemas.EventType_EVENT_TYPE_STATUS_CHANGED && ev.Actor == c.actor) {
		c.add(k, &d, d.Sequence)
		attached = true
	}
	for _, dep := range r.cfg.State.Dependents(k) {
		if c := r.byKind[dep.Kind]; c != nil {
			c.add(dep, nil, d.Sequence)
		}
	}
	if !attached {
		_ = d.Ack()
	}
}

// controller runs one kind.
type controller struct {
	rt     *Runtime
	kind   string
	rec    Reconciler
	actor  string
	notify chan struct{}

	mu      sync.Mutex
	q       *queue.Queue
	pending map[string][]events.Delivery // deliveries not yet covered by a run
	// seen is, per key, the log sequence its next run must see folded: a
	// dependent woken by its dependency's status must read that status.
	seen map[string]uint64
}

// add enqueues k. d is the delivery of k's own event (acknowledged when
// the run covering it ends), nil when k is woken by another key's event at
// sequence seq.
func (c *controller) add(k projections.Key, d *events.Delivery, seq uint64) {
	key := encodeKey(k)
	c.mu.Lock()
	if d != nil {
		c.pending[key] = append(c.pending[key], *d)
	}
	if seq > c.seen[key] {
		c.seen[key] = seq
	}
	c.q.Add(key)
	c.mu.Unlock()
	c.wake()
}

func (c *controller) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// dispatch hands due keys to workers until ctx ends, then waits for the
// workers. Runs use runCtx, which outlives ctx by the shutdown grace.
func (c *controller) dispatch(ctx, runCtx context.Context) {
	work := make(chan string)
	var wg sync.WaitGroup
	workers := c.rt.cfg.Queue.MaxRunning
	if workers <= 0 {
		workers = 8
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range work {
				c.run(runCtx, key)
			}
		}()
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	var timer *time.Timer
	for {
		c.mu.Lock()
		key, ok := c.q.Next(c.rt.cfg.Now())
		wake := c.q.NextWake()
		depth := c.q.Stats()
		c.mu.Unlock()
		c.rt.cfg.Metrics.depth.WithLabelValues(c.kind).Set(float64(depth.Ready))
		if ok {
			select {
			case work <- key:
				continue
			case <-ctx.Done():
				return
			}
		}
		var fire <-chan time.Time
		if !wake.IsZero() {
			d := max(wake.Sub(c.rt.cfg.Now()), 0)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			fire = timer.C
		}
		select {
		case <-c.notify:
		case <-fire:
		case <-ctx.Done():
			return
		}
	}
}

// run runs one key once and records what happened.
func (c *controller) run(ctx context.Context, key string) {
	rt := c.rt
	k := decodeKey(key)
	c.mu.Lock()
	covered := c.pending[key]
	upTo := c.seen[key]
	delete(c.pending, key)
	delete(c.seen, key)
	c.mu.Unlock()

	start := rt.cfg.Now()
	var cause string
	// Level-triggered: decide on a projection that includes every event
	// this run covers.
	if err := rt.cfg.State.WaitFor(ctx, upTo); err != nil {
		c.finish(key, queue.Result{Outcome: queue.Failed}, covered)
		return
	}
	if len(covered) > 0 {
		if ev, err := covered[len(covered)-1].Record(); err == nil {
			cause = ev.Id
		}
	}
	obj := rt.cfg.State.Get(k)
	if obj == nil {
		// The key left current state: nothing to do, and nothing to keep.
		c.mu.Lock()
		c.q.Forget(key)
		c.mu.Unlock()
		c.finish(key, queue.Result{}, covered)
		return
	}
	o := c.decide(ctx, k, obj)
	qres := queue.Result{Outcome: queue.Succeeded, RequeueAfter: o.res.RequeueAfter}
	switch {
	case o.err != nil && IsTerminal(o.err):
		qres.Outcome = queue.FailedTerminal
	case o.err != nil:
		qres.Outcome = queue.Failed
	case o.waiting != "":
		// Woken again by the dependency (or dependent) it waits for.
		qres.RequeueAfter = 0
	}
	c.mu.Lock()
	nextRun, _ := c.q.Plan(key, qres, rt.cfg.Now())
	c.mu.Unlock()
	if o.waiting != "" {
		nextRun = time.Time{}
	}
	// Status first, then the queue and the acknowledgements: the key stays
	// running (no second run of it can start) until its status is written,
	// and a crash before the acknowledgement brings the trigger back.
	c.record(ctx, k, obj, o, nextRun, cause)
	c.finish(key, qres, covered)
	rt.cfg.Metrics.observe(c.kind, qres.Outcome, rt.cfg.Now().Sub(start), covered)
}

// decide runs the reconciler, or explains why it may not run yet.
func (c *controller) decide(ctx context.Context, k projections.Key, obj *schemas.Object) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = outcome{err: fmt.Errorf("reconciler panicked: %v", p)}
		}
	}()
	st := c.rt.cfg.State
	if obj.GetStatus().GetGoal() == projections.GoalDeleted {
		// Deletion runs in reverse dependency order.
		if deps := st.Dependents(k); len(deps) > 0 {
			names := make([]string, len(deps))
			for i, d := range deps {
				names[i] = d.String()
			}
			return outcome{waiting: "waiting for dependents to be deleted: " + strings.Join(names, ", ")}
		}
		res, err := c.rec.Finalize(ctx, obj)
		return outcome{res: res, err: err, finalize: err == nil && res.RequeueAfter == 0}
	}
	if blocked := blockers(obj, st.Get); len(blocked) > 0 {
		return outcome{waiting: describe(blocked)}
	}
	res, err := c.rec.Reconcile(ctx, obj)
	return outcome{res: res, err: err}
}

// finish tells the queue the run ended and acknowledges what it covered.
func (c *controller) finish(key string, r queue.Result, covered []events.Delivery) {
	c.mu.Lock()
	_, err := c.q.Done(key, r, c.rt.cfg.Now())
	c.mu.Unlock()
	if err != nil {
		c.rt.cfg.Logger.Error("queue out of step", "kind", c.kind, "key", key, "err", err)
	}
	c.wake()
	for _, d := range covered {
		_ = d.Ack()
	}
}

// record writes the run's status (or the end of a deletion) with
// optimistic concurrency on the version the run read. A conflict means
// the object changed under the run: it runs again at once.
func (c *controller) record(ctx context.Context, k projections.Key, obj *schemas.Object, o outcome, nextRun time.Time, cause string) {
	rt := c.rt
	now := rt.cfg.Now()
	ev := &schemas.Event{Key: k.Proto(), Actor: c.actor, Time: timestamppb.New(now), Cause: cause}
	if o.finalize {
		ev.Type = schemas.EventType_EVENT_TYPE_FINALIZED
	} else {
		st := nextStatus(obj, o, nextRun, now)
		if sameStatus(obj.GetStatus(), st) {
			return
		}
		ev.Type = schemas.EventType_EVENT_TYPE_STATUS_CHANGED
		ev.Object = &schemas.Object{Status: st}
	}
	res, err := rt.cfg.Log.Append(ctx, events.Entry{Event: ev, Expect: obj.GetMetadata().GetResourceVersion()})
	switch {
	case errors.Is(err, events.ErrConflict):
		rt.cfg.Metrics.conflicts.WithLabelValues(c.kind).Inc()
		head, _ := rt.cfg.Log.LastSequence(ctx)
		c.add(k, nil, head)
	case err != nil:
		// The run's work is done but not recorded; run again (the work is
		// idempotent) once the log answers.
		rt.cfg.Logger.Warn("status write failed; running again", "key", k.String(), "err", err)
		c.add(k, nil, 0)
	case o.finalize:
		// Dependencies waiting for this object to go may finish now.
		for _, d := range obj.GetMetadata().GetDependsOn() {
			dk := projections.KeyOf(d)
			if dc := rt.byKind[dk.Kind]; dc != nil {
				dc.add(dk, nil, res.Sequence)
			}
		}
	}
}

// Keys travel through the queue as strings; NUL cannot occur in a kind,
// namespace or name.
func encodeKey(k projections.Key) string { return k.Kind + "\x00" + k.Namespace + "\x00" + k.Name }

func decodeKey(s string) projections.Key {
	parts := strings.SplitN(s, "\x00", 3)
	return projections.Key{Kind: parts[0], Namespace: parts[1], Name: parts[2]}
}
