package manifest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas"
)

// maxAnnotationBytes is the Kubernetes limit on the total size of an object's
// annotation keys and values, kept so that what Kubernetes accepts round-trips.
const maxAnnotationBytes = 256 << 10

const (
	dns1123Label     = `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
	dns1123Subdomain = dns1123Label + `(\.` + dns1123Label + `)*`
	kindPattern      = `[A-Z][A-Za-z0-9]*`
)

var (
	refKindRE    = regexp.MustCompile(`^` + kindPattern + `(\.` + dns1123Subdomain + `)?$`)
	qualifiedRE  = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	labelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

var (
	topLevelFields = []string{"apiVersion", "kind", "metadata", "spec", "status"}
	listFields     = []string{"apiVersion", "kind", "metadata", "items"}
	metadataFields = []string{"name", "namespace", "labels", "annotations", "group", "dependsOn", "finalizers"}
	// ownedMetadata is written by jetplane (or by the Kubernetes API server
	// when the manifest came from `kubectl get -o yaml`). It is dropped, not
	// rejected, so such output can be applied as it is.
	ownedMetadata = []string{"uid", "generation", "resourceVersion", "creationTime", "creationTimestamp",
		"deletionTime", "deletionTimestamp", "managedFields", "selfLink"}
	refFields = []string{"kind", "namespace", "name"}
)

// checker collects every problem in one document rather than stopping at the
// first, so a user fixes a manifest in one round trip. Its errors carry only
// Field and Reason; the caller adds Source and Doc.
type checker struct {
	kubernetes bool // skip jetplane's own Pod and Node rules
	errs       []*Error
}

func (c *checker) add(field, format string, args ...any) {
	c.errs = append(c.errs, &Error{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// decoded is one object and the path of its item in a List ("" otherwise),
// for errors found after validation.
type decoded struct {
	obj  *schemas.Object
	path string
}

// objectsOf turns one document's value into objects: one, or the items of a
// kind: List. It returns objects only when it found no problem.
func objectsOf(root any, kubernetes bool) ([]decoded, []*Error) {
	c := checker{kubernetes: kubernetes}
	m, ok := root.(map[string]any)
	if !ok {
		c.add("", "expected a mapping with apiVersion, kind and metadata, got %s", describe(root))
		return nil, c.errs
	}
	if kind, _ := m["kind"].(string); kind == "List" {
		objs := c.list(m)
		return objs, c.errs
	}
	o := c.object(m, "")
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return []decoded{{obj: o}}, nil
}

// list expands a kind: List (what `kubectl get -o yaml` prints for several
// objects) into its items. The List's own apiVersion and metadata mean nothing
// to jetplane.
func (c *checker) list(m map[string]any) []decoded {
	c.unknownFields(m, "", listFields, nil, "a List has apiVersion, kind, metadata and items")
	raw, present := m["items"]
	items, ok := raw.([]any)
	switch {
	case !present:
		c.add("items", "is required in a List")
		return nil
	case raw != nil && !ok:
		c.add("items", "must be a list of objects, got %s", describe(raw))
		return nil
	}
	var objs []decoded
	for i, item := range items {
		path := indexPath("items", i)
		im, ok := item.(map[string]any)
		if !ok {
			c.add(path, "must be a mapping with apiVersion, kind and metadata, got %s", describe(item))
			continue
		}
		if kind, _ := im["kind"].(string); kind == "List" {
			c.add(fieldPath(path, "kind"), "a List cannot contain another List")
			continue
		}
		before := len(c.errs)
		o := c.object(im, path)
		if len(c.errs) == before {
			objs = append(objs, decoded{o, path})
		}
	}
	if len(c.errs) > 0 {
		return nil
	}
	return objs
}

func (c *checker) object(m map[string]any, prefix string) *schemas.Object {
	kind, _ := m["kind"].(string)
	content := contentFields[kind]
	c.unknownFields(m, prefix, append(content, topLevelFields...), nil, "an object has apiVersion, kind, metadata and spec; settings belong under spec")
	o := &schemas.Object{Metadata: &schemas.ObjectMeta{}}

	if v, ok := c.requiredString(m, prefix, "apiVersion"); ok {
		if reason := checkAPIVersion(v); reason != "" {
			c.add(fieldPath(prefix, "apiVersion"), "%s is not a valid apiVersion: %s", quoteValue(v), reason)
		}
		o.ApiVersion = v
	}
	if v, ok := c.requiredString(m, prefix, "kind"); ok {
		switch {
		case len(v) > 63:
			c.add(fieldPath(prefix, "kind"), "%s is not a valid kind: must be no more than 63 characters", quoteValue(v))
		case !isKind(v):
			c.add(fieldPath(prefix, "kind"), "%s is not a valid kind: must start with an upper case letter and contain only letters and digits, such as Deployment", quoteValue(v))
		}
		o.Kind = v
	}

	metaPath := fieldPath(prefix, "metadata")
	switch meta, present := m["metadata"]; {
	case !present || meta == nil:
		c.add(metaPath, "is required")
	default:
		mm, ok := meta.(map[string]any)
		if !ok {
			c.add(metaPath, "must be a mapping, got %s", describe(meta))
			break
		}
		c.metadata(mm, metaPath, o)
	}

	specPath := fieldPath(prefix, "spec")
	if len(content) > 0 {
		m = liftContent(c, m, prefix, content)
	}
	switch spec := m["spec"].(type) {
	case nil:
		o.Spec = &structpb.Struct{}
	case map[string]any:
		s, err := structpb.NewStruct(spec)
		if err != nil {
			c.add(specPath, "%v", err)
		}
		o.Spec = s
	default:
		c.add(specPath, "must be a mapping, got %s", describe(spec))
	}
	c.kindSpec(o, prefix)
	// status is written by jetplane's reconcilers; a manifest's copy (often
	// from `kubectl get -o yaml`) is stale by definition.
	return o
}

// liftContent moves a kind's top-level content fields under spec.
func liftContent(c *checker, m map[string]any, prefix string, content []string) map[string]any {
	spec, _ := m["spec"].(map[string]any)
	// m is the caller's (DecodeValue reads a value it does not own):
	// its spec is copied before a field is moved into it.
	moved, own := false, spec == nil
	for _, f := range content {
		v, ok := m[f]
		if !ok {
			continue
		}
		if spec == nil {
			if _, hasSpec := m["spec"]; hasSpec {
				return m // spec has the wrong type; that error is reported below
			}
			spec, own = map[string]any{}, true
		}
		if _, clash := spec[f]; clash {
			c.add(fieldPath(prefix, f), "is given both at the top level and under spec; keep one")
			continue
		}
		if !own {
			spec, own = maps.Clone(spec), true
		}
		spec[f] = v
		moved = true
	}
	if !moved {
		return m
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	out["spec"] = spec
	return out
}

func (c *checker) metadata(m map[string]any, path string, o *schemas.Object) {
	c.unknownFields(m, path, metadataFields, ownedMetadata,
		"metadata has name, namespace, labels, annotations, group, dependsOn and finalizers")
	meta := o.Metadata

	if v, ok := c.requiredString(m, path, "name"); ok {
		c.checkName(fieldPath(path, "name"), o.GetKind(), o.GetApiVersion(), v)
		meta.Name = v
	}
	if v, ok := c.optionalString(m, path, "namespace"); ok && v != "" {
		if reason := checkLabel(v); reason != "" {
			c.add(fieldPath(path, "namespace"), "%s is not a valid namespace: %s", quoteValue(v), reason)
		}
		meta.Namespace = v
	}
	if v, ok := c.optionalString(m, path, "group"); ok && v != "" {
		if reason := checkSubdomain(v); reason != "" {
			c.add(fieldPath(path, "group"), "%s is not a valid group: %s", quoteValue(v), reason)
		}
		meta.Group = v
	}

	labelsPath := fieldPath(path, "labels")
	meta.Labels = c.stringMap(m["labels"], labelsPath)
	for _, k := range sortedKeys(meta.Labels) {
		field := fieldPath(labelsPath, k)
		if reason := checkQualifiedName(k); reason != "" {
			c.add(field, "%s is not a valid label key: %s", quoteValue(k), reason)
		}
		if reason := checkLabelValue(meta.Labels[k]); reason != "" {
			c.add(field, "%s is not a valid label value: %s", quoteValue(meta.Labels[k]), reason)
		}
	}

	annotationsPath := fieldPath(path, "annotations")
	meta.Annotations = c.stringMap(m["annotations"], annotationsPath)
	total := 0
	for _, k := range sortedKeys(meta.Annotations) {
		total += len(k) + len(meta.Annotations[k])
		if reason := checkQualifiedName(k); reason != "" {
			c.add(fieldPath(annotationsPath, k), "%s is not a valid annotation key: %s", quoteValue(k), reason)
		}
	}
	if total > maxAnnotationBytes {
		c.add(annotationsPath, "keys and values total %d bytes, more than the limit of %d (256 KiB); keep large data in spec", total, maxAnnotationBytes)
	}

	c.finalizers(m["finalizers"], fieldPath(path, "finalizers"), meta)
	c.dependsOn(m["dependsOn"], fieldPath(path, "dependsOn"), o)
}

func (c *checker) finalizers(v any, path string, meta *schemas.ObjectMeta) {
	if v == nil {
		return
	}
	list, ok := v.([]any)
	if !ok {
		c.add(path, "must be a list of strings, got %s", describe(v))
		return
	}
	for i, item := range list {
		field := indexPath(path, i)
		s, ok := item.(string)
		if !ok {
			c.add(field, "must be a string, got %s", describe(item))
			continue
		}
		if reason := checkQualifiedName(s); reason != "" {
			c.add(field, "%s is not a valid finalizer: %s", quoteValue(s), reason)
			continue
		}
		if j := slices.Index(meta.Finalizers, s); j >= 0 {
			c.add(field, "duplicate finalizer %s", quoteValue(s))
			continue
		}
		meta.Finalizers = append(meta.Finalizers, s)
	}
}

// dependsOn runs after name and namespace are known: references default to
// the object's own namespace, and an object must not wait for itself.
func (c *checker) dependsOn(v any, path string, o *schemas.Object) {
	if v == nil {
		return
	}
	list, ok := v.([]any)
	if !ok {
		c.add(path, "must be a list of {kind, namespace, name} mappings, got %s", describe(v))
		return
	}
	self := KeyString(KeyOf(o))
	seen := make(map[string]int, len(list))
	for i, item := range list {
		entryPath := indexPath(path, i)
		m, ok := item.(map[string]any)
		if !ok {
			c.add(entryPath, "must be a mapping with kind and name, got %s", describe(item))
			continue
		}
		before := len(c.errs)
		for _, k := range sortedKeys(m) {
			switch {
			case slices.Contains(refFields, k):
			case k == "apiVersion":
				c.add(fieldPath(entryPath, k), "unknown field %q; write the API group into kind instead, such as Deployment.apps", k)
			default:
				c.add(fieldPath(entryPath, k), "unknown field %s; a dependsOn entry has kind, namespace and name", quoteValue(k))
			}
		}
		key := &schemas.ObjectKey{}
		if kind, ok := c.requiredString(m, entryPath, "kind"); ok {
			if len(kind) > 317 || !refKindRE.MatchString(kind) {
				c.add(fieldPath(entryPath, "kind"), "%s is not a valid kind: must be Kind or Kind.group, such as Service or Deployment.apps", quoteValue(kind))
			}
			key.Kind = kind
			if !isClusterScoped(kind) {
				key.Namespace = o.Metadata.Namespace
			}
		}
		if ns, ok := c.optionalString(m, entryPath, "namespace"); ok && ns != "" {
			if reason := checkLabel(ns); reason != "" {
				c.add(fieldPath(entryPath, "namespace"), "%s is not a valid namespace: %s", quoteValue(ns), reason)
			}
			key.Namespace = ns
		}
		if name, ok := c.requiredString(m, entryPath, "name"); ok {
			c.checkName(fieldPath(entryPath, "name"), key.Kind, "", name)
			key.Name = name
		}
		if len(c.errs) > before {
			continue
		}
		ks := KeyString(key)
		if ks == self {
			c.add(entryPath, "object %s depends on itself", self)
			continue
		}
		if j, dup := seen[ks]; dup {
			c.add(entryPath, "%s is listed twice (also at %s)", ks, indexPath(path, j))
			continue
		}
		seen[ks] = i
		o.Metadata.DependsOn = append(o.Metadata.DependsOn, key)
	}
}

func (c *checker) unknownFields(m map[string]any, path string, allowed, ignored []string, hint string) {
	for _, k := range sortedKeys(m) {
		if slices.Contains(allowed, k) || slices.Contains(ignored, k) {
			continue
		}
		reason := "unknown field " + quoteValue(k)
		if i := slices.IndexFunc(allowed, func(a string) bool { return strings.EqualFold(a, k) }); i >= 0 {
			reason += fmt.Sprintf("; did you mean %q?", allowed[i])
		} else if hint != "" {
			reason += "; " + hint
		}
		c.add(fieldPath(path, k), "%s", reason)
	}
}

func (c *checker) requiredString(m map[string]any, path, key string) (string, bool) {
	v, present := m[key]
	if !present || v == nil {
		c.add(fieldPath(path, key), "is required")
		return "", false
	}
	s, ok := c.asString(v, fieldPath(path, key))
	if ok && s == "" {
		c.add(fieldPath(path, key), "must not be empty")
		return "", false
	}
	return s, ok
}

// optionalString treats null as absent, as kubectl does for `namespace:`.
func (c *checker) optionalString(m map[string]any, path, key string) (string, bool) {
	v := m[key]
	if v == nil {
		return "", false
	}
	return c.asString(v, fieldPath(path, key))
}

func (c *checker) asString(v any, field string) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case float64, bool:
		c.add(field, "must be a string, got %s; quote it", describe(v))
	default:
		c.add(field, "must be a string, got %s", describe(v))
	}
	return "", false
}

func (c *checker) stringMap(v any, path string) map[string]string {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		c.add(path, "must be a mapping of strings to strings, got %s", describe(v))
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		if s, ok := c.asString(m[k], fieldPath(path, k)); ok {
			out[k] = s
		}
	}
	return out
}

// checkName checks an object's name by its kind's rule, as Kubernetes
// does: RBAC objects (Role, ClusterRole and their bindings) may be named
// by any path segment, such as "system:controller:leader-election";
// every other kind by a DNS-1123 subdomain. apiVersion is "" for a
// reference, whose kind carries its group ("ClusterRole.rbac.authorization.k8s.io").
func (c *checker) checkName(field, kind, apiVersion, name string) {
	if isRBAC(kind, apiVersion) {
		if reason := checkPathSegment(name); reason != "" {
			c.add(field, "%s is not a valid name: %s", quoteValue(name), reason)
		}
		return
	}
	if reason := checkSubdomain(name); reason != "" {
		c.add(field, "%s is not a valid name: %s", quoteValue(name), reason)
	}
}

const rbacGroup = "rbac.authorization.k8s.io"

func isRBAC(kind, apiVersion string) bool {
	if k, group, ok := strings.Cut(kind, "."); ok {
		kind, apiVersion = k, group+"/"
	}
	if !strings.HasPrefix(apiVersion, rbacGroup+"/") {
		return false
	}
	switch kind {
	case "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
		return true
	}
	return false
}

// checkPathSegment is Kubernetes' rule for names that are a path segment.
func checkPathSegment(s string) string {
	switch {
	case s == "." || s == "..":
		return "may not be '.' or '..'"
	case strings.ContainsAny(s, "/%"):
		return "may not contain '/' or '%'"
	}
	return ""
}

func checkSubdomain(s string) string {
	if len(s) > 253 {
		return fmt.Sprintf("must be no more than 253 characters, has %d", len(s))
	}
	if !isSubdomain(s) {
		return "must be lower case alphanumeric characters, '-' or '.', start and end with an alphanumeric (DNS-1123 subdomain)"
	}
	return ""
}

func checkLabel(s string) string {
	if len(s) > 63 {
		return fmt.Sprintf("must be no more than 63 characters, has %d", len(s))
	}
	if !isLabel(s) {
		return "must be lower case alphanumeric characters or '-', start and end with an alphanumeric (DNS-1123 label)"
	}
	return ""
}

// checkQualifiedName applies the Kubernetes rule for label and annotation
// keys and finalizers: an optional DNS subdomain prefix and a slash, then a
// name of at most 63 characters.
func checkQualifiedName(s string) string {
	name := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		prefix := s[:i]
		name = s[i+1:]
		if prefix == "" {
			return "the prefix before '/' must not be empty"
		}
		if reason := checkSubdomain(prefix); reason != "" {
			return "the prefix before '/' " + reason
		}
	}
	switch {
	case name == "":
		return "the name part must not be empty"
	case len(name) > 63:
		return fmt.Sprintf("the name part must be no more than 63 characters, has %d", len(name))
	case !qualifiedRE.MatchString(name):
		return "the name part must consist of alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric, with an optional DNS subdomain prefix and '/' (such as example.com/my-name)"
	}
	return ""
}

func checkLabelValue(s string) string {
	if len(s) > 63 {
		return fmt.Sprintf("must be no more than 63 characters, has %d", len(s))
	}
	if !labelValueRE.MatchString(s) {
		return "must be empty or consist of alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric"
	}
	return ""
}

func checkAPIVersion(s string) string {
	const want = `must be "version" or "group/version", such as "v1" or "apps/v1"`
	group, version, hasGroup := strings.Cut(s, "/")
	if !hasGroup {
		group, version = "", s
	}
	if len(version) > 63 || !isLabel(version) || hasGroup && checkSubdomain(group) != "" {
		return want
	}
	return ""
}

// describe names a value's type for messages, with the value itself when it
// is short enough to help.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string (" + quoteValue(x) + ")"
	case float64:
		return "a number (" + strconv.FormatFloat(x, 'g', -1, 64) + ")"
	case bool:
		return "a boolean (" + strconv.FormatBool(x) + ")"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// quoteValue quotes user text for a message, shortened so that a 1 MiB value
// does not become a 1 MiB error.
func quoteValue(s string) string {
	const max = 80
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("... (%d bytes)", len(s))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
