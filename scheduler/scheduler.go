package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	v1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// Appender appends Bound events; each entry succeeds or fails on its own.
type Appender interface {
	AppendAsync(ctx context.Context, entries []events.Entry) ([]events.Result, []error)
}

// State is the projection the scheduler follows for nodes and pods.
type State interface {
	Watch(q projections.Query, from uint64) (<-chan projections.Change, func(), error)
	Seq() uint64
}

var (
	_ Appender = (*events.Log)(nil)
	_ State    = (*projections.Store)(nil)
)

// Options configure a Scheduler.
type Options struct {
	Log   Appender
	State State
	// Profiles by schedulerName; nil is the default profile.
	Profiles map[string]*Profile
	// Instance names this process in the Bound events' actor
	// ("scheduler/<profile>@<instance>"); default host-pid.
	Instance string
	// BatchSize bounds the Bound events appended together (default 256).
	BatchSize int
	// BatchesInFlight bounds the batches of Bound events awaiting their
	// acknowledgements (default 8).
	BatchesInFlight int
	// BindRetry is when a pod whose Bound append is still unanswered or
	// failed (other than by a conflict) runs again (default 10s).
	BindRetry time.Duration
	// ErrorRetry is when a pod whose cycle failed with an error (a plugin
	// failed) runs again (default 5s).
	ErrorRetry time.Duration
	// Bound, when set, is told of each pod whose Bound event the log
	// acknowledged: the pod as that event left it (spec with nodeName,
	// resourceVersion the event's sequence). It must not block; the
	// node agents' side uses it to hand a pod over without waiting for
	// the pod's next run.
	Bound  func(pod *schemas.Object)
	Now    func() time.Time
	Logger *slog.Logger
}

// Scheduler schedules pods one cycle at a time. Cycles run one after
// another (each sees the placements of the ones before it, assumed), Filter
// and Score run in parallel inside a cycle, and Bound appends are pipelined
// in batches so that concurrent Schedule calls share round trips.
type Scheduler struct {
	cfg   Options
	cache *Cache

	cycleMu sync.Mutex
	cycle   uint64
	start   int

	watches []*watch // guarded by cycleMu
	started atomic.Bool

	binds chan *bindRequest

	bindMu   sync.Mutex
	binding  map[string]bool // pods whose Bound append is unanswered
	bindIdle chan struct{}   // closed when binding empties

	unschedMu sync.Mutex
	// unsched are the pods last found unschedulable, with their profile
	// and the plugins that rejected them (for the queueing hints).
	unsched map[projections.Key]unschedulable

	waiting waitingPods
}

type unschedulable struct {
	profile    *Profile
	rejectedBy []string
}

// New validates cfg and returns a scheduler; Start must run for Schedule to
// make progress.
func New(cfg Options) (*Scheduler, error) {
	if cfg.Log == nil || cfg.State == nil {
		return nil, errors.New("scheduler: log and state are required")
	}
	if cfg.Profiles == nil {
		p, err := DefaultConfig().Build(DefaultRegistry())
		if err != nil {
			return nil, err
		}
		cfg.Profiles = p
	}
	if cfg.Instance == "" {
		host, _ := os.Hostname()
		cfg.Instance = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 256
	}
	if cfg.BatchesInFlight <= 0 {
		cfg.BatchesInFlight = 8
	}
	if cfg.BindRetry <= 0 {
		cfg.BindRetry = 10 * time.Second
	}
	if cfg.ErrorRetry <= 0 {
		cfg.ErrorRetry = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Scheduler{cfg: cfg, cache: NewCache(), watches: []*watch{{kind: "Node"}, {kind: "Pod"}},
		binds: make(chan *bindRequest, cfg.BatchSize*4), binding: map[string]bool{}, unsched: map[projections.Key]unschedulable{}}
	for _, p := range cfg.Profiles {
		for _, pl := range p.plugins() {
			if hu, ok := pl.(HandleUser); ok {
				hu.SetHandle(schedHandle{s})
			}
		}
	}
	return s, nil
}

// Cache is the scheduler's cache (for tests and benchmarks).
func (s *Scheduler) Cache() *Cache { return s.cache }

// Start runs the binder until ctx ends. The cache follows the projection
// at the start of each cycle (see sync), not in the background, so a cycle
// always sees every node and pod change the projection had when it began.
func (s *Scheduler) Start(ctx context.Context) error {
	s.started.Store(true)
	err := s.bindLoop(ctx)
	s.cycleMu.Lock()
	defer s.cycleMu.Unlock()
	for _, w := range s.watches {
		if w.stop != nil {
			w.stop()
		}
	}
	return err
}

// SyncCache brings the cache to the projection's current sequence now, as
// the next cycle would (opening the watches, whose first listing holds
// every node and pod), and returns that sequence: kube-scheduler's
// WaitForCacheSync. Cycles do not need it.
func (s *Scheduler) SyncCache() (uint64, error) {
	s.cycleMu.Lock()
	defer s.cycleMu.Unlock()
	return s.sync()
}

// watch is the cache's watch of one kind.
type watch struct {
	kind    string
	ch      <-chan projections.Change
	stop    func()
	from    uint64
	pending *projections.Change // the first change past the last sync's sequence
}

// RecordState is a State that can hand changes with their specs still
// encoded (projections.Store.WatchRecords). The scheduler watches so when
// it can: most pod changes it sees are its own Bound events, which it
// confirms by the node name alone.
type RecordState interface {
	WatchRecords(q projections.Query, from uint64) (<-chan projections.Change, func(), error)
}

func (w *watch) open(st State) error {
	watch := st.Watch
	if rs, ok := st.(RecordState); ok {
		watch = rs.WatchRecords
	}
	for {
		ch, stop, err := watch(projections.Query{Kind: w.kind}, w.from)
		if errors.Is(err, projections.ErrGone) && w.from != 0 {
			// The store no longer holds the changes since from: list
			// again. (Objects deleted meanwhile stay in the cache until
			// they change; a restart clears them.)
			w.from = 0
			continue
		}
		if err != nil {
			return fmt.Errorf("scheduler: watch %s: %w", w.kind, err)
		}
		w.ch, w.stop = ch, stop
		return nil
	}
}

// sync brings the cache to exactly the projection's current sequence for
// nodes and pods: the store hands each change to its watchers before its
// sequence moves, so every change up to the sequence read here is already
// buffered in the watches; changes past it wait for the next sync. So a
// decision's snapshot is the state at one log sequence (plus assumed
// pods), which a replay can rebuild. The caller holds cycleMu.
func (s *Scheduler) sync() (uint64, error) {
	for _, w := range s.watches {
		if w.ch == nil {
			if err := w.open(s.cfg.State); err != nil {
				return 0, err
			}
		}
	}
	target := s.cfg.State.Seq()
	for _, w := range s.watches {
	drain:
		for {
			if w.pending != nil {
				if w.pending.Sequence > target {
					break drain
				}
				s.apply(w.kind, *w.pending)
				w.pending = nil
			}
			select {
			case c, ok := <-w.ch:
				if !ok {
					// The watcher fell behind and was dropped: resume.
					w.ch = nil
					if err := w.open(s.cfg.State); err != nil {
						return 0, err
					}
					target = max(target, s.cfg.State.Seq())
					continue
				}
				if c.Sequence != 0 {
					w.from = c.Sequence
				}
				if c.Sequence > target {
					w.pending = &c
					break drain
				}
				s.apply(w.kind, c)
			default:
				break drain
			}
		}
	}
	s.cache.SetSequence(target)
	return target, nil
}

func (s *Scheduler) apply(kind string, c projections.Change) {
	switch kind {
	case "Node":
		if c.Type == projections.Deleted {
			s.cache.RemoveNode(c.Key.Name)
			return
		}
		obj := changeObject(c)
		node, err := NodeFromObject(obj)
		if err != nil {
			s.cfg.Logger.Warn("scheduler: node ignored", "node", c.Key.Name, "err", err)
			s.cache.RemoveNode(c.Key.Name)
			return
		}
		s.cache.SetNode(node, obj.GetMetadata().GetResourceVersion())
	case "Pod":
		key := c.Key.Namespace + "/" + c.Key.Name
		status := c.Object.GetStatus()
		if c.Record != nil {
			status = c.Record.GetStatus()
		}
		if c.Type == projections.Deleted || status.GetGoal() == projections.GoalDeleted {
			s.cache.RemovePod(key)
			s.unschedMu.Lock()
			delete(s.unsched, c.Key)
			s.unschedMu.Unlock()
			return
		}
		// The common change is a pod's own Bound event: confirm its
		// assumption without converting the object, or decoding its spec
		// when the watch hands records (this runs under the cycle lock,
		// once per pod placed).
		var rev uint64
		var node string
		if c.Record != nil {
			rev = c.Record.GetMetadata().GetResourceVersion()
			var ok bool
			if node, ok = events.SpecString(c.Record.GetSpec(), "nodeName"); !ok {
				c.Object = projections.ObjectOf(c.Record)
			}
		}
		if c.Object != nil {
			rev = c.Object.GetMetadata().GetResourceVersion()
			node = c.Object.GetSpec().GetFields()["nodeName"].GetStringValue()
		}
		phase := status.GetDetails().GetFields()["phase"].GetStringValue()
		if phase != string(v1.PodSucceeded) && phase != string(v1.PodFailed) && s.cache.ConfirmAssumed(key, node, rev) {
			return
		}
		pod, err := PodFromObject(changeObject(c))
		if err != nil {
			s.cache.RemovePod(key)
			return
		}
		s.cache.SetPod(pod, rev)
	}
}

// changeObject is c's object, decoded from its record for a watch of
// records.
func changeObject(c projections.Change) *schemas.Object {
	if c.Object == nil && c.Record != nil {
		return projections.ObjectOf(c.Record)
	}
	return c.Object
}

// ProfileName is the profile a pod asks for: its schedulerName, with
// empty and "default-scheduler" meaning DefaultSchedulerName.
func ProfileName(pod *v1.Pod) string {
	if n := pod.Spec.SchedulerName; n != "" && n != v1.DefaultSchedulerName {
		return n
	}
	return DefaultSchedulerName
}

// PodScheduled is the condition type Schedule reports, as in Kubernetes.
const PodScheduled = "PodScheduled"

// Schedule runs one cycle for an unbound pod and queues its Bound event,
// or returns the status that says why it cannot be placed (phase Pending,
// a PodScheduled=False condition with reason Unschedulable and the
// kube-scheduler message). A pod that is bound already, or that names
// another scheduler, is left alone.
//
// Binding is asynchronous (decision 0032): Schedule returns once the Bound
// event is queued, with KeepStatus (the pod's status is written by the run
// its Bound event triggers, so nothing is written before the binding
// lands) and RequeueAfter BindRetry (a pod whose append fails runs again;
// one that binds runs sooner, by its Bound event). The placement is
// assumed until the projection shows the pod bound, so a burst never
// overcommits; a failed append drops the assumption and unreserves. A
// pod whose Bound is still unanswered is not scheduled again.
func (s *Scheduler) Schedule(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	if !s.started.Load() {
		return reconcilers.Result{}, errors.New("scheduler: not started")
	}
	if obj.GetStatus().GetGoal() == projections.GoalDeleted {
		return reconcilers.Result{}, nil
	}
	pod, err := PodFromObject(obj)
	if err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	if pod.Spec.NodeName != "" {
		return reconcilers.Result{}, nil
	}
	name := ProfileName(pod)
	prof := s.cfg.Profiles[name]
	if prof == nil {
		return podScheduled(false, "SchedulerNotFound", fmt.Sprintf("waiting for scheduler %q: no profile of this name", name)), nil
	}
	pi := NewPodInfo(pod)
	key := projections.ObjectKey(obj)
	if s.isBinding(pi.Key) {
		return reconcilers.Result{KeepStatus: true, RequeueAfter: s.cfg.BindRetry}, nil
	}

	d, state, cycle, assumed, st, wait, err := s.runCycle(ctx, prof, pi)
	if err != nil {
		return reconcilers.Result{}, err
	}
	if d.Node == "" {
		if d.Status != nil && d.Status.Code == Error {
			// As kube-scheduler: the pod's condition says SchedulerError
			// with the plugin's message, and the pod runs again.
			s.cfg.Logger.Error("scheduler: cycle failed", "pod", pi.Key, "err", d.Message())
			res := podScheduled(false, "SchedulerError", d.Message())
			res.RequeueAfter = s.cfg.ErrorRetry
			return res, nil
		}
		rejectedBy := make([]string, 0, len(d.RejectedBy))
		for n := range d.RejectedBy {
			rejectedBy = append(rejectedBy, n)
		}
		s.unschedMu.Lock()
		s.unsched[key] = unschedulable{profile: prof, rejectedBy: rejectedBy}
		s.unschedMu.Unlock()
		return podScheduled(false, "Unschedulable", d.Message()), nil
	}
	if !st.IsSuccess() {
		s.cache.Forget(pi.Key)
		return podScheduled(false, "Unschedulable", fmt.Sprintf("%s rejected node %s: %s", st.Plugin, d.Node, st.Message())), nil
	}
	if wait != nil {
		// The binding cycle waits for Permit in the background, as
		// kube-scheduler's does; the pod counts as binding meanwhile.
		s.bindMu.Lock()
		s.binding[pi.Key] = true
		if s.bindIdle == nil {
			s.bindIdle = make(chan struct{})
		}
		s.bindMu.Unlock()
		go s.bindAfterWait(context.WithoutCancel(ctx), prof, state, obj, pi, d, cycle, assumed, wait)
		res := podScheduled(false, "WaitingOnPermit", fmt.Sprintf("waiting on permit (%s) for node %s", wait.plugin, d.Node))
		res.RequeueAfter = s.cfg.BindRetry
		return res, nil
	}
	return s.bindCycle(ctx, prof, state, obj, pi, d, cycle, assumed)
}

// permitWait is a pod waiting on Permit.
type permitWait struct {
	wp      *waitingPod
	timeout time.Duration
	plugin  string
}

// bindAfterWait ends a waiting pod's binding cycle: bound once allowed,
// given up (unreserved, forgotten) when rejected or timed out.
func (s *Scheduler) bindAfterWait(ctx context.Context, prof *Profile, state *CycleState, obj *schemas.Object, pi *PodInfo, d *Decision, cycle uint64, assumed []AssumedPod, w *permitWait) {
	if st := s.waiting.wait(ctx, w.wp, w.timeout, w.plugin); !st.IsSuccess() {
		s.unreserve(ctx, prof, state, pi, d.Node)
		s.cache.Forget(pi.Key)
		s.bound(pi.Key)
		s.cfg.Logger.Info("scheduler: waiting pod rejected; it runs again", "pod", pi.Key, "node", d.Node, "reason", st.Message())
		return
	}
	res, err := s.bindCycle(ctx, prof, state, obj, pi, d, cycle, assumed)
	if err != nil {
		s.cfg.Logger.Warn("scheduler: bind after permit failed", "pod", pi.Key, "err", err)
	}
	if err != nil || !res.KeepStatus {
		// Not queued: nothing else ends the binding.
		s.bound(pi.Key)
	}
}

// bindCycle runs PreBind, Bind and (once the binding lands) PostBind.
func (s *Scheduler) bindCycle(ctx context.Context, prof *Profile, state *CycleState, obj *schemas.Object, pi *PodInfo, d *Decision, cycle uint64, assumed []AssumedPod) (reconcilers.Result, error) {
	key := projections.ObjectKey(obj)
	for _, pl := range prof.PreBind {
		if st := pl.PreBind(ctx, state, pi, d.Node); !st.IsSuccess() {
			st.Plugin = pl.Name()
			s.unreserve(ctx, prof, state, pi, d.Node)
			s.cache.Forget(pi.Key)
			msg := fmt.Sprintf("running PreBind plugin %q: %s", pl.Name(), st.Message())
			res := podScheduled(false, "SchedulerError", msg)
			res.RequeueAfter = s.cfg.ErrorRetry
			return res, nil
		}
	}
	failed := func(err error) {
		s.unreserve(context.Background(), prof, state, pi, d.Node)
		s.cache.Forget(pi.Key)
		if !errors.Is(err, events.ErrConflict) && !errors.Is(err, context.Canceled) {
			// (A conflict: the pod changed since it was read; its new
			// version runs again by itself.)
			s.cfg.Logger.Warn("scheduler: bind failed; the pod runs again", "pod", pi.Key, "node", d.Node, "err", err)
		}
	}
	postBind := func() {
		for _, pl := range prof.PostBind {
			pl.PostBind(context.Background(), state, pi, d.Node)
		}
	}
	queued, err := s.bind(ctx, prof, state, obj, pi, d, cycle, assumed, failed, postBind)
	if err != nil {
		failed(err)
		if errors.Is(err, events.ErrConflict) {
			return reconcilers.Result{}, nil
		}
		return reconcilers.Result{}, err
	}
	s.unschedMu.Lock()
	delete(s.unsched, key)
	s.unschedMu.Unlock()
	res := podScheduled(true, "Scheduled", "bound to node "+d.Node)
	if !queued {
		postBind()
	}
	if queued {
		res = podScheduled(true, "Scheduled", "binding to node "+d.Node)
		res.KeepStatus, res.RequeueAfter = true, s.cfg.BindRetry
	}
	return res, nil
}

func (s *Scheduler) isBinding(pod string) bool {
	s.bindMu.Lock()
	defer s.bindMu.Unlock()
	return s.binding[pod]
}

// Flush waits until every queued Bound event is answered.
func (s *Scheduler) Flush(ctx context.Context) error {
	for {
		s.bindMu.Lock()
		idle := s.bindIdle
		s.bindMu.Unlock()
		if idle == nil {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// podScheduled is the status of a scheduling attempt, the Kubernetes way:
// phase Pending and a PodScheduled condition, both in jetplane's status
// and in the v1 PodStatus details.
func podScheduled(ok bool, reason, msg string) reconcilers.Result {
	status := "False"
	if ok {
		status = "True"
	}
	// Built as structpb values directly (structpb.NewStruct goes through
	// map[string]any): this runs once per placement.
	str := structpb.NewStringValue
	cond := structpb.NewStructValue(&structpb.Struct{Fields: map[string]*structpb.Value{
		"type": str(PodScheduled), "status": str(status), "reason": str(reason), "message": str(msg)}})
	details := &structpb.Struct{Fields: map[string]*structpb.Value{
		"phase":      str(string(v1.PodPending)),
		"conditions": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{cond}}),
	}}
	conds := []*schemas.Condition{{Type: PodScheduled, Status: status, Reason: reason, Message: msg}}
	if !ok {
		// Without it the runtime would record the run's success as
		// Ready=True: a pod no node takes is not ready.
		conds = append(conds, &schemas.Condition{Type: reconcilers.ConditionReady, Status: "False", Reason: reason, Message: msg})
	}
	return reconcilers.Result{Phase: "Pending", Message: msg, Details: details, Conditions: conds}
}

// runCycle runs the scheduling cycle under the cycle lock: the plugins
// from PreFilter to Permit, as kube-scheduler's scheduling cycle (a
// plugin may keep state from one extension point to the next). It assumes
// the placement, so the next cycle counts it; st is a Reserve or Permit
// rejection, wait a Permit wait.
func (s *Scheduler) runCycle(ctx context.Context, prof *Profile, pi *PodInfo) (d *Decision, state *CycleState, cycle uint64, assumed []AssumedPod, st *Status, wait *permitWait, err error) {
	s.cycleMu.Lock()
	defer s.cycleMu.Unlock()
	if _, err := s.sync(); err != nil {
		return nil, nil, 0, nil, nil, nil, err
	}
	s.cycle++
	assumed = s.cache.Assumed()
	state = NewCycleState(s.cache.Snapshot(), s.cycle)
	d = Cycle(ctx, prof, state, pi, s.start)
	s.start = d.NextStartIndex
	if d.Node != "" {
		s.cache.Assume(pi, d.Node)
		st, wait = s.reserveAndPermit(ctx, prof, state, pi, d.Node)
	}
	return d, state, s.cycle, assumed, st, wait, nil
}

// reserveAndPermit runs Reserve and Permit; a Permit that says Wait makes
// the pod a waiting pod (wait non-nil) with the shortest timeout asked.
func (s *Scheduler) reserveAndPermit(ctx context.Context, p *Profile, state *CycleState, pi *PodInfo, node string) (*Status, *permitWait) {
	for _, pl := range p.Reserve {
		if st := pl.Reserve(ctx, state, pi, node); !st.IsSuccess() {
			st.Plugin = pl.Name()
			// As kube-scheduler: every Reserve plugin is told, the failed
			// one included.
			s.unreserve(ctx, p, state, pi, node)
			return st, nil
		}
	}
	var wait *permitWait
	for _, pl := range p.Permit {
		st, timeout := pl.Permit(ctx, state, pi, node)
		if st.IsWait() {
			const maxTimeout = 15 * time.Minute
			if timeout <= 0 || timeout > maxTimeout {
				timeout = maxTimeout
			}
			if wait == nil || timeout < wait.timeout {
				wait = &permitWait{timeout: timeout, plugin: pl.Name()}
			}
			continue
		}
		if !st.IsSuccess() {
			st.Plugin = pl.Name()
			s.unreserve(ctx, p, state, pi, node)
			return st, nil
		}
	}
	if wait != nil {
		wait.wp = s.waiting.add(pi.Pod)
	}
	return nil, wait
}

func (s *Scheduler) unreserve(ctx context.Context, p *Profile, state *CycleState, pi *PodInfo, node string) {
	for i := len(p.Reserve) - 1; i >= 0; i-- {
		p.Reserve[i].Unreserve(ctx, state, pi, node)
	}
}

type bindRequest struct {
	pod   string
	obj   *schemas.Object // the pod as read, unbound
	entry events.Entry
	// failed is called when the append fails, done when it lands.
	failed func(error)
	done   func()
}

// bind runs the Bind plugins, or queues the pod's Bound event (queued
// true): failed is then called if the append fails.
func (s *Scheduler) bind(ctx context.Context, p *Profile, state *CycleState, obj *schemas.Object, pi *PodInfo, d *Decision, cycle uint64, assumed []AssumedPod, failed func(error), done func()) (queued bool, err error) {
	for _, pl := range p.Bind {
		st := pl.Bind(ctx, state, pi, d.Node)
		if st.IsSkip() {
			continue
		}
		if !st.IsSuccess() {
			st.Plugin = pl.Name()
			return false, st
		}
		return false, nil
	}
	ev, err := BoundEvent(obj, d, cycle, assumed)
	if err != nil {
		return false, err
	}
	ev.Actor = "scheduler/" + p.Name + "@" + s.cfg.Instance
	ev.Time = timestamppb.New(s.cfg.Now())
	req := &bindRequest{pod: pi.Key, obj: obj, entry: events.Entry{Event: ev, Expect: obj.GetMetadata().GetResourceVersion()}, failed: failed, done: done}
	s.bindMu.Lock()
	s.binding[pi.Key] = true
	if s.bindIdle == nil {
		s.bindIdle = make(chan struct{})
	}
	s.bindMu.Unlock()
	select {
	case s.binds <- req:
		return true, nil
	case <-ctx.Done():
		s.bound(req.pod)
		return false, ctx.Err()
	}
}

// bound ends pod's binding.
func (s *Scheduler) bound(pod string) {
	s.bindMu.Lock()
	defer s.bindMu.Unlock()
	delete(s.binding, pod)
	if len(s.binding) == 0 && s.bindIdle != nil {
		close(s.bindIdle)
		s.bindIdle = nil
	}
}

// boundPod is obj as its Bound event ev, stored at seq, leaves it.
func boundPod(obj *schemas.Object, ev *schemas.Event, seq uint64) *schemas.Object {
	out := &schemas.Object{ApiVersion: obj.GetApiVersion(), Kind: obj.GetKind(), Metadata: proto.CloneOf(obj.GetMetadata()), Spec: ev.GetObject().GetSpec(), Status: obj.GetStatus()}
	if out.Metadata == nil {
		out.Metadata = &schemas.ObjectMeta{}
	}
	out.Metadata.ResourceVersion = seq
	return out
}

// BoundEvent is the Bound event of a decision: the pod's spec with nodeName
// set, the decision in detail (Record's Struct, held encoded: read it with
// ParseRecord).
func BoundEvent(obj *schemas.Object, d *Decision, cycle uint64, assumed []AssumedPod) (*schemas.Event, error) {
	// A new top-level map over the pod's field values, which stay shared
	// and are never changed (objects from the projection are read-only):
	// a deep copy of the spec, for every pod placed, only to set one field.
	fields := obj.GetSpec().GetFields()
	spec := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(fields)+1)}
	for k, v := range fields {
		spec.Fields[k] = v
	}
	spec.Fields["nodeName"] = structpb.NewStringValue(d.Node)
	// The decision is encoded here, to the bytes of Record's Struct.
	detail := encodedRecord(d, cycle, assumed)
	key := projections.ObjectKey(obj)
	return &schemas.Event{
		Type: schemas.EventType_EVENT_TYPE_BOUND, Key: key.Proto(),
		Object: &schemas.Object{ApiVersion: obj.GetApiVersion(), Kind: obj.GetKind(),
			Metadata: &schemas.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Uid: obj.GetMetadata().GetUid()}, Spec: spec},
		Detail: detail,
	}, nil
}

// bindLoop appends queued Bound events: whatever is queued goes out
// together (up to BatchSize), and up to BatchesInFlight batches await
// their acknowledgements at once.
func (s *Scheduler) bindLoop(ctx context.Context) error {
	// BatchesInFlight workers append the batches, each waiting for its
	// acknowledgements; they live as long as the loop, so their stacks
	// stay grown (encoding an event is deep: a goroutine per batch copied
	// its stack as it grew, every batch).
	work := make(chan []*bindRequest)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(work)
	for range s.cfg.BatchesInFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range work {
				s.appendBatch(ctx, batch)
			}
		}()
	}
	for {
		batch := make([]*bindRequest, 0, 16)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-s.binds:
			batch = append(batch, r)
		}
	fill:
		for len(batch) < s.cfg.BatchSize {
			select {
			case r := <-s.binds:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		select {
		case work <- batch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// appendBatch appends one batch of Bound events and answers each request.
func (s *Scheduler) appendBatch(ctx context.Context, batch []*bindRequest) {
	entries := make([]events.Entry, len(batch))
	for i, r := range batch {
		entries[i] = r.entry
	}
	results, errs := s.cfg.Log.AppendAsync(ctx, entries)
	for i, r := range batch {
		if errs != nil && errs[i] != nil {
			r.failed(errs[i])
		} else {
			if r.done != nil {
				r.done()
			}
			if s.cfg.Bound != nil && i < len(results) {
				s.cfg.Bound(boundPod(r.obj, r.entry.Event, results[i].Sequence))
			}
		}
		s.bound(r.pod)
	}
}

// Requeue is the queueing hint: the unbound pods that a change of rec may
// let fit. A node that appears or changes may fit any pod found
// unschedulable; a pod that is deleted or finishes frees room. It runs with
// the projection locked and does not call it.
func (s *Scheduler) Requeue(rec *schemas.ObjectRecord) []projections.Key {
	if rec == nil {
		return nil
	}
	var action ActionType
	switch rec.GetKind() {
	case "Node":
		// The record does not say whether the node is new: a node
		// change counts as both an addition and an update.
		action = Add | Update
		if rec.GetStatus().GetGoal() == projections.GoalDeleted {
			action = Delete
		}
	case "Pod":
		action = Delete
		phase := ""
		if d := rec.GetStatus().GetDetails(); d != nil {
			phase = d.GetFields()["phase"].GetStringValue()
		}
		if rec.GetStatus().GetGoal() != projections.GoalDeleted && phase != string(v1.PodSucceeded) && phase != string(v1.PodFailed) {
			return nil
		}
	default:
		return nil
	}
	s.unschedMu.Lock()
	defer s.unschedMu.Unlock()
	out := make([]projections.Key, 0, len(s.unsched))
	for k, u := range s.unsched {
		if u.profile == nil || u.profile.Interested(context.Background(), u.rejectedBy, rec.GetKind(), action) {
			out = append(out, k)
		}
	}
	return out
}
