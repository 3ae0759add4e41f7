package kubeapi

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"

	"github.com/jetplane/jetplane/bridge/gate"
	"github.com/jetplane/jetplane/internal/jsonvalue"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/crd"
)

// The status and scale subresources, as kube-apiserver serves them: a
// write to status changes the status and nothing else, a write to the
// object leaves its status (prepare drops it), and scale reads and sets
// the replicas of a Deployment, ReplicaSet, StatefulSet or a defined kind
// whose CustomResourceDefinition declares the subresource. Decision 0076.

// statusKinds are the built-in kinds with a status subresource in
// Kubernetes (and jetplane's own kinds with a spec).
var statusKinds = map[string]bool{
	"Pod": true, "Node": true, "Namespace": true, "Service": true, "PersistentVolumeClaim": true,
	"PersistentVolume": true, "Deployment.apps": true, "StatefulSet.apps": true, "DaemonSet.apps": true,
	"ReplicaSet.apps": true, "Job.batch": true, "CronJob.batch": true, "Ingress.networking.k8s.io": true,
	"CustomResourceDefinition.apiextensions.k8s.io": true, "Apply": true, "HelmRelease": true, "Subscription": true,
}

// builtinScale is where the scalable built-in kinds keep their replicas.
var builtinScale = &crd.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: ".spec.selector"}

var scaleKinds = map[string]bool{"Deployment.apps": true, "StatefulSet.apps": true, "ReplicaSet.apps": true}

// subresources returns what r serves: status, and where scale reads
// (nil: no scale).
func (r resource) subresources() (status bool, scale *crd.Scale) {
	if r.def != nil {
		return r.def.Subresources(r.version)
	}
	if scaleKinds[r.key()] {
		scale = builtinScale
	}
	return statusKinds[r.key()], scale
}

// subresourceList is r's subresources as discovery lists them.
func (r resource) subresourceList() []metav1.APIResource {
	status, scale := r.subresources()
	var out []metav1.APIResource
	if status {
		out = append(out, metav1.APIResource{Name: r.plural + "/status", Namespaced: r.namespaced, Kind: r.kind,
			Verbs: metav1.Verbs{"get", "patch", "update"}})
	}
	if scale != nil {
		out = append(out, metav1.APIResource{Name: r.plural + "/scale", Namespaced: r.namespaced, Group: "autoscaling",
			Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get", "patch", "update"}})
	}
	return out
}

func (s *Server) subresource(w http.ResponseWriter, q *request) error {
	status, scale := q.res.subresources()
	switch {
	case q.sub == "status" && status:
		return s.status(w, q)
	case q.sub == "scale" && scale != nil:
		return s.scale(w, q, scale)
	}
	// As kube-apiserver: no such path (not an object that is missing).
	http.NotFound(w, q.r)
	return nil
}

// subject is the stored object a subresource request names.
func (s *Server) subject(q *request) (*schemas.Object, error) {
	if err := s.authorizeRead(q); err != nil {
		return nil, err
	}
	cur := s.cfg.Store.Get(q.key())
	if cur == nil {
		return nil, apierrors.NewNotFound(q.groupResource(), q.name)
	}
	return cur, nil
}

// patched is what the request's body makes of doc: the body itself for a
// PUT, doc patched by it for a PATCH.
func patched(w http.ResponseWriter, q *request, doc any, typed any) (map[string]any, error) {
	body, err := readAll(w, q.r)
	if err != nil {
		return nil, err
	}
	out := body
	if q.r.Method == http.MethodPatch {
		orig, err := jsonvalue.Marshal(doc)
		if err != nil {
			return nil, err
		}
		ct, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type"))
		if out, err = applyPatch(q, ct, orig, body, typed); err != nil {
			return nil, err
		}
	}
	var m map[string]any
	if err := jsonvalue.Unmarshal(out, &m); err != nil {
		return nil, apierrors.NewBadRequest("the body is not a JSON object: " + err.Error())
	}
	return m, nil
}

// applyPatch applies a patch of content type ct to the JSON orig: a
// merge, a JSON or, where typed names a built-in type, a strategic merge
// patch, as kube-apiserver takes them.
func applyPatch(q *request, ct string, orig, patch []byte, typed any) ([]byte, error) {
	var out []byte
	var err error
	switch ct {
	case "application/merge-patch+json":
		out, err = jsonpatch.MergePatch(orig, patch)
	case "application/json-patch+json":
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(patch); err == nil {
			out, err = p.Apply(orig)
		}
	case "application/strategic-merge-patch+json":
		if typed == nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", q.groupResource(), q.name,
				"strategic merge patch is not supported for "+q.res.key()+"; use a JSON merge patch (--type=merge)", 0, false)
		}
		out, err = strategicpatch.StrategicMergePatch(orig, patch, typed)
	default:
		return nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "patch", q.groupResource(), q.name,
			fmt.Sprintf("the patch type %q is not supported for %s", ct, q.res.plural), 0, false)
	}
	if err != nil {
		return nil, apierrors.NewBadRequest("patch: " + err.Error())
	}
	return out, nil
}

// status serves /status: the whole object on reads; on writes, only the
// status the body (or the patched object) carries is recorded.
func (s *Server) status(w http.ResponseWriter, q *request) error {
	cur, err := s.subject(q)
	if err != nil {
		return err
	}
	if q.r.Method == http.MethodGet {
		return s.showJSON(w, q, http.StatusOK, cur)
	}
	// Read-only (shared with the watches of the same change).
	obj := s.shown(q, cur)
	if q.r.Method != http.MethodPut && q.r.Method != http.MethodPatch {
		return apierrors.NewMethodNotSupported(schema.GroupResource{Group: q.res.group, Resource: q.res.plural + "/status"}, q.r.Method)
	}
	// Whether the caller may record this status is decided before its
	// body is read: a refusal tells nothing of versions or patches.
	// The decision is carried to the write (gate.StatusGrant).
	grant, err := s.cfg.Gate.GrantStatus(q.caller.Principal, q.key(), cur)
	if err != nil {
		return s.gateError(q, err)
	}
	var typed any
	if q.res.def == nil {
		typed, _ = scheme.Scheme.New(kindOf(q.res))
	}
	var m map[string]any
	if ct, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type")); ct == "application/apply-patch+yaml" && q.r.Method == http.MethodPatch {
		m, err = s.applyStatus(w, q, obj)
	} else if m, err = patched(w, q, obj, typed); err == nil {
		s.track(q, obj, m)
	}
	if err != nil {
		return err
	}
	rv, _ := metaOf(m)["resourceVersion"].(string)
	if err := s.checkVersion(q, cur, rv); err != nil {
		return err
	}
	st, _ := m["status"].(map[string]any)
	if st == nil {
		st = map[string]any{}
	}
	mf, _ := metaOf(m)["managedFields"].([]any)
	if err := keepStatusManagers(st, mf); err != nil {
		return err
	}
	next, err := statusOf(st)
	if err != nil {
		return apierrors.NewBadRequest("status: " + err.Error())
	}
	if dryRun(q.r) {
		obj = runtime.DeepCopyJSON(obj)
		delete(metaOf(obj), "managedFields")
		metaOf(obj)["managedFields"] = metaOf(m)["managedFields"]
		delete(st, statusManagers)
		obj["status"] = st
		return writeJSON(w, http.StatusOK, obj)
	}
	version, _ := strconv.ParseUint(rv, 10, 64)
	o, err := s.cfg.Gate.WriteGrantedStatus(q.r.Context(), grant, next, version)
	if err != nil {
		return s.gateError(q, err)
	}
	return s.showJSON(w, q, http.StatusOK, o)
}

// statusOf is a status in Kubernetes' shape as jetplane records it: all
// of it in details (so it reads back as written), and the phase,
// message, observedGeneration and conditions also where jetplane's own
// readers (readiness, dependsOn) look for them.
func statusOf(m map[string]any) (*schemas.Status, error) {
	st := &schemas.Status{}
	if len(m) == 0 {
		return st, nil
	}
	details, err := structpb.NewStruct(m)
	if err != nil {
		return nil, err
	}
	st.Details = details
	st.Phase, _ = m["phase"].(string)
	st.Message, _ = m["message"].(string)
	if g, ok := m["observedGeneration"].(float64); ok {
		st.ObservedGeneration = int64(g)
	}
	cs, _ := m["conditions"].([]any)
	for _, c := range cs {
		cm, _ := c.(map[string]any)
		typ, _ := cm["type"].(string)
		if typ == "" {
			continue
		}
		cond := &schemas.Condition{Type: typ}
		cond.Status, _ = cm["status"].(string)
		cond.Reason, _ = cm["reason"].(string)
		cond.Message, _ = cm["message"].(string)
		if ts, _ := cm["lastTransitionTime"].(string); ts != "" {
			if t, err := time.Parse(time.RFC3339, ts); err == nil {
				cond.LastTransitionTime = timestamppb.New(t)
			}
		}
		st.Conditions = append(st.Conditions, cond)
	}
	return st, nil
}

// lookup is the value at a JSON path (".spec.replicas") of obj.
func lookup(obj map[string]any, path string) (any, bool) {
	jp := jsonpath.New("scale").AllowMissingKeys(true)
	if err := jp.Parse("{" + path + "}"); err != nil {
		return nil, false
	}
	res, err := jp.FindResults(obj)
	if err != nil || len(res) == 0 || len(res[0]) == 0 {
		return nil, false
	}
	return res[0][0].Interface(), true
}

// set sets the value at a JSON path of simple field names.
func set(obj map[string]any, path string, v any) {
	parts := strings.Split(strings.TrimPrefix(path, "."), ".")
	cur := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
	cur[parts[len(parts)-1]] = v
}

// scaleOf is obj's autoscaling/v1 Scale.
func scaleOf(obj map[string]any, sc *crd.Scale) (*autoscalingv1.Scale, error) {
	md := metaOf(obj)
	out := &autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"}}
	out.Name, _ = md["name"].(string)
	out.Namespace, _ = md["namespace"].(string)
	uid, _ := md["uid"].(string)
	out.UID = types.UID(uid)
	out.ResourceVersion, _ = md["resourceVersion"].(string)
	if ts, _ := md["creationTimestamp"].(string); ts != "" {
		if t, err := time.Parse(time.RFC3339, ts); err == nil {
			out.CreationTimestamp = metav1.NewTime(t)
		}
	}
	if v, ok := lookup(obj, sc.SpecReplicasPath); ok {
		out.Spec.Replicas = int32(number(v))
	} else if sc == builtinScale {
		out.Spec.Replicas = 1 // Kubernetes' default
	}
	if v, ok := lookup(obj, sc.StatusReplicasPath); ok {
		out.Status.Replicas = int32(number(v))
	}
	if sc.LabelSelectorPath != "" {
		if v, ok := lookup(obj, sc.LabelSelectorPath); ok {
			switch sel := v.(type) {
			case string:
				out.Status.Selector = sel
			case map[string]any:
				b, _ := json.Marshal(sel)
				var ls metav1.LabelSelector
				if json.Unmarshal(b, &ls) == nil {
					if s, err := metav1.LabelSelectorAsSelector(&ls); err == nil {
						out.Status.Selector = s.String()
					}
				}
			}
		}
	}
	return out, nil
}

func number(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int64:
		return float64(n)
	case int:
		return float64(n)
	case json.Number:
		f, _ := n.Float64()
		return f
	}
	return 0
}

// scale serves /scale: reads answer the object's Scale; writes set its
// replicas (spec.replicas) through the gate like any change of the
// object, and answer the Scale after.
func (s *Server) scale(w http.ResponseWriter, q *request, sc *crd.Scale) error {
	cur, err := s.subject(q)
	if err != nil {
		return err
	}
	obj := s.show(q, cur)
	now, err := scaleOf(obj, sc)
	if err != nil {
		return err
	}
	if q.r.Method == http.MethodGet {
		return writeJSON(w, http.StatusOK, now)
	}
	if q.r.Method != http.MethodPut && q.r.Method != http.MethodPatch {
		return apierrors.NewMethodNotSupported(schema.GroupResource{Group: q.res.group, Resource: q.res.plural + "/scale"}, q.r.Method)
	}
	m, err := patched(w, q, now, &autoscalingv1.Scale{})
	if err != nil {
		return err
	}
	b, _ := json.Marshal(m)
	var want autoscalingv1.Scale
	if err := json.Unmarshal(b, &want); err != nil {
		return apierrors.NewBadRequest("the body is not a Scale: " + err.Error())
	}
	if want.Spec.Replicas < 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("spec.replicas: %d: must be greater than or equal to 0", want.Spec.Replicas))
	}
	if want.Name != "" && want.Name != q.name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, q.name))
	}
	if err := s.checkVersion(q, cur, want.ResourceVersion); err != nil {
		return err
	}
	next := s.show(q, cur)
	set(next, sc.SpecReplicasPath, int64(want.Spec.Replicas))
	want.TypeMeta = now.TypeMeta
	if mf, err := s.scaleManagedFields(q, obj, now, &want, sc); err != nil {
		s.cfg.Logger.Warn("scale: managedFields kept as they were", "object", q.key().String(), "err", err)
	} else {
		metaOf(next)["managedFields"] = mf
	}
	q.sub = ""
	o, _, err := s.prepare(q, next)
	if err != nil {
		return err
	}
	stored, err := s.store(q, o)
	if err != nil {
		return err
	}
	out, err := scaleOf(s.show(q, stored.Object), sc)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

// store writes o through the gate (or its dry run) and returns its
// outcome: the object as stored (as it would be), warnings, the previous.
func (s *Server) store(q *request, o *schemas.Object) (gate.Outcome, error) {
	p := q.caller.Principal
	var outs []gate.Outcome
	var err error
	if dryRun(q.r) {
		outs, err = s.cfg.Gate.DryRun(q.r.Context(), p, []*schemas.Object{o})
	} else {
		outs, err = s.cfg.Gate.Apply(q.r.Context(), p, []*schemas.Object{o}, "")
	}
	if err != nil {
		return gate.Outcome{}, s.gateError(q, err)
	}
	return outs[0], nil
}

var scaleKind = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// scaleManagedFields records a scale write's manager in the object's
// managedFields as kube-apiserver does: the object's entries are turned
// into the Scale's (spec.replicas), the write is recorded there, and the
// result is turned back (managedfields.ScaleHandler).
func (s *Server) scaleManagedFields(q *request, live map[string]any, old, want *autoscalingv1.Scale, sc *crd.Scale) ([]any, error) {
	gv := kindOf(q.res).GroupVersion()
	path := fieldpath.Path{}
	for _, f := range strings.Split(strings.TrimPrefix(sc.SpecReplicasPath, "."), ".") {
		path = append(path, fieldpath.PathElement{FieldName: &f})
	}
	h := managedfields.NewScaleHandler((&unstructured.Unstructured{Object: live}).GetManagedFields(), gv,
		managedfields.ResourcePathMappings{gv.String(): path})
	entries, err := h.ToSubresource()
	if err != nil {
		return nil, err
	}
	fm, err := s.fms.get(managerKey{scaleKind, "scale"}, nil, func() (*managedfields.FieldManager, error) {
		tc, err := scaleTypeConverter()
		if err != nil {
			return nil, err
		}
		return managedfields.NewDefaultFieldManager(tc, versionConverter{}, noDefaults{}, creater{}, scaleKind, scaleKind.GroupVersion(), "scale", nil)
	})
	if err != nil {
		return nil, err
	}
	oldU, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if err != nil {
		return nil, err
	}
	newU, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return nil, err
	}
	before := &unstructured.Unstructured{Object: oldU}
	before.SetManagedFields(entries)
	out := fm.UpdateNoErrors(before, &unstructured.Unstructured{Object: newU}, managerName(q.r))
	after, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("scale: the field manager answered %T", out)
	}
	parent, err := h.ToParent(after.GetManagedFields())
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(parent)
	if err != nil {
		return nil, err
	}
	var mf []any
	err = json.Unmarshal(b, &mf)
	return mf, err
}

// scaleTypeConverter types autoscaling/v1 Scale, which client-go's apply
// schemas do not hold, by the schema the server's OpenAPI derives from
// its Go type.
func scaleTypeConverter() (managedfields.TypeConverter, error) {
	g := &schemaGen{defs: map[string]any{}}
	typ := reflect.TypeOf(autoscalingv1.Scale{})
	g.ref(typ, "")
	g.defs[g.name(typ)].(map[string]any)["x-kubernetes-group-version-kind"] = []any{map[string]any{"group": "autoscaling", "version": "v1", "kind": "Scale"}}
	return typeConverterOf(g.defs)
}

// applyStatus takes a server-side apply of the status: the configuration
// is merged into the object for the status subresource's field manager
// (which leaves everything but the status).
func (s *Server) applyStatus(w http.ResponseWriter, q *request, live map[string]any) (map[string]any, error) {
	body, err := readAll(w, q.r)
	if err != nil {
		return nil, err
	}
	config, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, apierrors.NewBadRequest("apply: the body is not YAML or JSON: " + err.Error())
	}
	var c map[string]any
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, apierrors.NewBadRequest("apply: the body is not an object: " + err.Error())
	}
	rv, _ := metaOf(c)["resourceVersion"].(string)
	m, err := s.applied(q, live, c)
	if err != nil {
		return nil, err
	}
	metaOf(m)["resourceVersion"] = rv
	return m, nil
}
