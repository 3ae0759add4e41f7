package kubeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/jetplane/jetplane/internal/jsonvalue"
	"github.com/jetplane/jetplane/schemas/crd"
)

// Field ownership (server-side apply) is apimachinery's: a
// managedfields.FieldManager per kind and version merges applied
// configurations, records which manager owns which field and reports
// conflicts, as in kube-apiserver. Built-in Kubernetes kinds are typed
// by the schemas client-go's apply configurations carry (the same models
// kube-apiserver merges with: list keys, atomic and granular fields);
// defined kinds and jetplane's own kinds are merged as
// kube-apiserver merges a CustomResourceDefinition without a schema
// (maps field by field, lists whole). Decision 0075.

// AnnotationManagedFields holds an object's managedFields (JSON) in the
// log: the object model has no place for them. The Kubernetes API shows
// them as metadata.managedFields and never as an annotation.
const AnnotationManagedFields = "kubeapi.jetplane.dev/managed-fields"

// jetplaneMeta is metadata jetplane's manifests write that Kubernetes'
// ObjectMeta does not have; it is kept out of field management.
var jetplaneMeta = []string{"group", "dependsOn"}

var (
	builtinTypes     managedfields.TypeConverter
	builtinTypesOnce sync.Once
)

func builtinTypeConverter() managedfields.TypeConverter {
	builtinTypesOnce.Do(func() { builtinTypes = applyconfigurations.NewTypeConverter(scheme.Scheme) })
	return builtinTypes
}

var typedKinds sync.Map // schema.GroupVersionKind → bool

// typedKind reports whether the built-in schemas type gvk.
func typedKind(gvk schema.GroupVersionKind) bool {
	if v, ok := typedKinds.Load(gvk); ok {
		return v.(bool)
	}
	typed := false
	if scheme.Scheme.Recognizes(gvk) {
		u, _ := creater{}.New(gvk)
		_, err := builtinTypeConverter().ObjectToTyped(u)
		typed = err == nil
	}
	typedKinds.Store(gvk, typed)
	return typed
}

// fieldManagers caches one FieldManager per kind, version and
// subresource (and, for a defined kind, per version of its
// CustomResourceDefinition).
type fieldManagers struct {
	mu sync.Mutex
	m  map[managerKey]cachedManager
}

// managerKey names a field manager: a kind at a version, and a
// subresource ("" for the object itself).
type managerKey struct {
	gvk schema.GroupVersionKind
	sub string
}

type cachedManager struct {
	// def is the definition it was built from (nil for built-in kinds): a
	// changed CustomResourceDefinition is a new definition in a new
	// catalog, so the pointer says whether it still holds.
	def *crd.Definition
	fm  *managedfields.FieldManager
}

func (c *fieldManagers) get(key managerKey, def *crd.Definition, build func() (*managedfields.FieldManager, error)) (*managedfields.FieldManager, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok && e.def == def {
		return e.fm, nil
	}
	fm, err := build()
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[managerKey]cachedManager{}
	}
	c.m[key] = cachedManager{def: def, fm: fm}
	return fm, nil
}

func (s *Server) fieldManager(q *request, sub string) (*managedfields.FieldManager, error) {
	gvk := kindOf(q.res)
	if q.res.def == nil && typedKind(gvk) {
		return s.fms.get(managerKey{gvk, sub}, nil, func() (*managedfields.FieldManager, error) {
			return managedfields.NewDefaultFieldManager(builtinTypeConverter(), versionConverter{}, noDefaults{}, creater{}, gvk, gvk.GroupVersion(), sub, resetFields(gvk.GroupVersion(), sub))
		})
	}
	return s.fms.get(managerKey{gvk, sub}, q.res.def, func() (*managedfields.FieldManager, error) {
		tc := managedfields.NewDeducedTypeConverter()
		if q.res.def != nil {
			tc = s.definedTypeConverter(q.res)
		}
		return managedfields.NewDefaultCRDFieldManager(tc, versionConverter{}, noDefaults{}, creater{}, gvk, gvk.GroupVersion(), sub, resetFields(gvk.GroupVersion(), sub))
	})
}

// definedTypeConverter types a defined kind's objects by the schema the
// server's OpenAPI gives it (its CRD's, with Kubernetes' ObjectMeta), as
// kube-apiserver types them by the CRD (list types and map keys the
// schema declares). Without a usable schema fields are deduced from the
// objects, as kube-apiserver does for a CRD without one.
func (s *Server) definedTypeConverter(r resource) managedfields.TypeConverter {
	g := &schemaGen{defs: map[string]any{}}
	s.kindSchema(g, r)
	for _, d := range g.defs {
		// Every object has them; a CRD's schema need not say so.
		if d, ok := d.(map[string]any); ok && d["x-kubernetes-group-version-kind"] != nil {
			props, _ := d["properties"].(map[string]any)
			if props == nil {
				props = map[string]any{}
				d["properties"] = props
			}
			for _, f := range []string{"apiVersion", "kind"} {
				if props[f] == nil {
					props[f] = map[string]any{"type": "string"}
				}
			}
		}
	}
	tc, err := typeConverterOf(g.defs)
	if err != nil {
		return managedfields.NewDeducedTypeConverter()
	}
	return tc
}

// typeConverterOf types objects by OpenAPI schemas (components.schemas).
func typeConverterOf(defs map[string]any) (managedfields.TypeConverter, error) {
	b, err := json.Marshal(defs)
	if err != nil {
		return nil, err
	}
	var models map[string]*spec.Schema
	if err := json.Unmarshal(b, &models); err != nil {
		return nil, err
	}
	return managedfields.NewTypeConverter(models, false)
}

// resetFields are the fields a write through one endpoint leaves alone:
// the object's own endpoint does not write status, the status
// subresource writes nothing else.
func resetFields(gv schema.GroupVersion, sub string) map[fieldpath.APIVersion]fieldpath.Filter {
	var set *fieldpath.Set
	if sub == "status" {
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata"))
	} else {
		set = fieldpath.NewSet(fieldpath.MakePathOrDie("status"))
	}
	return map[fieldpath.APIVersion]fieldpath.Filter{fieldpath.APIVersion(gv.String()): fieldpath.NewExcludeSetFilter(set)}
}

// versionConverter converts between the served versions of one kind by
// changing apiVersion only: jetplane serves every kind at one version,
// and a defined kind's versions share their fields (the None strategy).
type versionConverter struct{}

func (versionConverter) Convert(in, out, context any) error {
	return fmt.Errorf("kubeapi: no conversion from %T to %T", in, out)
}

func (versionConverter) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("kubeapi: cannot convert %T", in)
	}
	gvk := u.GroupVersionKind()
	target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{gvk})
	if !ok {
		return nil, fmt.Errorf("kubeapi: %s is not served at %v", gvk, gv)
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(target)
	return out, nil
}

func (versionConverter) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

// noDefaults defaults nothing: jetplane's decoding defaults objects when
// they are written.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

type creater struct{}

func (creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// managerName is the field manager a request names (?fieldManager=), or
// the first word of its user agent, as kube-apiserver takes it.
func managerName(r *http.Request) string {
	if m := r.URL.Query().Get("fieldManager"); m != "" {
		return m
	}
	ua, _, _ := strings.Cut(r.UserAgent(), "/")
	if len(ua) > 128 {
		ua = ua[:128]
	}
	return ua
}

// liveObject is cur as field management reads it: in Kubernetes' shape,
// with its managedFields, without jetplane's own metadata and status
// (which the object's endpoint does not write). An object not stored yet
// is an empty one of the request's kind.
func (s *Server) liveObject(q *request, cur map[string]any) *unstructured.Unstructured {
	if cur == nil {
		u, _ := creater{}.New(kindOf(q.res))
		return u.(*unstructured.Unstructured)
	}
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(cur)}
	md := metaOf(u.Object)
	for _, f := range jetplaneMeta {
		delete(md, f)
	}
	if q.sub != "status" {
		delete(u.Object, "status")
	}
	return u
}

// liveView is liveObject(q, cur).Object to read, not to change: it shares
// cur's values below the object and its metadata.
func (s *Server) liveView(q *request, cur map[string]any) map[string]any {
	if cur == nil {
		return s.liveObject(q, nil).Object
	}
	v := make(map[string]any, len(cur))
	for k, x := range cur {
		if k != "status" || q.sub == "status" {
			v[k] = x
		}
	}
	md, _ := cur["metadata"].(map[string]any)
	vm := make(map[string]any, len(md))
	for k, x := range md {
		if !slices.Contains(jetplaneMeta, k) {
			vm[k] = x
		}
	}
	v["metadata"] = vm
	return v
}

// aside takes jetplane's own metadata out of m, for field management, and
// returns a function that puts it back.
func aside(m map[string]any) func(map[string]any) {
	md := metaOf(m)
	kept := map[string]any{}
	for _, f := range jetplaneMeta {
		if v, ok := md[f]; ok {
			kept[f] = v
			delete(md, f)
		}
	}
	return func(m map[string]any) {
		md := metaOf(m)
		for f, v := range kept {
			md[f] = v
		}
	}
}

// track records in m's managedFields what the request's manager changed
// from cur to m (a create, update or patch), as kube-apiserver does for
// every write. A failure leaves cur's managedFields, as there.
func (s *Server) track(q *request, cur, m map[string]any) {
	fm, err := s.fieldManager(q, q.sub)
	if err != nil {
		s.cfg.Logger.Warn("no field manager", "kind", q.res.key(), "err", err)
		return
	}
	back := aside(m)
	defer back(m)
	// Read only until the memo misses: the field manager gets a copy.
	live := &unstructured.Unstructured{Object: s.liveView(q, cur)}
	next := &unstructured.Unstructured{Object: make(map[string]any, len(m))}
	for k, v := range m {
		if k != "status" || q.sub == "status" {
			next.Object[k] = v
		}
	}
	if _, ok := metaOf(m)["managedFields"]; !ok {
		// A client that sends no managedFields keeps those stored.
		next.SetManagedFields(live.GetManagedFields())
	}
	manager := managerName(q.r)
	now := trackedNow()
	kb := keyBuffer()
	defer putKeyBuffer(kb)
	key := trackedKey(kb, fm, manager, now, live.Object, next.Object)
	if key != nil {
		if r, ok := getByBytes(trackedResults, key); ok && r.fm == fm {
			if r.ok {
				// Shared: a write's managedFields are read, never
				// changed (stored, shown, answered).
				metaOf(m)["managedFields"] = r.managedFields
			}
			return
		}
	}
	if cur != nil {
		live = s.liveObject(q, cur)
	}
	out := fm.UpdateNoErrors(live, next, manager)
	var r trackedResult
	if u, ok := out.(*unstructured.Unstructured); ok {
		r.managedFields, r.ok = metaOf(u.Object)["managedFields"], true
		metaOf(m)["managedFields"] = r.managedFields
	}
	// Kept only when the field manager's own time stamp fell in the
	// key's second: one taken across a second's turn would give later
	// writes of that second a time up to a second ahead.
	if key != nil && trackedNow().Unix() == now.Unix() {
		trackedResults.put(string(key), trackedResult{fm: fm, managedFields: copyResult(r.managedFields), ok: r.ok})
	}
}

// applied merges an apply configuration into cur (nil: the object is
// new) for the request's field manager, and returns the object to store,
// with its managedFields. Conflicts are a 409 naming each field and its
// manager, unless the request forces them.
func (s *Server) applied(q *request, cur map[string]any, config map[string]any) (map[string]any, error) {
	manager := q.r.URL.Query().Get("fieldManager")
	if manager == "" {
		return nil, apierrors.NewBadRequest("PATCH requests of type apply must have fieldManager set")
	}
	force := q.r.URL.Query().Get("force") == "true"
	fm, err := s.fieldManager(q, q.sub)
	if err != nil {
		return nil, err
	}
	back := aside(config)
	live := s.liveObject(q, cur)
	out, err := fm.Apply(live, &unstructured.Unstructured{Object: config}, manager, force)
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsBadRequest(err) {
			return nil, err
		}
		return nil, apierrors.NewBadRequest("apply: " + err.Error())
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok || u == nil {
		u = live
	}
	m := u.Object
	if cur != nil {
		// jetplane's metadata the configuration does not name stays.
		md := metaOf(cur)
		for _, f := range jetplaneMeta {
			if v, ok := md[f]; ok {
				metaOf(m)[f] = v
			}
		}
	}
	back(m)
	return m, nil
}

// storeManagedFields moves md's managedFields into the annotation that
// keeps them.
func storeManagedFields(md map[string]any) error {
	mf, ok := md["managedFields"]
	delete(md, "managedFields")
	ann, _ := md["annotations"].(map[string]any)
	if ann != nil {
		delete(ann, AnnotationManagedFields)
	}
	l, _ := mf.([]any)
	// The status subresource's entries are kept with the status.
	kept := l[:0:0]
	for _, e := range l {
		if em, _ := e.(map[string]any); em["subresource"] != "status" {
			kept = append(kept, e)
		}
	}
	if !ok || len(kept) == 0 {
		return nil
	}
	b, err := jsonvalue.Marshal(kept)
	if err != nil {
		return err
	}
	if err := validManagedFields(b); err != nil {
		return err
	}
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[AnnotationManagedFields] = string(b)
	return nil
}

// checkedManagedFields keeps managedFields (their JSON) found valid: the
// writes of one controller carry the same entries (track's memo gives
// them), which need not be decoded and checked again.
var checkedManagedFields = newRingCache[string, struct{}](1024)

// validManagedFields checks managedFields given as JSON as kube-apiserver
// does.
func validManagedFields(b []byte) error {
	keep := len(b) <= maxTrackedKey
	if keep {
		if _, ok := checkedManagedFields.get(string(b)); ok {
			return nil
		}
	}
	var entries []metav1.ManagedFieldsEntry
	if err := json.Unmarshal(b, &entries); err != nil {
		return apierrors.NewBadRequest("metadata.managedFields: " + err.Error())
	}
	if err := managedfields.ValidateManagedFields(entries); err != nil {
		return apierrors.NewBadRequest("metadata.managedFields: " + err.Error())
	}
	if keep {
		checkedManagedFields.put(string(b), struct{}{})
	}
	return nil
}

// showManagedFields moves the annotation that keeps md's managedFields
// back to metadata.managedFields.
func showManagedFields(md map[string]any) {
	ann, _ := md["annotations"].(map[string]any)
	v, ok := ann[AnnotationManagedFields].(string)
	if !ok {
		return
	}
	delete(ann, AnnotationManagedFields)
	if len(ann) == 0 {
		delete(md, "annotations")
	}
	if mf, ok := parsedManagedFields(v); ok {
		md["managedFields"] = mf
	}
}

// managedFieldsParsed keeps managedFields (entries in JSON, as an
// annotation or a status keeps them) parsed: an object is shown on every
// write of it, and a controller's objects share their entries. The
// entries are shared and read-only; the slices are clipped, so that an
// append copies them.
var managedFieldsParsed = newRingCache[string, []any](1024)

// parsedManagedFields is the managedFields entries v holds in JSON.
func parsedManagedFields(v string) ([]any, bool) {
	keep := len(v) <= maxTrackedKey
	if keep {
		if mf, ok := managedFieldsParsed.get(v); ok {
			return mf, true
		}
	}
	var mf []any
	if jsonvalue.Unmarshal([]byte(v), &mf) != nil {
		return nil, false
	}
	mf = slices.Clip(mf)
	if keep {
		managedFieldsParsed.put(v, mf)
	}
	return mf, true
}

// statusManagers is where a status keeps the managedFields entries of its
// writers (subresource "status"): a status write records the status and
// nothing else, so they travel with it. A status jetplane's own
// reconcilers write carries none.
const statusManagers = "kubeapi.jetplane.dev/managed-fields"

// keepStatusManagers puts the status subresource's entries of mf into st
// (a status in Kubernetes' shape).
func keepStatusManagers(st map[string]any, mf []any) error {
	delete(st, statusManagers)
	var own []any
	for _, e := range mf {
		if em, _ := e.(map[string]any); em["subresource"] == "status" {
			own = append(own, e)
		}
	}
	if len(own) == 0 {
		return nil
	}
	b, err := jsonvalue.Marshal(own)
	if err != nil {
		return err
	}
	st[statusManagers] = string(b)
	return nil
}

// showStatusManagers moves the entries a status keeps (st) to md's
// managedFields.
func showStatusManagers(md, st map[string]any) {
	v, ok := st[statusManagers].(string)
	if !ok {
		return
	}
	delete(st, statusManagers)
	own, ok := parsedManagedFields(v)
	if !ok {
		return
	}
	mf, _ := md["managedFields"].([]any)
	md["managedFields"] = append(mf, own...)
}
