package helmrelease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"

	"github.com/jetplane/jetplane/internal/render"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers"
	"github.com/jetplane/jetplane/schemas"
)

// Conditions a HelmRelease's status carries besides Ready.
const (
	// ConditionReleased: True once revision N's children are written;
	// its message names the revision, the chart and the values diff.
	ConditionReleased = "Released"
	// ConditionHooks: False while a hook runs, when one failed (the
	// message names it), or when the chart holds hooks of events jetplane
	// does not run (listed).
	ConditionHooks = "Hooks"
)

// Phases besides the runtime's.
const PhaseProgressing = "Progressing"

// How often a deletion looks again for children still there. Their own
// changes usually run the release sooner.
const finalizePoll = 500 * time.Millisecond

// State is the projection, as far as the reconciler reads it.
type State interface {
	Get(projections.Key) *schemas.Object
	List(projections.Query) ([]*schemas.Object, uint64)
}

// Writer records desired state: the gate. Every write is made for owner,
// the release, in the scope of whoever last set the release's spec; the
// gate marks the children as owner's and refuses to touch objects owner
// does not own (ErrNotOwner).
type Writer interface {
	// Apply records objs atomically and reports how many changed (an
	// object identical to the stored one is not written).
	Apply(ctx context.Context, owner *schemas.Object, actor string, objs []*schemas.Object) (changed int, err error)
	// Delete requests deletion of k; a key already gone is not an error.
	Delete(ctx context.Context, owner *schemas.Object, actor string, k projections.Key) error
}

// ErrNotOwner marks a write the Writer refused because the object exists
// and the release neither created it nor may adopt it.
var ErrNotOwner = errors.New("not the owner")

// ConditionConflict is True while a child the chart renders is an object
// the release does not own; its message names the object.
const ConditionConflict = "Conflict"

// History reads every event of one key, oldest first.
type History func(ctx context.Context, k projections.Key) ([]*schemas.Event, error)

// Capabilities reports a cluster's Kubernetes version ("v1.36.3") and
// API versions (group/version and group/version/Kind), for rendering.
type Capabilities func(ctx context.Context, cluster string) (version string, apiVersions []string, err error)

// Config configures a Reconciler. It is read once, by New.
type Config struct {
	State   State
	Writer  Writer
	Charts  Charts
	History History
	// Capabilities of target clusters; nil when jetplane has none (then a
	// release naming a cluster fails).
	Capabilities Capabilities
	// Reconciled reports whether a kind has a reconciler (whose Ready
	// condition says when an object is ready). Objects of other kinds are
	// ready once stored. Nil: no kind has one.
	Reconciled func(kind string) bool
	// ClusterLookup answers the lookups of a release that names a
	// cluster from that cluster's live objects; nil answers them from the
	// objects the release wrote, as for a release of jetplane objects.
	ClusterLookup func(cluster string) (engine.ClientProvider, error)
	// HTTPClient fetches from Helm repositories; default a client with a
	// 30 s timeout.
	HTTPClient *http.Client
	// Actor writes the children (default "reconciler/HelmRelease").
	Actor string
	// HookTimeout is how long a hook may run before it fails, as helm's
	// --timeout (default 5 minutes, helm's default).
	HookTimeout time.Duration
	// Now is the clock hooks are timed by (default time.Now).
	Now func() time.Time
}

func (c Config) validate() error {
	switch {
	case c.State == nil:
		return errors.New("helmrelease: Config.State is nil")
	case c.Writer == nil:
		return errors.New("helmrelease: Config.Writer is nil")
	case c.Charts == nil:
		return errors.New("helmrelease: Config.Charts is nil")
	case c.History == nil:
		return errors.New("helmrelease: Config.History is nil")
	}
	return nil
}

// Reconciler reconciles HelmRelease objects. It is safe for concurrent use.
type Reconciler struct {
	cfg  Config
	repo *repository

	mu       sync.Mutex
	refs     map[projections.Key]map[projections.Key]bool // values object → releases reading it
	diffs    map[projections.Key]cachedDiff
	caps     map[string]cachedCaps            // by cluster
	rendered map[projections.Key]cachedRender // the last render of each release
	complete map[[32]byte]bool                // archives (by digest) with every dependency in charts/
}

// capsTTL is how long a cluster's capabilities are reused: a release runs
// on every change of its children, and discovery costs two requests.
const capsTTL = 30 * time.Second

type cachedCaps struct {
	at          time.Time
	version     string
	apiVersions []string
}

// cachedRender is a release's last render, reused while its inputs (the
// archive, the values and the capabilities, hashed) are the same.
type cachedRender struct {
	inputs  [32]byte
	res     *render.Result
	version string
}

var _ reconcilers.Watcher = (*Reconciler)(nil)

// New checks cfg.
func New(cfg Config) (*Reconciler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Reconciled == nil {
		cfg.Reconciled = func(string) bool { return false }
	}
	if cfg.Actor == "" {
		cfg.Actor = "reconciler/" + Kind
	}
	if cfg.HookTimeout <= 0 {
		cfg.HookTimeout = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Reconciler{cfg: cfg, repo: &repository{client: cfg.HTTPClient}, refs: map[projections.Key]map[projections.Key]bool{}, diffs: map[projections.Key]cachedDiff{},
		caps: map[string]cachedCaps{}, rendered: map[projections.Key]cachedRender{},
		complete: map[[32]byte]bool{}}, nil
}

// Kinds implements reconcilers.Reconciler.
func (r *Reconciler) Kinds() []string { return []string{Kind} }

// Owners implements reconcilers.Watcher: a child (it carries the owner
// labels) runs its release, so the release's status follows its
// children; a ConfigMap or Secret a release reads values from runs that
// release.
func (r *Reconciler) Owners(rec *schemas.ObjectRecord) []projections.Key {
	md := rec.GetMetadata()
	if strings.IndexByte(md.GetNamespace(), '/') >= 0 {
		return nil // observed in a Kubernetes cluster
	}
	labels := md.GetLabels()
	ns, okNS := labels[LabelReleaseNamespace]
	name, okName := labels[LabelReleaseName]
	var out []projections.Key
	if okNS && okName {
		out = append(out, projections.Key{Kind: Kind, Namespace: ns, Name: name})
	}
	if k := rec.GetKind(); (k == "ConfigMap" || k == "Secret") && !strings.Contains(rec.GetApiVersion(), "/") {
		r.mu.Lock()
		for rel := range r.refs[projections.Key{Kind: k, Namespace: md.GetNamespace(), Name: md.GetName()}] {
			out = append(out, rel)
		}
		r.mu.Unlock()
	}
	return out
}

// Reconcile implements reconcilers.Reconciler: it renders the release's
// chart with its values, runs the revision's pre hooks, writes the
// children that changed, deletes the children that left the render, runs
// the post hooks, and reports the children's readiness. A chart or values
// the release is to blame for fail the run terminally and touch no
// child: the previous revision keeps running. A hook that fails fails the
// revision, naming the hook, as helm fails a release.
func (r *Reconciler) Reconcile(ctx context.Context, obj *schemas.Object) (out reconcilers.Result, err error) {
	key := projections.ObjectKey(obj)
	defer func() {
		// A failed run keeps the record: the next one goes on from it.
		if err != nil && out.Details == nil {
			out.Details = obj.GetStatus().GetDetails()
		}
	}()
	spec, err := decodeSpec(obj)
	if err != nil {
		return reconcilers.Result{}, reconcilers.Terminal(err)
	}
	r.noteRefs(key, spec)
	revision := int(obj.GetMetadata().GetGeneration())
	prev := recordedRevision(obj)
	res, version, inputs, err := r.render(ctx, key, spec, revision, prev)
	if err != nil {
		return reconcilers.Result{}, err
	}
	rec := prev
	if res == nil {
		// This revision was rendered and written before (by this
		// process or an earlier one): its children are what it wrote.
		// Rendering again would draw new random values.
		if children, ok := r.recorded(key, prev); ok {
			if tok := obj.GetMetadata().GetAnnotations()[AnnotationTest]; tok == "" || tok == prev.Tested {
				return r.released(ctx, key, obj, spec, rec, children, 0), nil
			}
			rec.Stage, rec.Hook, rec.Step, rec.TestPhase = HookTest, 0, stepDelete, ""
		}
		// A child is gone (or tests are asked for): render the revision
		// again, to restore it, or for its hooks.
		if res, version, inputs, err = r.render(ctx, key, spec, revision, revisionRecord{}); err != nil {
			return reconcilers.Result{}, err
		}
		if rec.Stage == "" {
			rec.Stage = stageWrite // restore, without hooks
		}
	} else {
		digest := hex.EncodeToString(inputs[:])
		same := prev.Revision == revision && prev.Inputs == digest
		switch {
		case same && prev.Failed != "":
			return r.failed(obj, prev, res), reconcilers.Terminal(errors.New(prev.Failed))
		case same && prev.Stage != "":
			// A rollout in progress: go on from the record.
		default:
			event := "upgrade"
			if len(prev.Children) == 0 {
				event = "install"
			}
			if obj.GetMetadata().GetAnnotations()[AnnotationRollback] != "" {
				event = "rollback"
			}
			rec = revisionRecord{Revision: revision, Inputs: digest, Chart: version, Event: event, Stage: "pre-" + event,
				Children: prev.Children, Tested: prev.Tested, TestPhase: prev.TestPhase, Tests: prev.Tests, TestStart: prev.TestStart, TestFinish: prev.TestFinish}
		}
	}
	rec.Chart = version
	hooks := hooksOf(res)
	rec.Hooks = hooks.unsupported
	if rec.Stage == "pre-"+rec.Event && rec.Hook == 0 && rec.Step == stepDelete {
		// Before anything of the revision runs: every hook must be one
		// jetplane can run, or the revision fails naming them all.
		if err := r.checkHooks(obj, spec, hooks); err != nil {
			rec.Failed = fmt.Sprintf("revision %d: %v", rec.Revision, err)
			return r.failed(obj, rec, res), reconcilers.Terminal(errors.New(rec.Failed))
		}
	}
	var children []*schemas.Object
	pruning := 0
	for {
		switch {
		case rec.Stage == HookTest:
			return r.test(ctx, key, obj, spec, rec, hooks), nil
		case strings.HasPrefix(rec.Stage, "pre-"), strings.HasPrefix(rec.Stage, "post-"):
			ok, err := r.runHooks(ctx, obj, spec, rec.Stage, hooks.byEvent[rec.Stage], &rec)
			if err != nil {
				return r.hookError(obj, rec, res, err)
			}
			if !ok {
				return r.progress(obj, spec, rec, hooks), nil
			}
			if strings.HasPrefix(rec.Stage, "pre-") {
				rec.Stage = stageWrite
			} else {
				rec.Stage = ""
			}
			rec.Hook, rec.Step = 0, stepDelete
		case rec.Stage == stageWrite:
			if children, pruning, err = r.write(ctx, key, obj, spec, rec, res); err != nil {
				if errors.Is(err, ErrNotOwner) {
					// Retried with backoff: the object's writer may yet allow
					// the adoption, or remove the object.
					return reconcilers.Result{Conditions: []*schemas.Condition{{Type: ConditionConflict, Status: "True", Reason: "NotOwner", Message: err.Error()}}},
						fmt.Errorf("write children: %w", err)
				}
				return reconcilers.Result{}, err
			}
			rec.Children = make([]string, len(children))
			for i, c := range children {
				rec.Children[i] = projections.ObjectKey(c).String()
			}
			rec.Stage = ""
			if rec.Event != "" {
				rec.Stage = "post-" + rec.Event
				if spec.Cluster != "" && len(hooks.byEvent[rec.Stage]) > 0 {
					rec.Stage = stageApplied
				}
			}
		case rec.Stage == stageApplied:
			// As helm creates the objects before its post hooks run,
			// they wait until the cluster holds every child.
			cur, _ := r.recorded(key, rec)
			waiting := len(rec.Children) - len(cur)
			for _, c := range cur {
				switch {
				case c.GetStatus().GetPhase() == reconcilers.PhaseFailed:
					rec.Failed = fmt.Sprintf("revision %d: %s: %s", rec.Revision, projections.ObjectKey(c), c.GetStatus().GetMessage())
					return r.failed(obj, rec, res), reconcilers.Terminal(errors.New(rec.Failed))
				case c.GetStatus().GetObservedGeneration() != c.GetMetadata().GetGeneration() || !reconcilers.IsReady(c):
					waiting++
				}
			}
			if waiting > 0 {
				// One message until all are there: a count would write a
				// status for each child applied.
				out := r.progress(obj, spec, rec, hooks)
				out.Message = fmt.Sprintf("revision %d: waiting for cluster %s to hold its %d objects before the %s hooks", rec.Revision, spec.Cluster, len(rec.Children), "post-"+rec.Event)
				out.Conditions = out.Conditions[1:]
				out.Conditions[0].Message = out.Message
				return out, nil
			}
			rec.Stage = "post-" + rec.Event
		default:
			rec.Event, rec.Hook, rec.Step = "", 0, ""
			if tok := obj.GetMetadata().GetAnnotations()[AnnotationTest]; tok != "" && tok != rec.Tested {
				// Tests asked for while the revision rolled out.
				rec.Stage, rec.Step, rec.TestPhase = HookTest, stepDelete, ""
				continue
			}
			if children == nil {
				children, _ = r.recorded(key, rec)
			}
			return r.released(ctx, key, obj, spec, rec, children, pruning), nil
		}
	}
}

// write writes the children of the revision rec rolls out: res rendered
// into children, or, for a rollback, what the revision rolled back to
// wrote. Children of the previous revision that are not among them are
// pruned.
func (r *Reconciler) write(ctx context.Context, key projections.Key, obj *schemas.Object, spec *Spec, rec revisionRecord, res *render.Result) ([]*schemas.Object, int, error) {
	var children []*schemas.Object
	if rec.Event == "rollback" {
		if n, err := strconv.Atoi(obj.GetMetadata().GetAnnotations()[AnnotationRollback]); err == nil {
			// Revision n's objects as written; when the log no longer
			// holds them whole, rendered again from n's spec.
			children, _ = r.storedRevision(ctx, key, n)
		}
	}
	if children == nil {
		// Without a cluster, dependsOn on a kind nothing reconciles would
		// hold its dependents for ever (it never turns Ready); such
		// objects are written with their dependents in one atomic batch
		// anyway.
		keep := r.cfg.Reconciled
		if spec.Cluster != "" {
			keep = nil
		}
		var err error
		if children, err = Children(key, spec.Cluster, res, keep); err != nil {
			return nil, 0, reconcilers.Terminal(err)
		}
		if spec.Cluster != "" && rec.Event != "" {
			if err := r.dryRun(ctx, spec.Cluster, res); err != nil {
				return nil, 0, err
			}
		}
	}
	// Most runs follow a child's status change and find every child as
	// rendered: then the gate is not asked at all.
	if !r.inState(children) {
		if _, err := r.cfg.Writer.Apply(ctx, obj, r.cfg.Actor, children); err != nil {
			return nil, 0, err
		}
	}
	want := map[projections.Key]bool{}
	for _, c := range children {
		want[projections.ObjectKey(c)] = true
	}
	existing, _ := r.cfg.State.List(projections.Query{Group: Group(key)})
	var stale []*schemas.Object
	for _, o := range existing {
		if !want[projections.ObjectKey(o)] && owned(o, key) && !kept(o) && !isHookChild(o) {
			stale = append(stale, o)
		}
	}
	if err := r.prune(ctx, obj, stale); err != nil {
		return nil, 0, err
	}
	return children, len(stale), nil
}

// recorded returns the children rec lists, as they are now, and whether
// every one of them is there.
func (r *Reconciler) recorded(key projections.Key, rec revisionRecord) ([]*schemas.Object, bool) {
	have := map[string]*schemas.Object{}
	existing, _ := r.cfg.State.List(projections.Query{Group: Group(key)})
	for _, o := range existing {
		if owned(o, key) && o.GetStatus().GetGoal() != projections.GoalDeleted {
			have[projections.ObjectKey(o).String()] = o
		}
	}
	var children []*schemas.Object
	for _, k := range rec.Children {
		if o, ok := have[k]; ok {
			children = append(children, o)
		}
	}
	return children, len(children) == len(rec.Children)
}

// progress is the status of a release whose hooks run.
func (r *Reconciler) progress(obj *schemas.Object, spec *Spec, rec revisionRecord, hooks releaseHooks) reconcilers.Result {
	hs := hooks.byEvent[rec.Stage]
	msg := fmt.Sprintf("revision %d: %s", rec.Revision, rec.Stage)
	if rec.Hook < len(hs) {
		msg = fmt.Sprintf("revision %d: running %s hook %s (%d of %d)", rec.Revision, rec.Stage, hs[rec.Hook], rec.Hook+1, len(hs))
	}
	// A jetplane hook's changes run the release (Owners); the slower
	// poll sees its timeout.
	poll := 5 * time.Second
	if spec.Cluster != "" || rec.Step == stepDelete {
		poll = hookPoll
	}
	return reconcilers.Result{Phase: PhaseProgressing, Message: msg, RequeueAfter: poll, Details: rec.details(),
		Conditions: []*schemas.Condition{
			{Type: ConditionHooks, Status: "False", Reason: "Running", Message: msg},
			{Type: reconcilers.ConditionReady, Status: "False", Reason: "HooksRunning", Message: msg},
		}}
}

// hookError ends a run whose hook failed (terminally: the revision
// failed) or could not be driven (retried).
func (r *Reconciler) hookError(obj *schemas.Object, rec revisionRecord, res *render.Result, err error) (reconcilers.Result, error) {
	var hf *hookFailure
	if !errors.As(err, &hf) {
		return reconcilers.Result{Details: rec.details()}, err
	}
	rec.Failed = fmt.Sprintf("revision %d: %s", rec.Revision, hf.Error())
	return r.failed(obj, rec, res), reconcilers.Terminal(errors.New(rec.Failed))
}

func (r *Reconciler) failed(obj *schemas.Object, rec revisionRecord, _ *render.Result) reconcilers.Result {
	return reconcilers.Result{Phase: reconcilers.PhaseFailed, Message: rec.Failed, Details: rec.details(),
		Conditions: []*schemas.Condition{{Type: ConditionHooks, Status: "False", Reason: "HookFailed", Message: rec.Failed}}}
}

// test runs the release's test hooks once for the request its
// AnnotationTest names, and records the outcome as helm test reports it.
// A failed test does not fail the release.
func (r *Reconciler) test(ctx context.Context, key projections.Key, obj *schemas.Object, spec *Spec, rec revisionRecord, hooks releaseHooks) reconcilers.Result {
	tok := obj.GetMetadata().GetAnnotations()[AnnotationTest]
	hs := hooks.byEvent[HookTest]
	if rec.TestPhase != "Running" {
		rec.TestStart, rec.Tests, rec.TestPhase = r.cfg.Now().UTC().Format(time.RFC3339), nil, "Running"
	}
	ok, err := r.runHooks(ctx, obj, spec, HookTest, hs, &rec)
	var hf *hookFailure
	switch {
	case errors.As(err, &hf):
		rec.TestPhase = "Failed"
	case err != nil:
		out := r.progress(obj, spec, rec, hooks)
		out.Message += ": " + err.Error()
		out.RequeueAfter = hookPoll
		return out
	case !ok:
		return r.progress(obj, spec, rec, hooks)
	default:
		rec.TestPhase = "Succeeded"
	}
	rec.Tests = nil
	for i, h := range hs {
		phase := "Succeeded"
		switch {
		case hf != nil && i == rec.Hook:
			phase = "Failed: " + hf.msg
		case i >= rec.Hook && hf != nil:
			phase = "Not run"
		}
		rec.Tests = append(rec.Tests, h.key.String()+": "+phase)
	}
	rec.Tested, rec.TestFinish = tok, r.cfg.Now().UTC().Format(time.RFC3339)
	rec.Stage, rec.Hook, rec.Step = "", 0, ""
	children, _ := r.recorded(key, rec)
	return r.released(ctx, key, obj, spec, rec, children, 0)
}

// released is the status of a release whose revision is written.
func (r *Reconciler) released(ctx context.Context, key projections.Key, obj *schemas.Object, spec *Spec, rec revisionRecord, children []*schemas.Object, pruning int) reconcilers.Result {
	diff, err := r.valuesDiff(ctx, key, obj)
	if err != nil {
		diff = "values diff unavailable: " + err.Error()
	}
	released := fmt.Sprintf("revision %d: chart %s %s", rec.Revision, spec.Chart.Name, rec.Chart)
	if diff != "" {
		released += "; " + diff
	}
	out := r.summary(children, pruning, released, rec.Hooks)
	rec.Children = make([]string, len(children))
	for i, c := range children {
		rec.Children[i] = projections.ObjectKey(c).String()
	}
	out.Details = rec.details()
	return out
}

// render fetches the chart, gathers the values and renders. Errors the
// release is to blame for are terminal.
//
// It returns a nil Result, and no error, when prev recorded this very
// revision rendered from the same inputs and finished: the revision is
// written and must not be drawn again.
func (r *Reconciler) render(ctx context.Context, key projections.Key, spec *Spec, revision int, prev revisionRecord) (_ *render.Result, _ string, inputs [32]byte, err error) {
	archive, version, err := r.fetch(ctx, spec)
	if err != nil {
		return nil, "", inputs, err
	}
	values, secrets, err := r.values(key, spec)
	if err != nil {
		return nil, "", inputs, err
	}
	// A chart's fail or a template error may quote values; those read
	// from Secrets never reach the release's status.
	defer func() { err = redact(err, secrets) }()
	opts := render.Options{
		ReleaseName: key.Name, Namespace: spec.ReleaseNamespace, Revision: revision, IsUpgrade: revision > 1,
		ForCluster: spec.Cluster != "", Values: values,
	}
	if spec.Cluster != "" {
		if r.cfg.Capabilities == nil {
			return nil, "", inputs, reconcilers.Terminal(fieldError("spec.cluster", fmt.Sprintf("%q: jetplane has no Kubernetes clusters configured (serve --clusters)", spec.Cluster)))
		}
		if opts.KubeVersion, opts.APIVersions, err = r.capabilities(ctx, spec.Cluster); err != nil {
			return nil, "", inputs, fmt.Errorf("cluster %s: %w", spec.Cluster, err)
		}
	}
	// Dependencies missing from charts/ are fetched before the cache is
	// consulted: a repository's new version matching a range is a new
	// input.
	c, deps, err := r.loadChart(ctx, spec, version, archive)
	if err != nil {
		return nil, "", inputs, err
	}
	inputs = hashInputs(archive, deps.Archives, opts)
	if prev.Revision == revision && prev.Inputs == hex.EncodeToString(inputs[:]) && prev.Stage == "" && prev.Failed == "" {
		return nil, version, inputs, nil
	}
	r.mu.Lock()
	cached, ok := r.rendered[key]
	r.mu.Unlock()
	if ok && cached.inputs == inputs {
		return cached.res, cached.version, inputs, nil
	}
	if c == nil {
		if c, err = render.Load(archive); err != nil {
			return nil, "", inputs, reconcilers.Terminal(fmt.Errorf("chart %s %s: %w", spec.Chart.Name, version, err))
		}
	}
	opts.Lookup = r.lookup(key)
	if spec.Cluster != "" && r.cfg.ClusterLookup != nil {
		if opts.Lookup, err = r.cfg.ClusterLookup(spec.Cluster); err != nil {
			return nil, "", inputs, fmt.Errorf("cluster %s: %w", spec.Cluster, err)
		}
	}
	res, err := render.Render(c, opts)
	var rerr *render.Error
	if errors.As(err, &rerr) {
		return nil, "", inputs, reconcilers.Terminal(fmt.Errorf("chart %s %s: %w", spec.Chart.Name, version, err))
	}
	if err != nil {
		return nil, "", inputs, err
	}
	r.mu.Lock()
	r.rendered[key] = cachedRender{inputs: inputs, res: res, version: version}
	r.mu.Unlock()
	return res, version, inputs, nil
}

// lookup answers a chart's lookup from the objects the release wrote
// before this render: its previous revision.
func (r *Reconciler) lookup(key projections.Key) lookupObjects {
	existing, _ := r.cfg.State.List(projections.Query{Group: Group(key)})
	var l lookupObjects
	for _, o := range existing {
		if !owned(o, key) || o.GetStatus().GetGoal() == projections.GoalDeleted || isHookChild(o) {
			continue
		}
		if clear := r.cfg.State.Get(projections.ObjectKey(o)); clear != nil {
			o = clear // a Secret opened
		}
		if m := kubeManifest(o); m != nil {
			l.objs = append(l.objs, m)
		}
	}
	return l
}

// capabilities returns cluster's capabilities, asking it at most every
// capsTTL.
func (r *Reconciler) capabilities(ctx context.Context, cluster string) (string, []string, error) {
	r.mu.Lock()
	c, ok := r.caps[cluster]
	r.mu.Unlock()
	if ok && time.Since(c.at) < capsTTL {
		return c.version, c.apiVersions, nil
	}
	v, apis, err := r.cfg.Capabilities(ctx, cluster)
	if err != nil {
		return "", nil, err
	}
	r.mu.Lock()
	r.caps[cluster] = cachedCaps{at: time.Now(), version: v, apiVersions: apis}
	r.mu.Unlock()
	return v, apis, nil
}

// loadChart loads archive and fetches the dependencies its charts/
// directory lacks (dependencies.go). It returns a nil chart, and no
// dependencies, for an archive known to lack none: the render cache may
// spare loading it.
func (r *Reconciler) loadChart(ctx context.Context, spec *Spec, version string, archive []byte) (*chart.Chart, Dependencies, error) {
	sum := sha256.Sum256(archive)
	r.mu.Lock()
	complete := r.complete[sum]
	r.mu.Unlock()
	if complete {
		return nil, Dependencies{}, nil
	}
	c, err := render.Load(archive)
	if err != nil {
		return nil, Dependencies{}, reconcilers.Terminal(fmt.Errorf("chart %s %s: %w", spec.Chart.Name, version, err))
	}
	if len(render.MissingDependencies(c)) == 0 {
		r.mu.Lock()
		if len(r.complete) >= maxCompleteCharts {
			clear(r.complete)
		}
		r.complete[sum] = true
		r.mu.Unlock()
		return c, Dependencies{}, nil
	}
	deps, retry, err := vendor(ctx, r.repo, c, "")
	if err != nil {
		err = fmt.Errorf("chart %s %s: %w", spec.Chart.Name, version, err)
		if !retry {
			err = reconcilers.Terminal(err)
		}
		return nil, deps, err
	}
	return c, deps, nil
}

// maxCompleteCharts bounds Reconciler.complete.
const maxCompleteCharts = 1024

// hashInputs digests everything a render depends on: the chart, the
// dependencies fetched for it, and the options.
func hashInputs(archive []byte, deps [][]byte, opts render.Options) [32]byte {
	h := sha256.New()
	h.Write(archive)
	for _, d := range deps {
		sum := sha256.Sum256(d)
		h.Write(sum[:])
	}
	enc := json.NewEncoder(h)
	_ = enc.Encode(opts)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// fetch returns the packaged chart and its version.
func (r *Reconciler) fetch(ctx context.Context, spec *Spec) ([]byte, string, error) {
	if spec.Chart.Repository != "" {
		archive, version, err := r.repo.fetch(ctx, spec.Chart.Repository, spec.Chart.Name, spec.Chart.Version)
		if errors.Is(err, render.ErrTooLarge) {
			err = reconcilers.Terminal(err)
		}
		return archive, version, err
	}
	archive, err := r.cfg.Charts.Get(ctx, spec.Chart.Name, spec.Chart.Version)
	if errors.Is(err, ErrChartNotFound) {
		// Not terminal: the chart may be pushed after the release.
		return nil, "", fmt.Errorf("spec.chart: %s:%s has not been pushed; push it with `jetplane chart push PATH %s:%s`",
			spec.Chart.Name, spec.Chart.Version, spec.Chart.Name, spec.Chart.Version)
	}
	if err != nil {
		return nil, "", err
	}
	return archive, spec.Chart.Version, nil
}

// values merges the values objects, in order, and the inline values over
// them.
//
// It also returns every value read from a Secret (the text and each
// string in it), for redact.
func (r *Reconciler) values(key projections.Key, spec *Spec) (map[string]any, []string, error) {
	merged := map[string]any{}
	var secrets []string
	for i, ref := range spec.ValuesFrom {
		field := fmt.Sprintf("spec.valuesFrom[%d]", i)
		o := r.cfg.State.Get(projections.Key{Kind: ref.Kind, Namespace: key.Namespace, Name: ref.Name})
		if o == nil || o.GetStatus().GetGoal() == projections.GoalDeleted {
			if ref.Optional {
				continue
			}
			// Not terminal: the object's arrival runs the release (Owners).
			return nil, nil, fmt.Errorf("%s: %s %s/%s does not exist", field, ref.Kind, key.Namespace, ref.Name)
		}
		text, ok, err := dataKey(o, ref)
		if err != nil {
			return nil, nil, reconcilers.Terminal(fmt.Errorf("%s: %w", field, err))
		}
		if !ok {
			if ref.Optional {
				continue
			}
			return nil, nil, fmt.Errorf("%s: %s %s/%s has no key %q", field, ref.Kind, key.Namespace, ref.Name, ref.Key)
		}
		vals, err := chartutil.ReadValues([]byte(text))
		if err != nil && ref.Kind == "Secret" {
			// The parser's message may quote the text.
			return nil, nil, reconcilers.Terminal(fmt.Errorf("%s: %s %s/%s key %q: not YAML values", field, ref.Kind, key.Namespace, ref.Name, ref.Key))
		}
		if err != nil {
			return nil, nil, reconcilers.Terminal(fmt.Errorf("%s: %s %s/%s key %q: not YAML values: %v", field, ref.Kind, key.Namespace, ref.Name, ref.Key, err))
		}
		if ref.Kind == "Secret" {
			secrets = append(secrets, text)
			secrets = leaves(vals.AsMap(), secrets)
		}
		merged = chartutil.MergeTables(vals.AsMap(), merged)
	}
	if spec.Values != nil {
		merged = chartutil.MergeTables(deepCopy(spec.Values), merged)
	}
	return merged, secrets, nil
}

// prune deletes stale children, dependents before what they depend on.
func (r *Reconciler) prune(ctx context.Context, release *schemas.Object, stale []*schemas.Object) error {
	for _, o := range reverseOrder(stale) {
		if o.GetStatus().GetGoal() == projections.GoalDeleted {
			continue
		}
		err := r.cfg.Writer.Delete(ctx, release, r.cfg.Actor, projections.ObjectKey(o))
		if errors.Is(err, ErrNotOwner) {
			// It carries the release's labels but not its ownership (a
			// user's object labelled so): not the release's to delete.
			continue
		}
		if err != nil {
			return fmt.Errorf("prune %s: %w", projections.ObjectKey(o), err)
		}
	}
	return nil
}

// Finalize implements reconcilers.Reconciler: it runs the release's
// pre-delete hooks, deletes every child, dependents first, waits until
// all are gone, and runs the post-delete hooks. Hook objects stay, as
// helm leaves them, unless their delete policy removes them.
func (r *Reconciler) Finalize(ctx context.Context, obj *schemas.Object) (out reconcilers.Result, err error) {
	key := projections.ObjectKey(obj)
	defer func() {
		if err != nil && out.Details == nil {
			out.Details = obj.GetStatus().GetDetails()
		}
	}()
	rec := recordedRevision(obj)
	if rec.Event != "delete" {
		rec = revisionRecord{Revision: rec.Revision, Inputs: rec.Inputs, Chart: rec.Chart, Children: rec.Children, Event: "delete", Stage: PreDelete}
	}
	spec, specErr := decodeSpec(obj)
	var hooks releaseHooks
	loaded := false
	for {
		switch rec.Stage {
		case PreDelete, PostDelete:
			if !loaded && specErr == nil {
				// The hooks of the revision being deleted. A chart that
				// no longer renders has none to run: the release is
				// deleted anyway.
				if res, _, _, err := r.render(ctx, key, spec, rec.Revision, revisionRecord{}); err == nil {
					hooks = hooksOf(res)
				}
				loaded = true
			}
			ok, err := r.runHooks(ctx, obj, spec, rec.Stage, hooks.byEvent[rec.Stage], &rec)
			if err != nil {
				var hf *hookFailure
				if !errors.As(err, &hf) {
					return reconcilers.Result{Details: rec.details()}, err
				}
				// Unlike helm, which leaves the release for `helm uninstall
				// --no-hooks`: a release being deleted cannot be changed, so
				// the failure is recorded and the deletion goes on.
				msg := fmt.Sprintf("delete: %v; deleting anyway", hf)
				next := stageGone
				if rec.Stage == PostDelete {
					next = stageDeleted
				}
				rec.Failed, rec.Stage, rec.Hook, rec.Step = hf.Error(), next, 0, stepDelete
				return reconcilers.Result{Message: msg, Details: rec.details(), RequeueAfter: hookPoll,
					Conditions: []*schemas.Condition{{Type: ConditionHooks, Status: "False", Reason: "HookFailed", Message: msg}}}, nil
			}
			if !ok {
				out := r.progress(obj, spec, rec, hooks)
				out.RequeueAfter = hookPoll
				return out, nil
			}
			if rec.Stage == PostDelete {
				r.forget(key)
				r.mu.Lock()
				delete(r.diffs, key)
				delete(r.rendered, key)
				r.mu.Unlock()
				return reconcilers.Result{}, nil
			}
			rec.Stage, rec.Hook, rec.Step = stageGone, 0, stepDelete
		case stageDeleted:
			rec.Stage = PostDelete
			hooks, loaded = releaseHooks{}, true // the post-delete hooks ran (one failed)
			continue
		default:
			existing, _ := r.cfg.State.List(projections.Query{Group: Group(key)})
			var mine []*schemas.Object
			for _, o := range existing {
				if owned(o, key) && !kept(o) && !isHookChild(o) {
					mine = append(mine, o)
				}
			}
			if len(mine) == 0 {
				rec.Stage = PostDelete
				continue
			}
			if err := r.prune(ctx, obj, mine); err != nil {
				return reconcilers.Result{Details: rec.details()}, err
			}
			return reconcilers.Result{
				RequeueAfter: finalizePoll,
				Message:      fmt.Sprintf("deleting: %d children left", len(mine)),
				Details:      rec.details(),
			}, nil
		}
	}
}

// summary is the release's status: Ready when every child is. While
// children are on their way the message stays the same (a release of 100
// children would otherwise write a status for each one that turns Ready);
// it names the children that are missing or failing, which is what
// changes it.
func (r *Reconciler) summary(children []*schemas.Object, pruning int, released string, unsupported []string) reconcilers.Result {
	var failing []string
	pending := 0
	for _, c := range children {
		k := projections.ObjectKey(c)
		cur := r.cfg.State.Get(k)
		switch {
		case cur == nil:
			failing = append(failing, k.String()+" (missing)")
		case r.cfg.Reconciled(k.Kind) && !reconcilers.IsReady(cur):
			switch phase := cur.GetStatus().GetPhase(); phase {
			case reconcilers.PhaseError, reconcilers.PhaseFailed:
				failing = append(failing, k.String()+" ("+phase+": "+cur.GetStatus().GetMessage()+")")
			default:
				pending++
			}
		}
	}
	conds := []*schemas.Condition{{Type: ConditionReleased, Status: "True", Reason: "Rendered", Message: released}}
	if len(unsupported) > 0 {
		conds = append(conds, &schemas.Condition{Type: ConditionHooks, Status: "False", Reason: "Unsupported",
			Message: "not run (events jetplane does not know; helm 3 runs pre/post install, upgrade, rollback and delete, and test): " + strings.Join(unsupported, "; ")})
	}
	if len(failing) == 0 && pending == 0 {
		msg := fmt.Sprintf("%s; %d/%d children Ready", released, len(children), len(children))
		if pruning > 0 {
			msg += fmt.Sprintf("; pruning %d", pruning)
		}
		return reconcilers.Result{Phase: reconcilers.PhaseReady, Message: msg, Conditions: conds}
	}
	msg := released + "; children progressing"
	if len(failing) > 0 {
		const show = 5
		list := failing
		if len(list) > show {
			list = append(slices.Clone(list[:show]), fmt.Sprintf("and %d more", len(failing)-show))
		}
		msg += "; not Ready: " + strings.Join(list, ", ")
	}
	conds = append(conds, &schemas.Condition{Type: reconcilers.ConditionReady, Status: "False", Reason: "ChildrenNotReady", Message: msg})
	return reconcilers.Result{Phase: PhaseProgressing, Message: msg, Conditions: conds}
}

// inState reports whether current state holds every child exactly as
// given (what the gate would find unchanged).
func (r *Reconciler) inState(children []*schemas.Object) bool {
	for _, c := range children {
		cur := r.cfg.State.Get(projections.ObjectKey(c))
		if cur == nil || cur.GetStatus().GetGoal() == projections.GoalDeleted || cur.GetApiVersion() != c.GetApiVersion() ||
			!proto.Equal(cur.GetSpec(), c.GetSpec()) || !sameMeta(cur.GetMetadata(), c.GetMetadata()) {
			return false
		}
	}
	return true
}

func sameMeta(cur, want *schemas.ObjectMeta) bool {
	return cur.GetGroup() == want.GetGroup() && maps.Equal(cur.GetLabels(), want.GetLabels()) &&
		sameAnnotations(cur.GetAnnotations(), want.GetAnnotations()) && slices.EqualFunc(cur.GetDependsOn(), want.GetDependsOn(),
		func(a, b *schemas.ObjectKey) bool { return proto.Equal(a, b) }) && len(cur.GetFinalizers()) == len(want.GetFinalizers())
}

// owned reports whether o carries release's owner labels and the gate
// recorded release as its owner: labels anyone may write; the gate's owner
// annotation only the release's own writes set (decision 0038).
func owned(o *schemas.Object, release projections.Key) bool {
	l := o.GetMetadata().GetLabels()
	return l[LabelReleaseNamespace] == release.Namespace && l[LabelReleaseName] == release.Name &&
		o.GetMetadata().GetAnnotations()[gatePrefix+"owner"] == Kind+"/"+release.Namespace+"/"+release.Name
}

// AnnotationResourcePolicy "keep" on a rendered object leaves it in place
// when the release stops rendering it (an upgrade, a rollback) and when
// the release is deleted, as helm leaves it.
const AnnotationResourcePolicy = "helm.sh/resource-policy"

// kept reports whether o, a child, carries AnnotationResourcePolicy keep
// (on an Apply child, in the manifest it applies).
func kept(o *schemas.Object) bool {
	ann := o.GetMetadata().GetAnnotations()[AnnotationResourcePolicy]
	if o.GetKind() == "Apply" {
		m, _ := o.GetSpec().AsMap()["manifest"].(map[string]any)
		md, _ := m["metadata"].(map[string]any)
		a, _ := md["annotations"].(map[string]any)
		ann, _ = a[AnnotationResourcePolicy].(string)
	}
	return strings.TrimSpace(ann) == "keep"
}

// reverseOrder orders objs so that an object comes before every object
// (of objs) it depends on.
func reverseOrder(objs []*schemas.Object) []*schemas.Object {
	in := map[projections.Key]*schemas.Object{}
	for _, o := range objs {
		in[projections.ObjectKey(o)] = o
	}
	done := map[projections.Key]bool{}
	var order []*schemas.Object // dependencies first
	var visit func(o *schemas.Object, depth int)
	visit = func(o *schemas.Object, depth int) {
		k := projections.ObjectKey(o)
		if done[k] || depth > len(objs) {
			return
		}
		done[k] = true
		for _, d := range o.GetMetadata().GetDependsOn() {
			if dep, ok := in[projections.KeyOf(d)]; ok {
				visit(dep, depth+1)
			}
		}
		order = append(order, o)
	}
	for _, o := range objs {
		visit(o, 0)
	}
	slices.Reverse(order)
	return order
}

func (r *Reconciler) noteRefs(release projections.Key, spec *Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(release)
	for _, ref := range spec.ValuesFrom {
		k := projections.Key{Kind: ref.Kind, Namespace: release.Namespace, Name: ref.Name}
		if r.refs[k] == nil {
			r.refs[k] = map[projections.Key]bool{}
		}
		r.refs[k][release] = true
	}
}

func (r *Reconciler) forget(release projections.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(release)
}

func (r *Reconciler) forgetLocked(release projections.Key) {
	for k, rels := range r.refs {
		delete(rels, release)
		if len(rels) == 0 {
			delete(r.refs, k)
		}
	}
}

// gatePrefix starts the annotations the gate keeps itself (owner, scope):
// a rendered child never carries them, a stored one may.
const gatePrefix = "gate.jetplane.dev/"

func sameAnnotations(cur, want map[string]string) bool {
	n := 0
	for k, v := range cur {
		if strings.HasPrefix(k, gatePrefix) {
			continue
		}
		if w, ok := want[k]; !ok || w != v {
			return false
		}
		n++
	}
	return n == len(want)
}

// minRedacted is the shortest Secret value redact hides: shorter ones
// ("1", "on") would blank out every message that holds them by chance.
const minRedacted = 4

// leaves appends every string and number in v, as text.
func leaves(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			out = leaves(e, out)
		}
	case []any:
		for _, e := range v {
			out = leaves(e, out)
		}
	case string:
		out = append(out, v)
	case nil, bool:
	default:
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// redact returns err with every secret value in its message replaced by
// "*****", keeping whether it is terminal.
func redact(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	// Longest first, so a value holding another is hidden whole.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		if len(s) >= minRedacted {
			msg = strings.ReplaceAll(msg, s, "*****")
		}
	}
	if msg == err.Error() {
		return err
	}
	out := errors.New(msg)
	if reconcilers.IsTerminal(err) {
		return reconcilers.Terminal(out)
	}
	return out
}
