package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

const (
	// FieldManager is the field manager of jetplane's server-side applies.
	FieldManager = "jetplane"
	// ConditionApplied is the status condition that records the applied
	// object: message "uid=<uid> resourceVersion=<rv>".
	ConditionApplied = "Applied"
	// DefaultNamespace is where a namespaced manifest without a namespace
	// goes, as with kubectl.
	DefaultNamespace = "default"

	// How often a run that waits on a cluster looks again. The bridge's
	// Observed events usually run the Apply sooner.
	finalizePoll    = 500 * time.Millisecond
	terminatingPoll = time.Second
)

// State is the projection of current state, as far as Finalize reads it.
type State interface {
	Get(projections.Key) *schemas.Object
}

// Config configures a Reconciler. It is read once, by New.
type Config struct {
	// Clusters maps the cluster names that Apply objects name in
	// spec.cluster to the client configuration of their apiservers.
	// Names must not contain "/" (they prefix observed namespaces).
	Clusters map[string]*rest.Config
	// State is the projection; Finalize waits until it no longer holds
	// the observed key of the deleted object.
	State State
}

func (c Config) validate() error {
	if len(c.Clusters) == 0 {
		return errors.New("apply: Config.Clusters is empty: configure at least one cluster")
	}
	for name, rc := range c.Clusters {
		if name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("apply: cluster name %q: must be non-empty and contain no '/'", name)
		}
		if rc == nil {
			return fmt.Errorf("apply: cluster %q: nil *rest.Config", name)
		}
	}
	if c.State == nil {
		return errors.New("apply: Config.State is nil")
	}
	return nil
}

// Reconciler reconciles Apply objects. It is safe for concurrent use.
type Reconciler struct {
	clusters map[string]*cluster
	names    []string // sorted, for error messages
	state    State
}

var _ reconcilers.Watcher = (*Reconciler)(nil)

// New checks cfg and builds the clients of every cluster. It does not
// reach the clusters: discovery runs on the first Apply of each.
func New(cfg Config) (*Reconciler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Reconciler{clusters: make(map[string]*cluster, len(cfg.Clusters)), state: cfg.State}
	for name, rc := range cfg.Clusters {
		c, err := newCluster(rc)
		if err != nil {
			return nil, fmt.Errorf("apply: cluster %q: %w", name, err)
		}
		r.clusters[name] = c
		r.names = append(r.names, name)
	}
	slices.Sort(r.names)
	return r, nil
}

// Kinds implements reconcilers.Reconciler.
func (r *Reconciler) Kinds() []string { return []string{Kind} }

// Reconcile implements reconcilers.Reconciler: it applies the manifest
// unless the live object already holds it, and records the applied
// object's uid and resourceVersion in condition Applied.
func (r *Reconciler) Reconcile(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	t, err := decode(obj)
	if err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	ri, key, live, err := r.read(ctx, t)
	if err != nil {
		return reconcilers.Result{}, err
	}
	name := t.obj.GetName()
	switch {
	case live == nil:
	case live.GetDeletionTimestamp() != nil:
		msg := key.String() + " is being deleted in its cluster; it is applied again once it is gone"
		return reconcilers.Result{
			RequeueAfter: terminatingPoll,
			Phase:        reconcilers.PhaseWaiting,
			Message:      msg,
			Conditions:   []*schemas.Condition{{Type: reconcilers.ConditionReady, Status: "False", Reason: "Terminating", Message: msg}},
		}, nil
	case ownedByOther(live.GetLabels(), t.owner):
		// Applying with Force would take the object over, and the other
		// Apply would take it back on the Observed event that follows:
		// the two would fight for ever. Not terminal: once the other
		// Apply is deleted (and with it the object), a retry applies.
		l := live.GetLabels()
		return reconcilers.Result{}, fmt.Errorf(
			"%s belongs to Apply %s/%s (labels %s, %s): delete that Apply, or remove its labels from the object",
			key, l[LabelApplyNamespace], l[LabelApplyName], LabelApplyNamespace, LabelApplyName)
	case inSync(t.obj.Object, live.Object):
		return applied(key, live), nil
	}
	body, err := json.Marshal(t.obj.Object)
	if err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(fmt.Errorf("spec.manifest: %w", err))
	}
	force := true
	out, err := ri.Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{
		FieldManager: FieldManager,
		Force:        &force,
		// Unknown or duplicate fields fail the apply with the field named,
		// instead of being dropped, which would also make the object look
		// drifted at every resync.
		FieldValidation: metav1.FieldValidationStrict,
	})
	if err != nil {
		return reconcilers.Result{}, classify("apply "+key.String(), err)
	}
	return applied(key, out), nil
}

// Finalize implements reconcilers.Reconciler: it deletes the object from
// its cluster (in the background, as kubectl does) and then waits until
// the bridge has observed it gone, so that when the Apply leaves current
// state its object has too. An object that another Apply has since taken
// over is left alone; an Apply whose manifest never decoded, or whose kind
// the cluster no longer serves, had nothing to delete.
func (r *Reconciler) Finalize(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	t, err := decode(obj)
	if err != nil {
		return reconcilers.Result{}, nil
	}
	ri, key, live, err := r.read(ctx, t)
	if meta.IsNoMatchError(err) {
		return reconcilers.Result{}, nil
	}
	if err != nil {
		return reconcilers.Result{}, err
	}
	name := t.obj.GetName()
	switch {
	case live == nil:
	case ownedByOther(live.GetLabels(), t.owner):
		return reconcilers.Result{}, nil
	case live.GetDeletionTimestamp() == nil:
		// The uid precondition deletes the object just read, never one
		// that replaced it since.
		uid := live.GetUID()
		background := metav1.DeletePropagationBackground
		err := ri.Delete(ctx, name, metav1.DeleteOptions{
			PropagationPolicy: &background,
			Preconditions:     &metav1.Preconditions{UID: &uid},
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return reconcilers.Result{}, classify("delete "+key.String(), err)
		}
	}
	if o := r.state.Get(key); o != nil && !ownedByOther(o.GetMetadata().GetLabels(), t.owner) {
		return reconcilers.Result{
			RequeueAfter: finalizePoll,
			Message:      "deleted in cluster " + t.cluster + "; waiting for the bridge to observe " + key.String() + " gone",
		}, nil
	}
	return reconcilers.Result{}, nil
}

// Owners implements reconcilers.Watcher: an observed object (its
// namespace holds a "/") that carries both ownership labels runs the Apply
// they name. It allocates only the result.
func (r *Reconciler) Owners(rec *schemas.ObjectRecord) []projections.Key {
	md := rec.GetMetadata()
	if strings.IndexByte(md.GetNamespace(), '/') < 0 {
		return nil
	}
	labels := md.GetLabels()
	ns, ok := labels[LabelApplyNamespace]
	if !ok {
		return nil
	}
	name, ok := labels[LabelApplyName]
	if !ok || name == "" {
		return nil
	}
	return []projections.Key{{Kind: Kind, Namespace: ns, Name: name}}
}

// read resolves t's resource in its cluster and reads the object there
// (nil if it is not there).
func (r *Reconciler) read(ctx context.Context, t *target) (dynamic.ResourceInterface, projections.Key, *unstructured.Unstructured, error) {
	ri, key, err := r.resolve(t)
	if err != nil {
		return nil, key, nil, err
	}
	live, err := ri.Get(ctx, t.obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return ri, key, nil, nil
	case err != nil:
		return nil, key, nil, classify("read "+key.String(), err)
	}
	return ri, key, live, nil
}

// resolve finds t's cluster and resource, settles the manifest's
// namespace by the resource's scope, and returns the client for the
// object and its observed key.
func (r *Reconciler) resolve(t *target) (dynamic.ResourceInterface, projections.Key, error) {
	c, ok := r.clusters[t.cluster]
	if !ok {
		return nil, projections.Key{}, reconcilers.Terminal(fmt.Errorf("spec.cluster: %w %q (configured: %s)",
			ErrUnknownCluster, t.cluster, strings.Join(r.names, ", ")))
	}
	m, err := c.mapping(t.gvk)
	if err != nil {
		return nil, projections.Key{}, classify(fmt.Sprintf("spec.manifest: cluster %s", t.cluster), err)
	}
	var ri dynamic.ResourceInterface = c.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if t.obj.GetNamespace() == "" {
			t.obj.SetNamespace(DefaultNamespace)
		}
		ri = c.dyn.Resource(m.Resource).Namespace(t.obj.GetNamespace())
	} else {
		t.obj.SetNamespace("")
	}
	return ri, ObservedKey(t.cluster, t.obj), nil
}

// ownedByOther reports whether labels name an Apply other than owner.
func ownedByOther(labels map[string]string, owner projections.Key) bool {
	ns, okNS := labels[LabelApplyNamespace]
	name, okName := labels[LabelApplyName]
	return okNS && okName && (ns != owner.Namespace || name != owner.Name)
}

func applied(key projections.Key, u *unstructured.Unstructured) reconcilers.Result {
	return reconcilers.Result{
		Message: "applied as " + key.String(),
		Conditions: []*schemas.Condition{{
			Type:    ConditionApplied,
			Status:  "True",
			Reason:  "Applied",
			Message: fmt.Sprintf("uid=%s resourceVersion=%s", u.GetUID(), u.GetResourceVersion()),
		}},
	}
}
