// Package node runs jetplane's Node kind from node agents' heartbeats:
// the Registrar turns an agent's first heartbeat (and any change of its
// labels or taints) into the Node object, and the Reconciler marks a node
// NotReady when its heartbeat stops for the grace period and, after the
// eviction timeout, fails its pods with reason NodeLost and requests their
// deletion. Heartbeats live in the JP_NODES bucket, never in the log:
// only Ready/NotReady transitions become events.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// Phases and reasons of a Node's status.
const (
	PhaseReady    = "Ready"
	PhaseNotReady = "NotReady"
	ReasonLost    = "NodeLost"
)

// Heartbeats reads the JP_NODES bucket.
type Heartbeats interface {
	Heartbeat(ctx context.Context, node string) (events.Heartbeat, error)
	WatchHeartbeats(ctx context.Context, fn func(events.Heartbeat)) error
}

// State is the projection.
type State interface {
	Get(k projections.Key) *schemas.Object
	List(q projections.Query) ([]*schemas.Object, uint64)
}

// Log appends pods' NodeLost status and deletion, and reads a pod's
// history to restore its last report when its node comes back.
type Log interface {
	Append(ctx context.Context, e events.Entry) (events.Result, error)
	History(ctx context.Context, k *schemas.ObjectKey) ([]*schemas.Event, error)
}

// Appender appends the writes about one node's pods.
type Appender interface {
	Append(ctx context.Context, e events.Entry) (events.Result, error)
}

// Config configures the Reconciler and the Registrar.
type Config struct {
	Heartbeats Heartbeats
	State      State
	Log        Log
	// Grace is how long a heartbeat may be missing before the node is
	// NotReady (default 40 s).
	Grace time.Duration
	// Eviction is how long a node may be NotReady before its pods are
	// failed with reason NodeLost and deleted (default 5 min).
	Eviction time.Duration
	// Actor names the writer of evictions.
	Actor string
	// Door, when set, is how the pods of node are failed, marked Unknown,
	// restored and deleted: the gate's way in for the controller of that
	// Node, which authorizes each write for the pods bound to it only.
	Door   func(node string) Appender
	Now    func() time.Time
	Logger *slog.Logger
}

func (c *Config) defaults() error {
	if c.Heartbeats == nil || c.State == nil || c.Log == nil {
		return errors.New("node: heartbeats, state and log are required")
	}
	if c.Grace <= 0 {
		c.Grace = 40 * time.Second
	}
	if c.Eviction <= 0 {
		c.Eviction = 5 * time.Minute
	}
	if c.Actor == "" {
		c.Actor = "reconciler/Node"
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// Reconciler is the one reconciler of kind Node.
type Reconciler struct{ cfg Config }

// NewReconciler validates cfg.
func NewReconciler(cfg Config) (*Reconciler, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return &Reconciler{cfg: cfg}, nil
}

// Kinds implements reconcilers.Reconciler.
func (r *Reconciler) Kinds() []string { return []string{podspec.KindNode} }

// Verdict is what a node's heartbeat age means: pure, for tests.
type Verdict struct {
	Ready bool
	// Evict: NotReady for the eviction timeout; its pods are lost.
	Evict bool
	// Recheck is when the verdict may next change.
	Recheck time.Duration
	Message string
}

// Judge decides a node's readiness from the age of its last heartbeat
// (negative: none ever).
func Judge(age, grace, eviction time.Duration) Verdict {
	switch {
	case age < 0:
		return Verdict{Message: "the node has never sent a heartbeat", Recheck: grace / 4}
	case age < grace:
		return Verdict{Ready: true, Recheck: grace - age}
	case age < grace+eviction:
		return Verdict{Message: fmt.Sprintf("no heartbeat for %s (grace %s)", age.Round(time.Second), grace), Recheck: min(grace/4, grace+eviction-age)}
	default:
		return Verdict{Evict: true, Message: fmt.Sprintf("no heartbeat for %s; its pods are lost", age.Round(time.Second)), Recheck: grace / 4}
	}
}

// Reconcile implements reconcilers.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	name := obj.GetMetadata().GetName()
	age := time.Duration(-1)
	var rep podspec.Report
	hb, err := r.cfg.Heartbeats.Heartbeat(ctx, name)
	switch {
	case errors.Is(err, events.ErrNotFound):
	case err != nil:
		return reconcilers.Result{}, err
	default:
		age = max(r.cfg.Now().Sub(hb.Time), 0)
		_ = json.Unmarshal(hb.Data, &rep)
	}
	v := Judge(age, r.cfg.Grace, r.cfg.Eviction)
	switch {
	case v.Evict:
		if err := r.evict(ctx, name); err != nil {
			return reconcilers.Result{}, err
		}
	case !v.Ready && age >= 0:
		if err := r.lose(ctx, name); err != nil {
			return reconcilers.Result{}, err
		}
	case v.Ready && obj.GetStatus().GetPhase() == PhaseNotReady:
		if err := r.restore(ctx, name); err != nil {
			return reconcilers.Result{}, err
		}
	}
	res := status(v, rep)
	res.RequeueAfter = v.Recheck
	if same(obj.GetStatus(), res) {
		// Only transitions are events: a node that stays Ready writes
		// nothing, however often it is checked.
		res.KeepStatus = true
	}
	return res, nil
}

func status(v Verdict, rep podspec.Report) reconcilers.Result {
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "the node agent is posting heartbeats"}
	res := reconcilers.Result{Phase: PhaseReady}
	if !v.Ready {
		cond = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", Message: v.Message}
		res.Phase, res.Message = PhaseNotReady, v.Message
	}
	res.Conditions = []*schemas.Condition{{Type: reconcilers.ConditionReady, Status: string(cond.Status), Reason: cond.Reason, Message: cond.Message}}
	if !v.Ready {
		res.Conditions[0].Status = "False"
	}
	ns := corev1.NodeStatus{Capacity: rep.Capacity, Allocatable: rep.Allocatable, Conditions: []corev1.NodeCondition{cond}, NodeInfo: corev1.NodeSystemInfo{KubeletVersion: rep.Agent, OperatingSystem: "wasip1", Architecture: "wasm"}}
	raw, _ := json.Marshal(ns)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	res.Details, _ = structpb.NewStruct(m)
	return res
}

// same reports whether st already says what res would (message aside
// while NotReady: the heartbeat's age in it changes every run).
func same(st *schemas.Status, res reconcilers.Result) bool {
	if st.GetPhase() != res.Phase || len(st.GetConditions()) != len(res.Conditions) {
		return false
	}
	for i, c := range st.GetConditions() {
		if c.GetType() != res.Conditions[i].GetType() || c.GetStatus() != res.Conditions[i].GetStatus() || c.GetReason() != res.Conditions[i].GetReason() {
			return false
		}
	}
	if res.Phase == PhaseReady && !proto.Equal(st.GetDetails(), res.Details) {
		return false
	}
	return true
}

// evict fails every live pod bound to node with reason NodeLost and
// requests its deletion, each with optimistic concurrency on the pod.
func (r *Reconciler) evict(ctx context.Context, node string) error {
	pods, _ := r.cfg.State.List(projections.Query{Kind: podspec.KindPod})
	var errs []error
	for _, p := range pods {
		if p.GetSpec().GetFields()["nodeName"].GetStringValue() != node || p.GetStatus().GetGoal() == projections.GoalDeleted {
			continue
		}
		k := projections.ObjectKey(p)
		now := r.cfg.Now()
		msg := fmt.Sprintf("node %s stopped sending heartbeats", node)
		det, _ := structpb.NewStruct(map[string]any{"phase": "Failed", "reason": ReasonLost, "message": msg})
		st := &schemas.Status{
			Goal: p.GetStatus().GetGoal(), Phase: "Failed", Message: msg, ObservedGeneration: p.GetStatus().GetObservedGeneration(), Details: det,
			Conditions: []*schemas.Condition{{Type: reconcilers.ConditionReady, Status: "False", Reason: ReasonLost, Message: msg, LastTransitionTime: timestamppb.New(now)}},
		}
		res, err := r.appender(node).Append(ctx, events.Entry{Expect: p.GetMetadata().GetResourceVersion(), Event: &schemas.Event{
			Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: k.Proto(), Actor: r.cfg.Actor, Time: timestamppb.New(now), Object: &schemas.Object{Status: st},
		}})
		if err == nil {
			_, err = r.appender(node).Append(ctx, events.Entry{Expect: res.Sequence, Event: &schemas.Event{
				Type: schemas.EventType_EVENT_TYPE_DELETE_REQUESTED, Key: k.Proto(), Actor: r.cfg.Actor, Time: timestamppb.New(now),
			}})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("evict %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// appender is the way in of the writes about node's pods.
func (r *Reconciler) appender(node string) Appender {
	if r.cfg.Door != nil {
		return r.cfg.Door(node)
	}
	return r.cfg.Log
}

// boundTo lists the pods bound to node that are not being deleted.
func (r *Reconciler) boundTo(node string) []*schemas.Object {
	pods, _ := r.cfg.State.List(projections.Query{Kind: podspec.KindPod})
	out := pods[:0]
	for _, p := range pods {
		if p.GetSpec().GetFields()["nodeName"].GetStringValue() == node && p.GetStatus().GetGoal() != projections.GoalDeleted {
			out = append(out, p)
		}
	}
	return out
}

// lost tells whether st is the status lose writes.
func lost(st *schemas.Status) bool {
	return st.GetPhase() == string(corev1.PodUnknown) && st.GetDetails().GetFields()["reason"].GetStringValue() == ReasonLost
}

// lose reports every unfinished pod bound to node as Kubernetes does while
// its node is not ready: phase Unknown, Ready Unknown, reason NodeLost.
// The agent's last report stays in the pod's history; restore brings it
// back. A pod already so reported is not written again.
func (r *Reconciler) lose(ctx context.Context, node string) error {
	var errs []error
	for _, p := range r.boundTo(node) {
		st := p.GetStatus()
		ph := st.GetDetails().GetFields()["phase"].GetStringValue()
		if lost(st) || ph == string(corev1.PodSucceeded) || ph == string(corev1.PodFailed) || st.GetDetails() == nil {
			continue
		}
		msg := fmt.Sprintf("node %s is not ready: its agent is not heard from", node)
		det := proto.CloneOf(st.GetDetails())
		det.Fields["phase"] = structpb.NewStringValue(string(corev1.PodUnknown))
		det.Fields["reason"] = structpb.NewStringValue(ReasonLost)
		det.Fields["message"] = structpb.NewStringValue(msg)
		next := &schemas.Status{
			Goal: st.GetGoal(), Phase: string(corev1.PodUnknown), Message: msg, ObservedGeneration: st.GetObservedGeneration(), Details: det,
			Conditions: []*schemas.Condition{{Type: reconcilers.ConditionReady, Status: "Unknown", Reason: ReasonLost, Message: msg, LastTransitionTime: timestamppb.New(r.cfg.Now())}},
		}
		if err := r.writeStatus(ctx, node, p, next); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// restore puts back, for every pod of node that lose reported Unknown, the
// last status node's agent reported on it (never another node's, nor one
// of an earlier pod of the same name): the agent, never stopped or
// restarted, has no new state to report. A pod the agent reported on
// meanwhile is left as it is.
func (r *Reconciler) restore(ctx context.Context, node string) error {
	var errs []error
	for _, p := range r.boundTo(node) {
		if !lost(p.GetStatus()) {
			continue
		}
		evs, err := r.cfg.Log.History(ctx, projections.ObjectKey(p).Proto())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := len(evs) - 1; i >= 0; i-- {
			ev := evs[i]
			if ev.GetType() == schemas.EventType_EVENT_TYPE_FINALIZED {
				break // an earlier pod of the same name: none of its reports are this one's
			}
			// This node's agent's report, not another node's (an earlier
			// incarnation's, bound elsewhere).
			if ev.GetType() != schemas.EventType_EVENT_TYPE_STATUS_CHANGED || ev.GetActor() != "node/"+node || lost(ev.GetObject().GetStatus()) {
				continue
			}
			prev := proto.CloneOf(ev.GetObject().GetStatus())
			prev.Goal = p.GetStatus().GetGoal()
			if err := r.writeStatus(ctx, node, p, prev); err != nil {
				errs = append(errs, err)
			}
			break
		}
	}
	return errors.Join(errs...)
}

// writeStatus appends st for pod p with optimistic concurrency: a pod whose
// agent wrote meanwhile keeps what its agent wrote.
func (r *Reconciler) writeStatus(ctx context.Context, node string, p *schemas.Object, st *schemas.Status) error {
	_, err := r.appender(node).Append(ctx, events.Entry{Expect: p.GetMetadata().GetResourceVersion(), Event: &schemas.Event{
		Type: schemas.EventType_EVENT_TYPE_STATUS_CHANGED, Key: projections.ObjectKey(p).Proto(), Actor: r.cfg.Actor, Time: timestamppb.New(r.cfg.Now()), Object: &schemas.Object{Status: st},
	}})
	if errors.Is(err, events.ErrConflict) {
		return nil
	}
	return err
}

// Finalize implements reconcilers.Reconciler: a deleted Node leaves; its
// agent, if alive, registers it again on its next heartbeat.
func (r *Reconciler) Finalize(context.Context, *schemas.Object) (reconcilers.Result, error) {
	return reconcilers.Result{}, nil
}

// Registrar turns heartbeats into Node objects.
type Registrar struct {
	cfg Config
	// Apply records a Node as desired state (the gate's Apply).
	apply func(ctx context.Context, obj *schemas.Object) error
}

// NewRegistrar validates cfg; apply records a Node object.
func NewRegistrar(cfg Config, apply func(ctx context.Context, obj *schemas.Object) error) (*Registrar, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	if apply == nil {
		return nil, errors.New("node registrar: apply is required")
	}
	return &Registrar{cfg: cfg, apply: apply}, nil
}

// Desired is the Node object a heartbeat describes.
func Desired(rep podspec.Report) (*schemas.Object, error) {
	spec := map[string]any{}
	if len(rep.Taints) > 0 {
		raw, err := json.Marshal(corev1.NodeSpec{Taints: rep.Taints})
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &spec); err != nil {
			return nil, err
		}
	}
	s, err := structpb.NewStruct(spec)
	if err != nil {
		return nil, err
	}
	return &schemas.Object{ApiVersion: "v1", Kind: podspec.KindNode, Metadata: &schemas.ObjectMeta{Name: rep.Node, Labels: rep.Labels}, Spec: s}, nil
}

// Start registers nodes until ctx ends: every heartbeat whose node is
// missing, being deleted, or differs in labels or taints applies the Node.
func (g *Registrar) Start(ctx context.Context) error {
	for {
		err := g.cfg.Heartbeats.WatchHeartbeats(ctx, func(hb events.Heartbeat) {
			var rep podspec.Report
			if err := json.Unmarshal(hb.Data, &rep); err != nil || rep.Node != hb.Node {
				g.cfg.Logger.Warn("ignoring a heartbeat that does not describe its node", "node", hb.Node)
				return
			}
			want, err := Desired(rep)
			if err != nil {
				return
			}
			cur := g.cfg.State.Get(projections.Key{Kind: podspec.KindNode, Name: rep.Node})
			if cur != nil && cur.GetStatus().GetGoal() != projections.GoalDeleted &&
				maps.Equal(cur.GetMetadata().GetLabels(), want.Metadata.Labels) && proto.Equal(cur.GetSpec(), want.Spec) {
				return
			}
			if err := g.apply(ctx, want); err != nil && ctx.Err() == nil {
				g.cfg.Logger.Warn("registering node failed", "node", rep.Node, "err", err)
			}
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g.cfg.Logger.Warn("watching heartbeats failed; again in 1s", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
