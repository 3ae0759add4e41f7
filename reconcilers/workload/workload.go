package workload

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// Kinds, as keys name them.
const (
	KindDeployment = "Deployment.apps"
	KindReplicaSet = "ReplicaSet.apps"
	KindDaemonSet  = "DaemonSet.apps"
	KindJob        = "Job.batch"
	KindPod        = "Pod"
	KindNode       = "Node"
)

// Labels and annotations Kubernetes' controllers set, with the same names.
const (
	LabelTemplateHash  = "pod-template-hash"
	LabelRevisionHash  = "controller-revision-hash"
	LabelJobName       = "batch.kubernetes.io/job-name"
	LabelControllerUID = "batch.kubernetes.io/controller-uid"
	AnnotationRevision = "deployment.kubernetes.io/revision"
	// AnnotationChangeCause, on a Deployment, is kept on the ReplicaSet
	// of its template and shown by rollout history.
	AnnotationChangeCause = "kubernetes.io/change-cause"
	// AnnotationRestartedAt is what rollout restart sets in the pod
	// template, as kubectl does.
	AnnotationRestartedAt = "kubectl.kubernetes.io/restartedAt"
)

// The gate's annotations this package reads (decision 0038); reconcilers
// do not import the gate, so the names are repeated here.
const (
	annotationOwner         = "gate.jetplane.dev/owner"
	annotationAllowAdoption = "jetplane.dev/allow-adoption-by"
)

// OwnerRef is how the gate's owner annotation names k.
func OwnerRef(k projections.Key) string { return k.Kind + "/" + k.Namespace + "/" + k.Name }

// OwnerOf reads the owner annotation of an object: the key of the object
// whose controller wrote it.
func OwnerOf(md *schemas.ObjectMeta) (projections.Key, bool) {
	ref := md.GetAnnotations()[annotationOwner]
	kind, rest, ok := strings.Cut(ref, "/")
	if !ok {
		return projections.Key{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	if !ok {
		return projections.Key{}, false
	}
	return projections.Key{Kind: kind, Namespace: ns, Name: name}, true
}

// State is the projection, as the controllers read it.
type State interface {
	Get(projections.Key) *schemas.Object
	List(projections.Query) ([]*schemas.Object, uint64)
}

// Writer records desired state through the gate, as a controller acting
// for owner.
type Writer interface {
	// Apply records objs atomically.
	Apply(ctx context.Context, owner *schemas.Object, actor string, objs []*schemas.Object) error
	// Delete requests deletion of k; a key already gone is not an error.
	Delete(ctx context.Context, owner *schemas.Object, actor string, k projections.Key) error
	// Expire deletes obj itself, for its own controller (a finished Job's
	// time to live), in the scope of whoever last set its spec.
	Expire(ctx context.Context, obj *schemas.Object, actor string) error
	// DeleteWith is Delete with a propagation policy for k's own
	// dependents (gc.go): a foreground deletion propagates.
	DeleteWith(ctx context.Context, owner *schemas.Object, actor string, k projections.Key, p metav1.DeletionPropagation) error
	// Release clears k's owner (owner deleted with the Orphan policy); k
	// stays, and owner's key may adopt it again. A key already gone is not
	// an error.
	Release(ctx context.Context, owner *schemas.Object, actor string, k projections.Key) error
}

// Config configures the Reconciler.
type Config struct {
	State  State
	Writer Writer
	// Instance names this process in the actor of every write:
	// "reconciler/<owner's kind>@<instance>" ("reconciler/<kind>" when
	// empty), as the runtime names the actor of statuses.
	Instance string
	// JobBackoff is the delay before a Job replaces its first failed pod,
	// doubling with each failure up to six minutes (default 10 s, as in
	// Kubernetes).
	JobBackoff time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Reconciler runs Deployments, ReplicaSets, Jobs and DaemonSets. It is
// safe for concurrent use; the runtime never runs one key twice at once.
type Reconciler struct {
	cfg Config

	mu sync.Mutex
	// daemonSets are the DaemonSets seen, run again when a Node changes.
	daemonSets map[projections.Key]bool
	// progress is each Deployment's last progress: what it was and when,
	// for progressDeadlineSeconds.
	progress map[projections.Key]progressMark
}

type progressMark struct {
	sig string
	at  time.Time
}

var _ reconcilers.Watcher = (*Reconciler)(nil)

// New checks cfg.
func New(cfg Config) (*Reconciler, error) {
	if cfg.State == nil || cfg.Writer == nil {
		return nil, errors.New("workload: Config.State and Config.Writer are required")
	}
	if cfg.JobBackoff <= 0 {
		cfg.JobBackoff = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Reconciler{cfg: cfg, daemonSets: map[projections.Key]bool{}, progress: map[projections.Key]progressMark{}}, nil
}

// Kinds implements reconcilers.Reconciler.
func (r *Reconciler) Kinds() []string {
	return []string{KindDeployment, KindReplicaSet, KindJob, KindDaemonSet, KindCronJob}
}

func handled(kind string) bool {
	switch kind {
	case KindDeployment, KindReplicaSet, KindJob, KindDaemonSet, KindCronJob:
		return true
	}
	return false
}

// Owners implements reconcilers.Watcher: a child runs its owner, so the
// owner's status follows its children and a lost child is replaced; a
// Node's change runs every DaemonSet.
func (r *Reconciler) Owners(rec *schemas.ObjectRecord) []projections.Key {
	if strings.IndexByte(rec.GetMetadata().GetNamespace(), '/') >= 0 {
		return nil // observed in a Kubernetes cluster
	}
	var out []projections.Key
	if k, ok := OwnerOf(rec.GetMetadata()); ok && handled(k.Kind) {
		out = append(out, k)
	}
	if rec.GetKind() == KindNode && !strings.Contains(rec.GetApiVersion(), "/") {
		r.mu.Lock()
		for k := range r.daemonSets {
			out = append(out, k)
		}
		r.mu.Unlock()
	}
	return out
}

// observed tells whether obj was seen in a Kubernetes cluster by the
// bridge (its namespace is "<cluster>/<namespace>"): that cluster's own
// controllers run it, and jetplane only records it.
func observed(obj *schemas.Object) bool {
	return strings.IndexByte(obj.GetMetadata().GetNamespace(), '/') >= 0
}

// Reconcile implements reconcilers.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, obj *schemas.Object) (reconcilers.Result, error) {
	if observed(obj) {
		return reconcilers.Result{KeepStatus: true}, nil
	}
	switch projections.ObjectKey(obj).Kind {
	case KindReplicaSet:
		return r.replicaSet(ctx, obj)
	case KindDeployment:
		return r.deployment(ctx, obj)
	case KindJob:
		return r.job(ctx, obj)
	case KindDaemonSet:
		return r.daemonSet(ctx, obj)
	case KindCronJob:
		return r.cronJob(ctx, obj)
	}
	return reconcilers.Result{}, reconcilers.Terminal(fmt.Errorf("workload: kind %s is not handled", obj.GetKind()))
}

func (r *Reconciler) actor(owner projections.Key) string {
	if r.cfg.Instance == "" {
		return "reconciler/" + owner.Kind
	}
	return "reconciler/" + owner.Kind + "@" + r.cfg.Instance
}

// Records reads the projection without decoding specs (the projection
// Store has it): a ReplicaSet's run reads only its pods' metadata and
// status, and decoding every pod's spec at every run was most of its cost.
type Records interface {
	Keys(projections.Query) ([]projections.Key, uint64)
	GetRecord(projections.Key) *schemas.ObjectRecord
}

// owned lists the objects of kind in owner's namespace that owner's
// controller wrote, by name. Pods come without their spec when the State
// offers Records (nodeNameOf reads it when needed); other kinds whole.
func (r *Reconciler) owned(owner projections.Key, kind string) []*schemas.Object {
	ref := OwnerRef(owner)
	return r.matching(projections.Query{Kind: kind, Namespace: owner.Namespace}, kind == KindPod, func(md *schemas.ObjectMeta, _ *schemas.Status) bool {
		return md.GetAnnotations()[annotationOwner] == ref
	})
}

// matching lists the objects of q that keep passes; light leaves their
// spec out when the State can.
func (r *Reconciler) matching(q projections.Query, light bool, keep func(*schemas.ObjectMeta, *schemas.Status) bool) []*schemas.Object {
	rs, ok := r.cfg.State.(Records)
	if !ok {
		all, _ := r.cfg.State.List(q)
		out := all[:0]
		for _, o := range all {
			if keep(o.GetMetadata(), o.GetStatus()) {
				out = append(out, o)
			}
		}
		return out
	}
	keys, _ := rs.Keys(q)
	var out []*schemas.Object
	for _, k := range keys {
		rec := rs.GetRecord(k)
		if rec == nil || !keep(rec.GetMetadata(), rec.GetStatus()) {
			continue
		}
		if light {
			out = append(out, &schemas.Object{ApiVersion: rec.GetApiVersion(), Kind: rec.GetKind(), Metadata: rec.GetMetadata(), Status: rec.GetStatus()})
		} else if o := r.cfg.State.Get(k); o != nil {
			out = append(out, o)
		}
	}
	return out
}

// nodeNameOf is the node a pod is bound to, read from the projection when
// the pod came without its spec.
func (r *Reconciler) nodeNameOf(p *schemas.Object) string {
	if p.Spec == nil {
		if full := r.cfg.State.Get(projections.ObjectKey(p)); full != nil {
			p.Spec = full.Spec
		}
	}
	return p.GetSpec().GetFields()["nodeName"].GetStringValue()
}

// adoptable lists the objects of kind in owner's namespace that have no
// owner, match sel, and whose writer allowed owner to adopt them: the
// gate refuses any other adoption (decision 0038), where Kubernetes would
// adopt every orphan its selector matches.
func (r *Reconciler) adoptable(owner projections.Key, kind string, sel labels.Selector) []*schemas.Object {
	ref := OwnerRef(owner)
	return r.matching(projections.Query{Kind: kind, Namespace: owner.Namespace}, false, func(md *schemas.ObjectMeta, st *schemas.Status) bool {
		ann := md.GetAnnotations()
		return ann[annotationOwner] == "" && ann[annotationAllowAdoption] == ref && st.GetGoal() != projections.GoalDeleted &&
			sel.Matches(labels.Set(md.GetLabels()))
	})
}

// adopt re-applies objs for owner, so the gate records owner as theirs.
func (r *Reconciler) adopt(ctx context.Context, owner *schemas.Object, objs []*schemas.Object) error {
	if len(objs) == 0 {
		return nil
	}
	out := make([]*schemas.Object, len(objs))
	for i, o := range objs {
		c := proto.CloneOf(o)
		c.Status = nil
		c.Metadata.ResourceVersion, c.Metadata.Generation, c.Metadata.Uid, c.Metadata.CreationTime = 0, 0, "", nil
		out[i] = c
	}
	return r.cfg.Writer.Apply(ctx, owner, r.actor(projections.ObjectKey(owner)), out)
}

// decode reads a workload's spec into a k8s.io/api spec type.
func decode(obj *schemas.Object, out any) error {
	raw, err := json.Marshal(obj.GetSpec().AsMap())
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: spec: %w", projections.ObjectKey(obj), err)
	}
	return nil
}

// selector reads spec.selector; Kubernetes requires one, and one that
// matches the template's labels.
func selector(ls *metav1.LabelSelector, tmpl map[string]string) (labels.Selector, error) {
	if ls == nil || (len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0) {
		return nil, errors.New("spec.selector: required, and must match spec.template.metadata.labels")
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	if !sel.Matches(labels.Set(tmpl)) {
		return nil, fmt.Errorf("spec.selector: %s does not match spec.template.metadata.labels %v", sel, tmpl)
	}
	return sel, nil
}

// template is spec.template of a workload as stored: its labels and
// annotations, and its pod spec kept as written.
type template struct {
	Labels      map[string]string
	Annotations map[string]string
	Spec        *structpb.Struct
}

func templateOf(obj *schemas.Object) (template, error) {
	t := obj.GetSpec().GetFields()["template"].GetStructValue()
	if t == nil {
		return template{}, errors.New("spec.template: required")
	}
	var out template
	md := t.GetFields()["metadata"].GetStructValue().GetFields()
	out.Labels = stringMap(md["labels"])
	out.Annotations = stringMap(md["annotations"])
	out.Spec = t.GetFields()["spec"].GetStructValue()
	if out.Spec == nil {
		return template{}, errors.New("spec.template.spec: required")
	}
	return out, nil
}

func stringMap(v *structpb.Value) map[string]string {
	f := v.GetStructValue().GetFields()
	if len(f) == 0 {
		return nil
	}
	m := make(map[string]string, len(f))
	for k, v := range f {
		m[k] = v.GetStringValue()
	}
	return m
}

// toStruct turns a template back into spec.template's shape.
func (t template) toStruct() *structpb.Struct {
	md := map[string]any{}
	if len(t.Labels) > 0 {
		md["labels"] = anyMap(t.Labels)
	}
	if len(t.Annotations) > 0 {
		md["annotations"] = anyMap(t.Annotations)
	}
	s, _ := structpb.NewStruct(map[string]any{"metadata": md})
	s.Fields["spec"] = structpb.NewStructValue(proto.CloneOf(t.Spec))
	return s
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TemplateHash is the pod-template hash of a workload's spec.template, as
// its controller labels the ReplicaSet (or daemon pods) of that template;
// "" when it has none.
func TemplateHash(obj *schemas.Object) string {
	t, err := templateOf(obj)
	if err != nil {
		return ""
	}
	return hashTemplate(t.toStruct())
}

// hashTemplate is the pod-template hash: FNV-32a of the template
// (canonical JSON: sorted keys), spelled with Kubernetes' safe alphabet,
// as the Deployment controller names its ReplicaSets.
func hashTemplate(t *structpb.Struct) string {
	raw, err := json.Marshal(t.AsMap())
	if err != nil {
		panic(err) // a Struct always encodes
	}
	h := fnv.New32a()
	h.Write(raw)
	return safeEncode(fmt.Sprint(h.Sum32()))
}

// alphabet has no vowels (no words) and no look-alikes, as Kubernetes'.
const alphabet = "bcdfghjklmnpqrstvwxz2456789"

func safeEncode(s string) string {
	b := []byte(s)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// randomSuffix is a generated name's suffix: five characters of the safe
// alphabet, as Kubernetes' generateName.
func randomSuffix() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b[:])
}

// childName is base-<suffix>, cut to 63 characters as generateName does.
func childName(base string) string {
	if len(base) > 57 {
		base = base[:57]
	}
	return base + "-" + randomSuffix()
}

// newPod is a pod of t named name in ns, with extra labels.
func newPod(t template, ns, name string, extra map[string]string, nodeName string) *schemas.Object {
	lbl := make(map[string]string, len(t.Labels)+len(extra))
	for k, v := range t.Labels {
		lbl[k] = v
	}
	for k, v := range extra {
		lbl[k] = v
	}
	var ann map[string]string
	if len(t.Annotations) > 0 {
		ann = make(map[string]string, len(t.Annotations))
		for k, v := range t.Annotations {
			ann[k] = v
		}
	}
	spec := proto.CloneOf(t.Spec)
	if nodeName != "" {
		spec.Fields["nodeName"] = structpb.NewStringValue(nodeName)
	}
	return &schemas.Object{ApiVersion: "v1", Kind: KindPod, Metadata: &schemas.ObjectMeta{Name: name, Namespace: ns, Labels: lbl, Annotations: ann}, Spec: spec}
}

// podPhase is a pod's Kubernetes phase: what its node agent reported in
// status.details, Pending before any report.
func podPhase(p *schemas.Object) corev1.PodPhase {
	if ph := p.GetStatus().GetDetails().GetFields()["phase"].GetStringValue(); ph != "" {
		return corev1.PodPhase(ph)
	}
	return corev1.PodPending
}

// podActive is a pod that counts towards its owner's replicas: not being
// deleted, not finished (Kubernetes' FilterActivePods).
func podActive(p *schemas.Object) bool {
	if p.GetStatus().GetGoal() == projections.GoalDeleted {
		return false
	}
	ph := podPhase(p)
	return ph != corev1.PodSucceeded && ph != corev1.PodFailed
}

// readyCondition is the status of an object's Ready condition.
func readyCondition(o *schemas.Object) (string, time.Time) {
	for _, c := range o.GetStatus().GetConditions() {
		if c.GetType() == "Ready" {
			return c.GetStatus(), c.GetLastTransitionTime().AsTime()
		}
	}
	return "", time.Time{}
}

func podReady(p *schemas.Object) bool {
	s, _ := readyCondition(p)
	return s == "True" && podPhase(p) == corev1.PodRunning
}

// podAvailable is ready for at least minReady.
func podAvailable(p *schemas.Object, minReady time.Duration, now time.Time) bool {
	s, since := readyCondition(p)
	if s != "True" || podPhase(p) != corev1.PodRunning {
		return false
	}
	return minReady <= 0 || !since.Add(minReady).After(now)
}

func int32Or(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// rankForDeletion orders pods the way Kubernetes picks which to delete
// first: unscheduled before scheduled, pending before unknown before
// running, not ready before ready, more restarts first, newer first.
func (r *Reconciler) rankForDeletion(pods []*schemas.Object) {
	phaseRank := map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}
	for _, p := range pods {
		r.nodeNameOf(p) // reads the spec once, before sorting
	}
	slices.SortStableFunc(pods, func(a, b *schemas.Object) int {
		an, bn := a.GetSpec().GetFields()["nodeName"].GetStringValue() != "", b.GetSpec().GetFields()["nodeName"].GetStringValue() != ""
		if an != bn {
			if !an {
				return -1
			}
			return 1
		}
		if pa, pb := phaseRank[podPhase(a)], phaseRank[podPhase(b)]; pa != pb {
			return pa - pb
		}
		if ra, rb := podReady(a), podReady(b); ra != rb {
			if !ra {
				return -1
			}
			return 1
		}
		ta, tb := a.GetMetadata().GetCreationTime().AsTime(), b.GetMetadata().GetCreationTime().AsTime()
		if !ta.Equal(tb) {
			if ta.After(tb) {
				return -1
			}
			return 1
		}
		return strings.Compare(a.GetMetadata().GetName(), b.GetMetadata().GetName())
	})
}

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }
