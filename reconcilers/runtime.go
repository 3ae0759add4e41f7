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
	"github.com/jetplane/jetplane/internal/retry"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/queue"
	"github.com/jetplane/jetplane/schemas"
)

// Log is what the runtime reads and writes.
type Log interface {
	Consume(ctx context.Context, opts events.ConsumerOptions, fn func(events.Delivery)) error
	Append(ctx context.Context, e events.Entry) (events.Result, error)
	AppendBatch(ctx context.Context, entries []events.Entry) ([]events.Result, error)
	AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
	LastSequence(ctx context.Context) (uint64, error)
	Partitions() int
	Unpin(ctx context.Context, consumer, group string) error
}

// Members is this instance's membership among the instances sharing the
// log: who is live, and the claims that make a partition's holder
// exclusive. events.Members is the implementation;
// reconcilers/memberfake is an in-memory one for tests.
type Members interface {
	// Self is this instance's name.
	Self() string
	// Live returns the live instances, sorted (Self among them), and a
	// channel closed when that set next changes.
	Live() ([]string, <-chan struct{})
	// Claim makes this instance p's holder, waiting while another live
	// instance holds it; it fails only when ctx ends.
	Claim(ctx context.Context, p int) error
	// Release gives p up; after a failure the claim is still held, and
	// calling Release again retries.
	Release(ctx context.Context, p int) error
	// Leave withdraws this instance; release partitions first.
	Leave(ctx context.Context) error
	// Lease is how long this instance surely still counts as live for the
	// others: until the time returned, no other instance can count it gone
	// and take its partitions. lost is closed once that time has passed
	// without a heartbeat renewing it (the instance was paused, or cut off
	// from the bucket); a lease renewed after that is a new one, with a new
	// channel.
	Lease() (until time.Time, lost <-chan struct{})
}

// JoinFunc announces instance to the others and returns its membership.
type JoinFunc func(ctx context.Context, instance string, opts events.MemberOptions) (Members, error)

var _ Members = (*events.Members)(nil)

// State is the projection runs read.
type State interface {
	Get(k projections.Key) *schemas.Object
	Keys(q projections.Query) ([]projections.Key, uint64)
	Dependents(k projections.Key) []projections.Key
	WaitFor(ctx context.Context, seq uint64) error
	OnChange(fn func(projections.Changed))
}

var (
	_ Log   = (*events.Log)(nil)
	_ State = (*projections.Store)(nil)
)

// Config configures a Runtime.
type Config struct {
	Log Log
	// Join joins the instances sharing the log; default: the log's own
	// Join (events.Log.Join) when Log has one.
	Join        JoinFunc
	State       State
	Reconcilers []Reconciler
	// Instance names this process in actors ("reconciler/<kind>@<instance>");
	// default host-pid.
	Instance string
	// Queue tunes every kind's queue (concurrency, backoff, resync).
	Queue queue.Config
	// Consumer prefixes the durable consumers' names, one per partition:
	// events.PartitionConsumer(Consumer, partition) (default prefix
	// "jp-reconcilers").
	Consumer string
	// Earlier lists prefixes the same durable consumers had before
	// (Consumer changed): a partition's consumers under them, in both
	// forms (events.PartitionConsumer, events.ExplicitAckPartitionConsumer),
	// are deleted when the partition is read, as the one of the earlier
	// form under Consumer is.
	Earlier []string
	// Members tunes membership: how fast a dead instance's partitions move
	// to the live ones.
	Members events.MemberOptions
	// PinnedTTL is how long a partition's consumer stays pinned to an
	// instance that stopped pulling (default 4 s).
	PinnedTTL time.Duration
	// Grace bounds how long runs in flight may take to finish when the
	// runtime stops or a partition moves away (default 10 s).
	Grace time.Duration
	// GroupCommit writes the statuses of runs that end together as one
	// atomic batch: one fsync for all of them when the log fsyncs every
	// write (--sync=always). Without it they are pipelined, which costs
	// the server less when it does not (see committer).
	GroupCommit bool
	// OwnKindsOnly makes each partition's consumer read only the events
	// of the runtime's own kinds (one filter per kind and partition): the
	// keys it wakes because of other kinds' changes come from its
	// projection, not from its consumers, which only acknowledge such
	// events. A controller in its own process (package
	// reconcilers/controller) and jetplane's instances set it.
	OwnKindsOnly bool
	// Now is the clock; default time.Now.
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *Metrics
}

// Runtime runs reconcilers: it turns log events into keyed work, runs each
// key on the latest projected state, records status, and acknowledges an
// event only once the run that covers it has finished.
type Runtime struct {
	cfg      Config
	commit   *committer
	byKind   map[string]*controller
	parts    *partitions
	watchers []Watcher
}

// New validates cfg and returns a runtime.
func New(cfg Config) (*Runtime, error) {
	if cfg.Log == nil || cfg.State == nil {
		return nil, errors.New("reconcilers: log and state are required")
	}
	if cfg.Join == nil {
		j, ok := cfg.Log.(interface {
			Join(context.Context, string, events.MemberOptions) (*events.Members, error)
		})
		if !ok {
			return nil, errors.New("reconcilers: Join is required when the log cannot join members itself")
		}
		cfg.Join = func(ctx context.Context, instance string, opts events.MemberOptions) (Members, error) {
			m, err := j.Join(ctx, instance, opts)
			if err != nil {
				return nil, err
			}
			return m, nil
		}
	}
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.Consumer == "" {
		cfg.Consumer = events.PartitionConsumerPrefix
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
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	r := &Runtime{cfg: cfg, byKind: map[string]*controller{}, commit: newCommitter(cfg.Log, cfg.GroupCommit)}
	r.parts = newPartitions(r, cfg.Log.Partitions())
	for _, rec := range cfg.Reconcilers {
		if w, ok := rec.(Watcher); ok {
			r.watchers = append(r.watchers, w)
		}
		for _, kind := range rec.Kinds() {
			if _, dup := r.byKind[kind]; dup {
				return nil, fmt.Errorf("reconcilers: two reconcilers register kind %s", kind)
			}
			q, err := queue.New(cfg.Queue)
			if err != nil {
				return nil, err
			}
			r.byKind[kind] = &controller{rt: r, kind: kind, rec: rec, q: q, notify: make(chan struct{}, 1),
				pending: map[string][]delivered{}, seen: map[string]uint64{}, read: map[string]uint64{}, next: map[string]time.Time{}, actor: "reconciler/" + kind + "@" + cfg.Instance}
		}
	}
	return r, nil
}

// Handles reports whether a reconciler is registered for kind (and so
// finalizes its objects).
func (r *Runtime) Handles(kind string) bool { _, ok := r.byKind[kind]; return ok }

// Start runs until ctx ends. It waits for the projection to reach the
// log's head, joins the instances sharing the log, and runs the partitions
// assigned to it: each is claimed, every key in it enqueued (a trigger that
// was in flight when an earlier holder died is not lost), then its
// consumer read. On shutdown it stops taking work, lets runs in flight
// finish (up to Grace), and releases its partitions to the others.
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
	members, err := r.join(ctx)
	if err != nil {
		return err
	}
	r.cfg.State.OnChange(r.changed)
	defer r.cfg.State.OnChange(nil)
	go r.commit.run()
	var wg sync.WaitGroup
	runCtx, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	r.parts.runCtx = runCtx
	for _, c := range r.byKind {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.dispatch(ctx)
		}()
	}
	// Stop taking work at ctx's end; runs in flight finish unless they
	// take longer than the grace period.
	grace := context.AfterFunc(ctx, func() { time.AfterFunc(r.cfg.Grace, stopRuns) })
	defer grace()
	r.parts.balance(ctx, members)
	wg.Wait()
	// Every partition given up has had its statuses written; only writes
	// of runs that no partition counts any more could be left.
	r.commit.close()
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := members.Leave(lctx); err != nil {
		r.cfg.Logger.Warn("leaving the members bucket failed; the others take over after expiry", "err", err)
	}
	return ctx.Err()
}

// join announces this instance, retrying while the cluster cannot yet
// place the members bucket.
func (r *Runtime) join(ctx context.Context) (Members, error) {
	var m Members
	err := retry.Do(ctx, retry.Constant(500*time.Millisecond), func(attempt int, err error, _ time.Duration) {
		if retry.Often(attempt) {
			r.cfg.Logger.Info("waiting to join the other instances", "err", err, "attempts", attempt)
		}
	}, func(int) error {
		jctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		m, err = r.cfg.Join(jctx, r.cfg.Instance, r.cfg.Members)
		return err
	})
	return m, err
}

// trigger turns one log event of a partition this instance holds into a
// run of its key, unless the event is the key's own reconciler reporting
// status. The delivery is acknowledged when the run covering it ends; one
// that triggers no run is acknowledged at once. Keys that depend on the
// event's key are woken from the projection (changed), whichever
// partition they are in.
func (r *Runtime) trigger(d events.Delivery) {
	p, k, err := keyOfSubject(d.Subject)
	var h eventHead
	if err == nil {
		h, err = scanHead(d.Data)
	}
	if err != nil {
		r.cfg.Logger.Warn("skipping undecodable event", "sequence", d.Sequence, "err", err)
		_ = d.Ack()
		return
	}
	c := r.byKind[k.Kind]
	if c == nil || (h.typ == schemas.EventType_EVENT_TYPE_STATUS_CHANGED && string(h.actor) == c.actor) || !r.parts.active(p) {
		// A partition given up meanwhile: its next holder runs every key.
		_ = d.Ack()
		return
	}
	c.add(k, &delivered{Delivery: d, id: h.id, at: h.at}, d.Sequence)
}

// changed wakes, from the projection, the keys a change concerns: the
// dependents of a key whose readiness, goal or existence changed, and the
// dependencies of a key that left current state (deletion runs in reverse
// order). Only keys of partitions held here are woken; every instance
// folds the whole log, so each wakes its own. It runs with the store
// locked.
func (r *Runtime) changed(ch projections.Changed) {
	if ch.Resync {
		r.parts.resyncAll()
		return
	}
	if gateChanged(ch.Prev, ch.Next) {
		for _, d := range ch.Dependents {
			r.wake(d, ch.Sequence)
		}
	}
	if ch.Next == nil && ch.Prev != nil {
		for _, d := range ch.Prev.GetMetadata().GetDependsOn() {
			r.wake(projections.KeyOf(d), ch.Sequence)
		}
	}
	for _, w := range r.watchers {
		for _, rec := range []*schemas.ObjectRecord{ch.Prev, ch.Next} {
			if rec != nil {
				for _, k := range w.Owners(rec) {
					r.wake(k, ch.Sequence)
				}
			}
		}
	}
}

func (r *Runtime) wake(k projections.Key, seq uint64) {
	if c := r.byKind[k.Kind]; c != nil && r.parts.active(r.parts.of(k)) {
		c.add(k, nil, seq)
	}
}

// gateChanged reports whether a change can unblock or block a key that
// depends on it (see blockers) or waits for it to go.
func gateChanged(prev, next *schemas.ObjectRecord) bool {
	if (prev == nil) != (next == nil) {
		return true
	}
	return prev.GetStatus().GetGoal() != next.GetStatus().GetGoal() || readyStatus(prev.GetStatus()) != readyStatus(next.GetStatus())
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
	pending map[string][]delivered // deliveries not yet covered by a run
	// seen is, per key, the log sequence its next run must see folded: a
	// dependent woken by its dependency's status must read that status.
	seen map[string]uint64
	// read is, per key, the resourceVersion its latest run read: an event
	// at or below it is already covered (a late or repeated delivery).
	read map[string]uint64
	// next is, per key, when it runs next without a change: what status
	// would otherwise carry as nextRunTime at every run (NextRun).
	next map[string]time.Time
}

// add enqueues k. d is the delivery of k's own event (acknowledged when
// the run covering it ends), nil when k is woken by another key's event at
// sequence seq.
func (c *controller) add(k projections.Key, d *delivered, seq uint64) {
	key := encodeKey(k)
	c.mu.Lock()
	if d != nil && seq <= c.read[key] {
		c.mu.Unlock()
		_ = d.Ack()
		return
	}
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

// addAll enqueues keys, to run on state at least as new as seq.
func (c *controller) addAll(keys []projections.Key, seq uint64) {
	c.mu.Lock()
	for _, k := range keys {
		key := encodeKey(k)
		if seq > c.seen[key] {
			c.seen[key] = seq
		}
		c.q.Add(key)
	}
	c.mu.Unlock()
	c.wake()
}

// dropPartition acknowledges the deliveries of partition p's keys that no
// run has covered yet: p has moved away, and its next holder runs every
// key in it. Queued keys of p are dropped when they come up.
func (c *controller) dropPartition(p int) {
	c.mu.Lock()
	var acks []delivered
	for key, ds := range c.pending {
		if c.rt.parts.of(decodeKey(key)) == p {
			acks = append(acks, ds...)
			delete(c.pending, key)
		}
	}
	c.mu.Unlock()
	for _, d := range acks {
		_ = d.Ack()
	}
}

func (c *controller) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// dispatch hands due keys to workers until ctx ends, then waits for the
// workers. Runs use their partition's context (see partitions.begin),
// which outlives ctx by the shutdown grace.
func (c *controller) dispatch(ctx context.Context) {
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
				c.run(key)
			}
		}()
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	var timer *time.Timer
	var counted time.Time
	for {
		c.mu.Lock()
		now := c.rt.cfg.Now()
		key, ok := c.q.Next(now)
		wake := c.q.NextWake()
		// The depth metric a few times a second: setting a labelled
		// gauge for every key handed out costs more than the count.
		depth := -1
		if !ok || now.Sub(counted) > 100*time.Millisecond {
			depth, counted = c.q.Stats().Ready, now
		}
		c.mu.Unlock()
		if depth >= 0 {
			c.rt.cfg.Metrics.depth.WithLabelValues(c.kind).Set(float64(depth))
		}
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

// run runs one key once and records what happened. The status write is
// handed to the committer: the worker goes on to the next key while the
// key stays running (parked in the queue, and counted in its partition's
// runs) until its status is written.
func (c *controller) run(key string) {
	rt := c.rt
	k := decodeKey(key)
	c.mu.Lock()
	covered := c.pending[key]
	upTo := c.seen[key]
	delete(c.pending, key)
	delete(c.seen, key)
	c.mu.Unlock()

	p := rt.parts.of(k)
	ctx, ok := rt.parts.begin(p)
	if !ok {
		// The partition moved away (or is moving): its new holder runs
		// the key.
		c.mu.Lock()
		c.q.Forget(key)
		c.mu.Unlock()
		c.finish(key, queue.Result{}, covered)
		return
	}
	handedOff := false
	defer func() {
		if !handedOff {
			rt.parts.end(p)
		}
	}()
	start := rt.cfg.Now()
	var cause string
	// Level-triggered: decide on a projection that includes every event
	// this run covers.
	if err := rt.cfg.State.WaitFor(ctx, upTo); err != nil {
		c.finish(key, queue.Result{Outcome: queue.Failed}, covered)
		return
	}
	if len(covered) > 0 {
		cause = covered[len(covered)-1].id
	}
	obj := rt.cfg.State.Get(k)
	c.mu.Lock()
	if obj == nil {
		// The key left current state: nothing to do, and nothing to keep.
		c.q.Forget(key)
		delete(c.read, key)
		delete(c.seen, key)
		c.mu.Unlock()
		c.finish(key, queue.Result{}, covered)
		return
	}
	c.read[key] = obj.GetMetadata().GetResourceVersion()
	c.mu.Unlock()
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
	ev := c.statusEvent(k, obj, o, nextRun, cause)
	if ev == nil {
		c.finish(key, qres, covered)
		rt.cfg.Metrics.observe(c.kind, qres.Outcome, rt.cfg.Now().Sub(start), covered)
		return
	}
	// Status first, then the queue and the acknowledgements: the key stays
	// running (no second run of it can start) until its status is written,
	// and a crash before the acknowledgement brings the trigger back.
	c.mu.Lock()
	_ = c.q.Park(key)
	c.mu.Unlock()
	c.wake()
	handedOff = true
	rt.commit.submit(commit{
		entry: events.Entry{Event: ev, Expect: obj.GetMetadata().GetResourceVersion()},
		done: func(res events.Result, err error) {
			defer rt.parts.end(p)
			if !c.recorded(k, res, err) {
				// The work is done but not recorded: a failed run,
				// retried with the key's backoff (and counted towards
				// it) once the log answers, not at once (the reconciler
				// would call its outside system in a tight loop for as
				// long as the log is down).
				qres = queue.Result{Outcome: queue.Failed}
				c.mu.Lock()
				_, _ = c.q.Plan(key, qres, rt.cfg.Now())
				c.mu.Unlock()
			}
			c.finish(key, qres, covered)
			rt.cfg.Metrics.observe(c.kind, qres.Outcome, rt.cfg.Now().Sub(start), covered)
		},
	})
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
	if blocked := blockers(obj, st.Get, c.rt.Handles); len(blocked) > 0 {
		return outcome{waiting: describe(blocked)}
	}
	res, err := c.rec.Reconcile(ctx, obj)
	return outcome{res: res, err: err}
}

// finish tells the queue the run ended and acknowledges what it covered.
func (c *controller) finish(key string, r queue.Result, covered []delivered) {
	c.mu.Lock()
	next, err := c.q.Done(key, r, c.rt.cfg.Now())
	if next.IsZero() {
		delete(c.next, key)
	} else {
		c.next[key] = next
	}
	c.mu.Unlock()
	if err != nil {
		c.rt.cfg.Logger.Error("queue out of step", "kind", c.kind, "key", key, "err", err)
	}
	c.wake()
	for _, d := range covered {
		_ = d.Ack()
	}
}

// statusEvent is the event recording a run's outcome: its status, or the
// end of a deletion; nil when the status would change nothing but its
// next run time.
func (c *controller) statusEvent(k projections.Key, obj *schemas.Object, o outcome, nextRun time.Time, cause string) *schemas.Event {
	now := c.rt.cfg.Now()
	ev := &schemas.Event{Key: k.Proto(), Actor: c.actor, Time: timestamppb.New(now), Cause: cause}
	if o.finalize {
		ev.Type = schemas.EventType_EVENT_TYPE_FINALIZED
		return ev
	}
	if o.res.KeepStatus && o.err == nil && o.waiting == "" {
		return nil
	}
	st := nextStatus(obj, o, nextRun, now)
	if sameStatus(obj.GetStatus(), st) {
		return nil
	}
	ev.Type = schemas.EventType_EVENT_TYPE_STATUS_CHANGED
	ev.Object = &schemas.Object{Status: st}
	return ev
}

// recorded takes in the outcome of a status write made with optimistic
// concurrency on the version the run read. A conflict means the object
// changed under the run: it runs again at once. It reports false when the
// write failed otherwise (the log did not answer).
func (c *controller) recorded(k projections.Key, res events.Result, err error) bool {
	rt := c.rt
	switch {
	case err == nil:
		// The key's next run reads at least this status: reading an older
		// one would only fail its own write.
		c.mu.Lock()
		if res.Sequence > c.seen[encodeKey(k)] {
			c.seen[encodeKey(k)] = res.Sequence
		}
		c.mu.Unlock()
	case errors.Is(err, events.ErrConflict):
		rt.cfg.Metrics.conflicts.WithLabelValues(c.kind).Inc()
		ctx, cancel := context.WithTimeout(context.Background(), statusWriteTimeout)
		head, _ := rt.cfg.Log.LastSequence(ctx)
		cancel()
		c.add(k, nil, head)
	default:
		rt.cfg.Logger.Warn("status write failed; running again after the key's backoff", "key", k.String(), "err", err)
		return false
	}
	return true
}

// Keys travel through the queue as strings; NUL cannot occur in a kind,
// namespace or name.
func encodeKey(k projections.Key) string { return k.Kind + "\x00" + k.Namespace + "\x00" + k.Name }

func decodeKey(s string) projections.Key {
	parts := strings.SplitN(s, "\x00", 3)
	return projections.Key{Kind: parts[0], Namespace: parts[1], Name: parts[2]}
}

// NextRun is when k's next run is due without any change, as this
// instance's queue has it: false when k is not in a partition held here or
// waits for a change.
func (r *Runtime) NextRun(k projections.Key) (time.Time, bool) {
	c := r.byKind[k.Kind]
	if c == nil || !r.parts.active(r.parts.of(k)) {
		return time.Time{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.next[encodeKey(k)]
	return t, ok
}

// Partitions lists the partitions this instance runs now.
func (r *Runtime) Partitions() []int { return r.parts.held() }

// Drain says the process's shutdown has begun: from now on the runtime
// claims no partition (one it is claiming is left), while those it holds
// run until Start's context ends.
func (r *Runtime) Drain() { r.parts.drainOnce.Do(func() { close(r.parts.draining) }) }
