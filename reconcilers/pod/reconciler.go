package pod

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetplane/jetplane/events"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/podspec"
)

// Scheduler places unbound pods (issue 10 implements it in package scheduler).
type Scheduler interface {
	// Schedule runs one scheduling cycle for pod (no nodeName): it appends a Bound event, or returns the status saying why not.
	Schedule(ctx context.Context, pod *schemas.Object) (reconcilers.Result, error)
	// Requeue maps a changed object (a Node or Pod, as the projection keeps it) to unbound pods that may now fit. Quick; must not call the projection.
	Requeue(rec *schemas.ObjectRecord) []projections.Key
}

// State is the projection the reconciler reads.
type State interface {
	Get(k projections.Key) *schemas.Object
}

// Work is where pods bound to a node are handed to its agent.
type Work interface {
	PutWork(ctx context.Context, node, namespace, name string, data []byte) (bool, error)
	DeleteWork(ctx context.Context, node, namespace, name string) error
}

// WorkCreator is a Work that can create a pod's work item only where the
// pod never had one (not even one since deleted); Bound needs it.
type WorkCreator interface {
	// CreateWork reports false, without error, when the pod has or had
	// an item.
	CreateWork(ctx context.Context, node, namespace, name string, data []byte) (bool, error)
}

// Config configures a Reconciler.
type Config struct {
	State State
	Work  Work
	// Scheduler places pods without a nodeName; nil leaves them Pending
	// (reason Unschedulable-until-scheduled).
	Scheduler Scheduler
	// SealKeys finds the key a node's Secret values are sealed for; nil
	// refuses pods that take env from Secrets (they never go in clear).
	SealKeys SealKeys
}

// SealKeys finds the public key node publishes for sealing its pods'
// Secret values.
type SealKeys interface {
	SealKey(ctx context.Context, node string) ([]byte, error)
}

// Heartbeats reads nodes' latest heartbeats.
type Heartbeats interface {
	Heartbeat(ctx context.Context, node string) (events.Heartbeat, error)
}

// HeartbeatKeys finds seal keys in nodes' heartbeats (podspec.Report),
// which only a node's own credential can write.
type HeartbeatKeys struct{ Heartbeats Heartbeats }

// SealKey implements SealKeys.
func (h HeartbeatKeys) SealKey(ctx context.Context, node string) ([]byte, error) {
	hb, err := h.Heartbeats.Heartbeat(ctx, node)
	if err != nil {
		return nil, err
	}
	var rep podspec.Report
	if err := json.Unmarshal(hb.Data, &rep); err != nil {
		return nil, fmt.Errorf("heartbeat of %s: %w", node, err)
	}
	if len(rep.SealKey) == 0 {
		return nil, fmt.Errorf("node %s publishes no key to seal Secret values for: run a newer node agent there", node)
	}
	return rep.SealKey, nil
}

// Reconciler is the one reconciler of kind Pod. For a bound pod it
// resolves what the agent needs (env from ConfigMaps and Secrets) into
// the pod's work item on its node, and leaves status to the agent; for an
// unbound one it asks the scheduler. It finalizes a pod once its agent
// reports it Terminated, or at once when the node is gone or NotReady.
type Reconciler struct {
	cfg Config

	mu sync.Mutex
	// waiting maps an object a pod waits for (its node, a ConfigMap) to
	// the pods waiting, so that its arrival runs them.
	waiting map[projections.Key]map[projections.Key]bool
	// sealed keeps each pod's last sealed values by what they seal, so
	// that a reconcile that changes nothing writes the same work item
	// (sealing is randomized).
	sealed map[projections.Key]sealedWork

	handoffOnce sync.Once
	handoffs    chan struct{} // a slot per handover running
	inflight    sync.WaitGroup
}

type sealedWork struct {
	digest [32]byte // of the key, the node and pod, and the values
	sealed []byte
}

var _ reconcilers.Watcher = (*Reconciler)(nil)

// NewReconciler validates cfg.
func NewReconciler(cfg Config) (*Reconciler, error) {
	if cfg.State == nil || cfg.Work == nil {
		return nil, errors.New("pod reconciler: state and work are required")
	}
	return &Reconciler{cfg: cfg, waiting: map[projections.Key]map[projections.Key]bool{}, sealed: map[projections.Key]sealedWork{}}, nil
}

// Kinds implements reconcilers.Reconciler.
func (r *Reconciler) Kinds() []string { return []string{podspec.KindPod} }

// Owners implements reconcilers.Watcher: the scheduler's requeues, and
// pods waiting for the changed object.
func (r *Reconciler) Owners(rec *schemas.ObjectRecord) []projections.Key {
	var out []projections.Key
	if r.cfg.Scheduler != nil {
		out = r.cfg.Scheduler.Requeue(rec)
	}
	k := projections.ObjectKey(&schemas.Object{ApiVersion: rec.GetApiVersion(), Kind: rec.GetKind(), Metadata: rec.GetMetadata()})
	r.mu.Lock()
	for p := range r.waiting[k] {
		out = append(out, p)
	}
	r.mu.Unlock()
	return out
}

func (r *Reconciler) wait(pod, on projections.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waiting[on] == nil {
		r.waiting[on] = map[projections.Key]bool{}
	}
	r.waiting[on][pod] = true
}

func (r *Reconciler) unwait(pod projections.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for on, pods := range r.waiting {
		delete(pods, pod)
		if len(pods) == 0 {
			delete(r.waiting, on)
		}
	}
}

func notReady(reason, msg string) []*schemas.Condition {
	return []*schemas.Condition{{Type: ConditionReady, Status: "False", Reason: reason, Message: msg}}
}

// pending is the status of a pod no agent has reported on yet.
func pending(reason, msg string) reconcilers.Result {
	return reconcilers.Result{Phase: PhasePending, Message: msg, Conditions: notReady(reason, msg)}
}

// Reconcile implements reconcilers.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	key := projections.ObjectKey(obj)
	r.unwait(key)
	if handedOver(obj) {
		// Its agent runs this generation already: a status report needs
		// nothing of this reconciler (and a pod start reports four).
		return reconcilers.Result{KeepStatus: true}, nil
	}
	spec, err := podspec.Pod(obj.GetSpec())
	if err != nil {
		// Only an outside publisher can store a spec the gate refuses.
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	if spec.NodeName == "" {
		if r.cfg.Scheduler != nil {
			return r.cfg.Scheduler.Schedule(ctx, obj)
		}
		return pending(ReasonUnschedulable, "no node: set spec.nodeName, or run a scheduler"), nil
	}
	data, node, res, err := r.workItem(ctx, key, obj, spec)
	if err != nil || res != nil {
		return derefResult(res), err
	}
	if _, err := r.cfg.Work.PutWork(ctx, spec.NodeName, key.Namespace, key.Name, data); err != nil {
		return reconcilers.Result{}, err
	}
	if !reported(obj) && node.GetStatus().GetPhase() == NodeNotReady {
		return pending("NodeNotReady", fmt.Sprintf("bound to node %s, which is not ready: its agent is not heard from", spec.NodeName)), nil
	}
	// The node's agent is up: its first report (Registered) follows within
	// moments and is the pod's first status. Writing "waiting for the
	// agent" first would cost every pod start an event, and race it.
	return reconcilers.Result{KeepStatus: true}, nil
}

func derefResult(res *reconcilers.Result) reconcilers.Result {
	if res == nil {
		return reconcilers.Result{}
	}
	return *res
}

// workItem is the encoded work item of bound pod obj for its node, and
// the node; or the status to record instead (res) when the pod cannot be
// handed over yet (its node or an object its env names is missing).
func (r *Reconciler) workItem(ctx context.Context, key projections.Key, obj *schemas.Object, spec *corev1.PodSpec) (data []byte, node *schemas.Object, res *reconcilers.Result, err error) {
	nodeKey := projections.Key{Kind: podspec.KindNode, Name: spec.NodeName}
	node = r.cfg.State.Get(nodeKey)
	if node == nil {
		r.wait(key, nodeKey)
		p := pending("NodeNotFound", fmt.Sprintf("node %q does not exist; start its agent with jetplane node --name %s", spec.NodeName, spec.NodeName))
		return nil, nil, &p, nil
	}
	secrets, err := r.resolveEnv(key, obj.GetMetadata().GetNamespace(), spec)
	if err != nil {
		p := pending("CreateContainerConfigError", err.Error())
		return nil, nil, &p, nil
	}
	w := &podspec.Work{Namespace: key.Namespace, Name: key.Name, UID: obj.GetMetadata().GetUid(), Generation: obj.GetMetadata().GetGeneration(), Spec: *spec,
		Finished: reported(obj) && finished(obj.GetStatus())}
	if len(secrets) > 0 {
		if err := r.seal(ctx, key, spec.NodeName, w, secrets); err != nil {
			p := pending("CreateContainerConfigError", err.Error())
			return nil, nil, &p, nil
		}
	}
	data, err = w.Encode()
	if err != nil {
		return nil, nil, nil, err
	}
	return data, node, nil, nil
}

// handedOver tells whether the pod's agent has reported running this
// generation of it, and it has not ended for good: its work item holds
// what this reconciler would write again (only a pod's end, a new
// generation or a new incarnation changes it; a new incarnation starts
// without status). Values its env takes from ConfigMaps are read when
// the pod is handed over, as a kubelet reads them when it creates the
// container.
func handedOver(obj *schemas.Object) bool {
	st := obj.GetStatus()
	return reported(obj) && st.GetGoal() != projections.GoalDeleted &&
		st.GetObservedGeneration() == obj.GetMetadata().GetGeneration() && !finished(st) && StateOf(st) != "Terminated"
}

// Bound hands a pod the scheduler has just bound (obj as its Bound event
// left it) to its node at once, without waiting for the pod's own run:
// under a burst that run comes after every other pod's scheduling run,
// and the node would start nothing until all are placed. The handover
// only ever creates the work item of a pod that never had one, so it can
// neither bring back a deleted pod's item nor undo what a run wrote; the
// pod's run follows as always and finds the item written. It does not
// block: at most handoffWorkers handovers run at once.
func (r *Reconciler) Bound(obj *schemas.Object) {
	c, ok := r.cfg.Work.(WorkCreator)
	if !ok {
		return
	}
	r.handoffOnce.Do(func() { r.handoffs = make(chan struct{}, handoffWorkers) })
	r.inflight.Add(1)
	go func() {
		defer r.inflight.Done()
		r.handoffs <- struct{}{}
		defer func() { <-r.handoffs }()
		ctx, cancel := context.WithTimeout(context.Background(), handoffTimeout)
		defer cancel()
		if err := r.handoff(ctx, c, obj); err != nil {
			// The pod's own run writes the item.
			slog.Debug("pod handover failed; its run hands it over", "pod", projections.ObjectKey(obj), "err", err)
		}
	}()
}

// Handover bounds.
const (
	handoffWorkers = 16
	handoffTimeout = 10 * time.Second
)

func (r *Reconciler) handoff(ctx context.Context, c WorkCreator, obj *schemas.Object) error {
	key := projections.ObjectKey(obj)
	spec, err := podspec.Pod(obj.GetSpec())
	if err != nil || spec.NodeName == "" {
		return err
	}
	data, node, res, err := r.workItem(ctx, key, obj, spec)
	if err != nil || res != nil || node.GetStatus().GetPhase() == NodeNotReady {
		return err
	}
	_, err = c.CreateWork(ctx, spec.NodeName, key.Namespace, key.Name, data)
	return err
}

// reported tells whether a node agent has written the pod's status (its
// statuses carry v1 details; the reconciler's never do).
func reported(obj *schemas.Object) bool { return obj.GetStatus().GetDetails() != nil }

// seal puts the pod's Secret values into w, sealed for its node.
func (r *Reconciler) seal(ctx context.Context, pod projections.Key, node string, w *podspec.Work, env podspec.SealedEnv) error {
	if r.cfg.SealKeys == nil {
		return errors.New("this instance cannot seal Secret values for nodes; take the value from a ConfigMap or run the pod on an instance with node agents")
	}
	pub, err := r.cfg.SealKeys.SealKey(ctx, node)
	if err != nil {
		return fmt.Errorf("sealing the pod's Secret values for node %s: %w", node, err)
	}
	plain, err := json.Marshal(env)
	if err != nil {
		return err
	}
	h := sha256.New()
	for _, part := range [][]byte{pub, []byte(node), []byte(w.Namespace + "/" + w.Name + "/" + w.UID), plain} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	var digest [32]byte
	h.Sum(digest[:0])
	r.mu.Lock()
	prev, ok := r.sealed[pod]
	r.mu.Unlock()
	if ok && prev.digest == digest {
		w.Sealed = prev.sealed
		return nil
	}
	if err := w.Seal(node, pub, env); err != nil {
		return err
	}
	r.mu.Lock()
	r.sealed[pod] = sealedWork{digest: digest, sealed: w.Sealed}
	r.mu.Unlock()
	return nil
}

// resolveEnv replaces env valueFrom with the values of the ConfigMaps and
// Secrets named, so the agent never reads them itself: a ConfigMap's in
// the spec, a Secret's returned (to be sealed) and left empty in the
// spec. A missing object or key makes the pod wait for it.
func (r *Reconciler) resolveEnv(pod projections.Key, ns string, spec *corev1.PodSpec) (podspec.SealedEnv, error) {
	var secrets podspec.SealedEnv
	for i := range spec.Containers {
		c := &spec.Containers[i]
		for j := range c.Env {
			e := &c.Env[j]
			if e.ValueFrom == nil {
				continue
			}
			var kind, name, key string
			optional := false
			switch vf := e.ValueFrom; {
			case vf.ConfigMapKeyRef != nil:
				kind, name, key = "ConfigMap", vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key
				optional = vf.ConfigMapKeyRef.Optional != nil && *vf.ConfigMapKeyRef.Optional
			case vf.SecretKeyRef != nil:
				kind, name, key = "Secret", vf.SecretKeyRef.Name, vf.SecretKeyRef.Key
				optional = vf.SecretKeyRef.Optional != nil && *vf.SecretKeyRef.Optional
			}
			ref := projections.Key{Kind: kind, Namespace: ns, Name: name}
			val, found, err := r.lookup(ref, key)
			if err != nil {
				return nil, fmt.Errorf("container %s env %s: %w", c.Name, e.Name, err)
			}
			if !found && !optional {
				r.wait(pod, ref)
				return nil, fmt.Errorf("container %s env %s: %s has no key %q (or does not exist)", c.Name, e.Name, ref, key)
			}
			e.Value, e.ValueFrom = val, nil
			if kind == "Secret" && found {
				if secrets == nil {
					secrets = podspec.SealedEnv{}
				}
				if secrets[c.Name] == nil {
					secrets[c.Name] = map[string]string{}
				}
				secrets[c.Name][e.Name] = val
				e.Value = ""
			}
		}
	}
	return secrets, nil
}

func (r *Reconciler) lookup(ref projections.Key, key string) (string, bool, error) {
	obj := r.cfg.State.Get(ref)
	if obj == nil || obj.GetStatus().GetGoal() == projections.GoalDeleted {
		return "", false, nil
	}
	fields := obj.GetSpec().GetFields()
	if ref.Kind == "Secret" {
		if v, ok := fields["stringData"].GetStructValue().GetFields()[key]; ok {
			return v.GetStringValue(), true, nil
		}
		if v, ok := fields["data"].GetStructValue().GetFields()[key]; ok {
			b, err := base64.StdEncoding.DecodeString(v.GetStringValue())
			if err != nil {
				return "", false, fmt.Errorf("%s data.%s is not base64", ref, key)
			}
			return string(b), true, nil
		}
		return "", false, nil
	}
	v, ok := fields["data"].GetStructValue().GetFields()[key]
	return v.GetStringValue(), ok, nil
}

// Finalize implements reconcilers.Reconciler: it asks the agent to stop
// the pod and finishes once the agent reports it Terminated; a pod whose
// node is gone, NotReady or never ran it needs no agent.
func (r *Reconciler) Finalize(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	key := projections.ObjectKey(obj)
	r.unwait(key)
	r.mu.Lock()
	delete(r.sealed, key)
	r.mu.Unlock()
	spec, err := podspec.Pod(obj.GetSpec())
	if err != nil || spec.NodeName == "" {
		return reconcilers.Result{}, nil
	}
	node := r.cfg.State.Get(projections.Key{Kind: podspec.KindNode, Name: spec.NodeName})
	st := obj.GetStatus()
	// Nothing runs for a pod that is gone from a lost node, stopped, or
	// finished for good: no agent needs to confirm.
	if node == nil || node.GetStatus().GetPhase() == NodeNotReady || StateOf(st) == "Terminated" || st.GetPhase() == PhaseFailed || (reported(obj) && finished(st)) {
		return reconcilers.Result{}, r.cfg.Work.DeleteWork(ctx, spec.NodeName, key.Namespace, key.Name)
	}
	w := &podspec.Work{Namespace: key.Namespace, Name: key.Name, UID: obj.GetMetadata().GetUid(), Generation: obj.GetMetadata().GetGeneration(), Spec: *spec, Deleted: true}
	data, err := w.Encode()
	if err != nil {
		return reconcilers.Result{}, err
	}
	if _, err := r.cfg.Work.PutWork(ctx, spec.NodeName, key.Namespace, key.Name, data); err != nil {
		return reconcilers.Result{}, err
	}
	// The agent's Terminated report runs the pod again; the requeue is a
	// safety net for a report that got lost.
	return reconcilers.Result{RequeueAfter: pollTerminated, KeepStatus: true}, nil
}

// pollTerminated is how often a deleting pod looks for its agent's report
// when none arrived.
const pollTerminated = 5 * 1e9

// NodeNotReady is the phase of a Node whose heartbeat stopped.
const NodeNotReady = "NotReady"
