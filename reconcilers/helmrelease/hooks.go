package helmrelease

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"helm.sh/helm/v3/pkg/engine"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/reconcilers/apply"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/manifest"
)

// Helm's hook annotations.
const (
	AnnotationHook         = "helm.sh/hook"
	AnnotationHookWeight   = "helm.sh/hook-weight"
	AnnotationDeletePolicy = "helm.sh/hook-delete-policy"
)

// Hook events jetplane runs, as helm names them.
const (
	PreInstall   = "pre-install"
	PostInstall  = "post-install"
	PreUpgrade   = "pre-upgrade"
	PostUpgrade  = "post-upgrade"
	PreRollback  = "pre-rollback"
	PostRollback = "post-rollback"
	PreDelete    = "pre-delete"
	PostDelete   = "post-delete"
	HookTest     = "test"
)

// Delete policies, as helm names them. A hook that names none is
// deleted before it is created again (before-hook-creation), as in helm.
const (
	BeforeHookCreation = "before-hook-creation"
	HookSucceeded      = "hook-succeeded"
	HookFailed         = "hook-failed"
)

// AnnotationRollback on a HelmRelease, set by `jetplane rollback`, names
// the revision its spec was read from: the release re-applies what that
// revision wrote instead of rendering again.
const AnnotationRollback = "jetplane.dev/rollback-of"

// AnnotationTest on a HelmRelease, set by `jetplane helm test`, asks for
// the release's test hooks to run once for each new value.
const AnnotationTest = "jetplane.dev/test-request"

// hookPoll is how often a running hook is looked at again. A jetplane
// hook's status changes run the release sooner (Owners); a cluster's
// Job is only seen by asking.
const hookPoll = 500 * time.Millisecond

// hook is one rendered hook object.
type hook struct {
	template string
	key      projections.Key // the rendered object's key
	manifest map[string]any
	events   []string
	weight   int
	policies []string
}

func (h hook) String() string { return h.template + ": " + h.key.String() }

func (h hook) has(policy string) bool { return slices.Contains(h.policies, policy) }

// knownEvents are the hook events jetplane runs.
var knownEvents = map[string]bool{PreInstall: true, PostInstall: true, PreUpgrade: true, PostUpgrade: true, PreRollback: true,
	PostRollback: true, PreDelete: true, PostDelete: true, HookTest: true, "test-success": true}

// releaseHooks are a render's hooks by event, each event's in the order
// helm runs them: by weight, then by name. Unsupported lists the hooks
// naming only events jetplane does not know (helm 2's crd-install).
type releaseHooks struct {
	byEvent     map[string][]hook
	unsupported []string
}

func hooksOf(res *render.Result) releaseHooks {
	out := releaseHooks{byEvent: map[string][]hook{}}
	for _, o := range res.Hooks {
		ann := o.Object.GetMetadata().GetAnnotations()
		h := hook{template: fmt.Sprintf("%s:%d", o.Template, o.Line), key: o.Key(), manifest: o.Manifest}
		h.weight, _ = strconv.Atoi(strings.TrimSpace(ann[AnnotationHookWeight]))
		for _, p := range strings.Split(ann[AnnotationDeletePolicy], ",") {
			if p = strings.TrimSpace(p); p != "" {
				h.policies = append(h.policies, p)
			}
		}
		if len(h.policies) == 0 {
			h.policies = []string{BeforeHookCreation}
		}
		known := false
		for _, e := range strings.Split(ann[AnnotationHook], ",") {
			e = strings.TrimSpace(e)
			if e == "test-success" {
				e = HookTest
			}
			if knownEvents[e] {
				known = true
				h.events = append(h.events, e)
				out.byEvent[e] = append(out.byEvent[e], h)
			}
		}
		if !known {
			out.unsupported = append(out.unsupported, fmt.Sprintf("%s (%s)", h, ann[AnnotationHook]))
		}
	}
	for _, hs := range out.byEvent {
		slices.SortStableFunc(hs, func(a, b hook) int {
			if a.weight != b.weight {
				return a.weight - b.weight
			}
			return strings.Compare(a.key.Name, b.key.Name)
		})
	}
	return out
}

// Steps of one hook, recorded so that a run picks up where the last one
// left off.
const (
	stepDelete = "" // delete a previous object of the hook (before-hook-creation)
	stepCreate = "create"
	stepWait   = "wait"
	// stepFailed, followed by the reason: the hook failed; the hooks
	// the delete policies remove are being deleted.
	stepFailed = "failed: "
)

// hookFailure is a hook that failed: the release's revision failed.
type hookFailure struct {
	event string
	hook  hook
	msg   string
}

func (f *hookFailure) Error() string {
	return fmt.Sprintf("%s hook %s failed: %s", f.event, f.hook, f.msg)
}

// runHooks advances the hooks of event from where rec says: it returns
// true once every hook succeeded (and those with hook-succeeded are being
// deleted), false while one runs, and *hookFailure when one failed.
func (r *Reconciler) runHooks(ctx context.Context, release *schemas.Object, spec *Spec, event string, hooks []hook, rec *revisionRecord) (bool, error) {
	for rec.Hook < len(hooks) {
		h := hooks[rec.Hook]
		child, err := r.hookChild(release, spec, h)
		if err != nil {
			return false, &hookFailure{event: event, hook: h, msg: err.Error()}
		}
		k := projections.ObjectKey(child)
		if strings.HasPrefix(rec.Step, stepFailed) {
			return r.cleanUpFailure(ctx, release, spec, event, hooks, rec)
		}
		switch rec.Step {
		case stepDelete:
			if cur := r.cfg.State.Get(k); cur != nil {
				if !h.has(BeforeHookCreation) {
					return false, &hookFailure{event: event, hook: h, msg: fmt.Sprintf("%s already exists (give the hook helm.sh/hook-delete-policy: before-hook-creation)", k)}
				}
				if cur.GetStatus().GetGoal() != projections.GoalDeleted {
					if err := r.cfg.Writer.Delete(ctx, release, r.cfg.Actor, k); err != nil {
						return false, fmt.Errorf("%s hook %s: delete the previous one: %w", event, h, err)
					}
				}
				return false, nil // wait until it is gone
			}
			rec.Step = stepCreate
			fallthrough
		case stepCreate:
			if _, err := r.cfg.Writer.Apply(ctx, release, r.cfg.Actor, []*schemas.Object{child}); err != nil {
				return false, fmt.Errorf("%s hook %s: %w", event, h, err)
			}
			rec.Step = stepWait
			rec.Since = r.cfg.Now().UTC().Format(time.RFC3339)
			fallthrough
		case stepWait:
			done, failed, err := r.hookDone(ctx, spec, h, k)
			if err != nil {
				return false, fmt.Errorf("%s hook %s: %w", event, h, err)
			}
			if since, perr := time.Parse(time.RFC3339, rec.Since); !done && failed == "" && perr == nil && r.cfg.Now().Sub(since) > r.cfg.HookTimeout {
				// As helm's --timeout: the hook fails.
				failed = fmt.Sprintf("not finished after %s (the hook timeout)", r.cfg.HookTimeout)
			}
			if failed != "" {
				rec.Step = stepFailed + failed
				return r.cleanUpFailure(ctx, release, spec, event, hooks, rec)
			}
			if !done {
				return false, nil
			}
			rec.Hook++
			rec.Step, rec.Since = stepDelete, ""
		}
	}
	// As helm: hook-succeeded deletes once every hook of the event
	// succeeded, the last first, and waits until they are gone.
	gone := true
	for i := len(hooks) - 1; i >= 0; i-- {
		h := hooks[i]
		if !h.has(HookSucceeded) {
			continue
		}
		child, err := r.hookChild(release, spec, h)
		if err != nil {
			continue
		}
		k := projections.ObjectKey(child)
		cur := r.cfg.State.Get(k)
		if cur == nil {
			continue
		}
		gone = false
		if cur.GetStatus().GetGoal() == projections.GoalDeleted {
			continue
		}
		if err := r.cfg.Writer.Delete(ctx, release, r.cfg.Actor, k); err != nil {
			return false, fmt.Errorf("%s hook %s: delete after success: %w", event, h, err)
		}
	}
	return gone, nil
}

// cleanUpFailure deletes, as helm does when a hook fails, the failed
// hook when it has hook-failed, then the hooks of the event that had
// succeeded and have hook-succeeded, each step once the last is gone;
// then it returns the failure.
func (r *Reconciler) cleanUpFailure(ctx context.Context, release *schemas.Object, spec *Spec, event string, hooks []hook, rec *revisionRecord) (bool, error) {
	h := hooks[rec.Hook]
	steps := [][]hook{nil, nil}
	if h.has(HookFailed) {
		steps[0] = []hook{h}
	}
	for _, done := range hooks[:rec.Hook] {
		if done.has(HookSucceeded) {
			steps[1] = append(steps[1], done)
		}
	}
	for _, step := range steps {
		pending := false
		for _, d := range step {
			child, err := r.hookChild(release, spec, d)
			if err != nil {
				continue
			}
			k := projections.ObjectKey(child)
			cur := r.cfg.State.Get(k)
			if cur == nil {
				continue
			}
			pending = true
			if cur.GetStatus().GetGoal() != projections.GoalDeleted {
				if err := r.cfg.Writer.Delete(ctx, release, r.cfg.Actor, k); err != nil {
					return false, fmt.Errorf("%s hook %s: delete after failure: %w", event, d, err)
				}
			}
		}
		if pending {
			return false, nil
		}
	}
	return false, &hookFailure{event: event, hook: h, msg: strings.TrimPrefix(rec.Step, stepFailed)}
}

// checkHooks reports every hook of the release jetplane cannot run.
func (r *Reconciler) checkHooks(release *schemas.Object, spec *Spec, hooks releaseHooks) error {
	seen := map[projections.Key]bool{}
	var bad []string
	for _, event := range slices.Sorted(maps.Keys(hooks.byEvent)) {
		for _, h := range hooks.byEvent[event] {
			if seen[h.key] {
				continue
			}
			seen[h.key] = true
			if _, err := r.hookChild(release, spec, h); err != nil {
				bad = append(bad, fmt.Sprintf("%s (%s): %v", h, strings.Join(h.events, ","), err))
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("hooks jetplane cannot run: %s", strings.Join(bad, "; "))
	}
	return nil
}

// hookChild is the object jetplane writes to run h: an Apply of it into
// the release's cluster, or, without one, the jetplane object itself,
// which must then be one jetplane can run.
func (r *Reconciler) hookChild(release *schemas.Object, spec *Spec, h hook) (*schemas.Object, error) {
	key := projections.ObjectKey(release)
	owner := map[string]string{LabelReleaseNamespace: key.Namespace, LabelReleaseName: key.Name}
	if spec.Cluster != "" {
		ms, err := structpb.NewStruct(cleanManifest(h.manifest))
		if err != nil {
			return nil, err
		}
		return &schemas.Object{
			ApiVersion: "v1", Kind: apply.Kind,
			Metadata: &schemas.ObjectMeta{Name: ApplyName(key, h.key), Namespace: key.Namespace, Group: Group(key), Labels: owner,
				Annotations: map[string]string{AnnotationTemplate: h.template, AnnotationHook: strings.Join(h.events, ",")}},
			Spec: &structpb.Struct{Fields: map[string]*structpb.Value{
				"cluster": structpb.NewStringValue(spec.Cluster), "manifest": structpb.NewStructValue(ms),
			}},
		}, nil
	}
	j, err := json.Marshal(h.manifest)
	if err != nil {
		return nil, err
	}
	objs, err := manifest.Decode("", j)
	if err != nil {
		return nil, fmt.Errorf("jetplane cannot run this hook itself (%v); a release with spec.cluster runs it in Kubernetes", err)
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("expected one object, got %d", len(objs))
	}
	o := objs[0]
	md := o.Metadata
	if manifest.IsClusterScoped(projections.ObjectKey(o).Kind) {
		md.Namespace = ""
	} else if md.Namespace == "" {
		md.Namespace = h.key.Namespace
	}
	md.Group = Group(key)
	md.DependsOn = nil
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	for k, v := range owner {
		md.Labels[k] = v
	}
	if md.Annotations == nil {
		md.Annotations = map[string]string{}
	}
	md.Annotations[AnnotationTemplate] = h.template
	return o, nil
}

// hookDone reports whether the hook object k finished, as helm waits for
// it: a Job until it completes, a Pod until it succeeds; any other kind
// once it is written. failed says why it failed.
func (r *Reconciler) hookDone(ctx context.Context, spec *Spec, h hook, k projections.Key) (done bool, failed string, err error) {
	kind, _ := h.manifest["kind"].(string)
	apiVersion, _ := h.manifest["apiVersion"].(string)
	waits := (kind == "Job" && strings.HasPrefix(apiVersion, "batch/")) || (kind == "Pod" && apiVersion == "v1")
	cur := r.cfg.State.Get(k)
	if cur == nil {
		return false, "", nil // not yet in the projection
	}
	if spec.Cluster != "" {
		switch cur.GetStatus().GetPhase() {
		case reconcilers.PhaseFailed:
			return false, "apply: " + cur.GetStatus().GetMessage(), nil
		}
		if !reconcilers.IsReady(cur) {
			return false, "", nil
		}
		if !waits {
			return true, "", nil
		}
		return r.clusterHookDone(ctx, spec.Cluster, h)
	}
	if !waits {
		return true, "", nil
	}
	st := cur.GetStatus()
	switch {
	case kind == "Job" && st.GetPhase() == "Complete", kind == "Pod" && st.GetPhase() == "Succeeded":
		return true, "", nil
	case st.GetPhase() == reconcilers.PhaseFailed:
		return false, orPhase(st.GetMessage(), st.GetPhase()), nil
	}
	return false, "", nil
}

// clusterHookDone reads a hook Job or Pod in the release's cluster.
func (r *Reconciler) clusterHookDone(ctx context.Context, cluster string, h hook) (bool, string, error) {
	if r.cfg.ClusterLookup == nil {
		return false, "", fmt.Errorf("cluster %s: jetplane cannot read it to wait for the hook", cluster)
	}
	p, err := r.cfg.ClusterLookup(cluster)
	if err != nil {
		return false, "", err
	}
	live, err := getLive(ctx, p, h.manifest)
	if err != nil || live == nil {
		return false, "", err
	}
	status, _ := live["status"].(map[string]any)
	if live["kind"] == "Pod" {
		switch status["phase"] {
		case "Succeeded":
			return true, "", nil
		case "Failed":
			return false, orPhase(fmt.Sprint(status["message"]), "Failed"), nil
		}
		return false, "", nil
	}
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		if cm["status"] != "True" {
			continue
		}
		switch cm["type"] {
		case "Complete":
			return true, "", nil
		case "Failed":
			return false, fmt.Sprintf("%v: %v", cm["reason"], cm["message"]), nil
		}
	}
	return false, "", nil
}

func orPhase(msg, phase string) string {
	if msg == "" || msg == "<nil>" {
		return phase
	}
	return msg
}

// getLive reads the object m names from a cluster; nil when it is not
// there (yet).
func getLive(ctx context.Context, p engine.ClientProvider, m map[string]any) (map[string]any, error) {
	apiVersion, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	md, _ := m["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	client, namespaced, err := p.GetClientFor(apiVersion, kind)
	if err != nil {
		return nil, err
	}
	var u *unstructured.Unstructured
	if namespaced {
		u, err = client.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	} else {
		u, err = client.Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return u.UnstructuredContent(), nil
}

// isHookChild reports whether o, a child of a release, runs one of its
// hooks: hooks are not among the release's objects (not pruned, not
// deleted with the release, not found by lookup), as in helm.
func isHookChild(o *schemas.Object) bool {
	return o.GetMetadata().GetAnnotations()[AnnotationHook] != ""
}
