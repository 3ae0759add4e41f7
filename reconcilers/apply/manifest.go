package apply

import (
	"fmt"
	"math"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// Kind is the kind this package reconciles, as keys name it.
const Kind = "Apply"

// Labels that mark the Kubernetes objects an Apply owns (decision 0009):
// the owning Apply's namespace and name; its kind is always Kind.
const (
	LabelApplyNamespace = "jetplane.io/apply-namespace"
	LabelApplyName      = "jetplane.io/apply-name"
)

// FieldError is an Apply spec that cannot be applied. Field is the path
// of the offending field from the Apply object ("spec.manifest.kind").
type FieldError struct {
	Field, Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Metadata fields the apiserver sets. Manifests exported from a cluster
// carry them; applying them back would fail (a stale resourceVersion or
// uid is a precondition) or be ignored, so they are dropped.
var readOnlyMetadata = []string{
	"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "selfLink",
}

// target is an Apply's spec, decoded and checked.
type target struct {
	owner   projections.Key // the Apply
	cluster string
	obj     *unstructured.Unstructured // labelled; namespace not yet resolved
	gvk     schema.GroupVersionKind
}

// decode reads and validates obj's spec. Its errors are *FieldError.
func decode(obj *schemas.Object) (*target, error) {
	owner := projections.ObjectKey(obj)
	for _, f := range []struct{ field, value, label string }{
		{"metadata.namespace", owner.Namespace, LabelApplyNamespace},
		{"metadata.name", owner.Name, LabelApplyName},
	} {
		if errs := validation.IsValidLabelValue(f.value); len(errs) > 0 {
			return nil, &FieldError{f.field, fmt.Sprintf("%q cannot be the value of label %s on the objects this Apply owns: %s",
				f.value, f.label, strings.Join(errs, "; "))}
		}
	}
	fields := obj.GetSpec().GetFields()
	cv := fields["cluster"]
	if _, ok := cv.GetKind().(*structpb.Value_StringValue); !ok && valueType(cv) != "null" {
		return nil, &FieldError{"spec.cluster", "must be a string, the name of a configured cluster, not " + valueType(cv)}
	}
	cluster := cv.GetStringValue()
	if cluster == "" {
		return nil, &FieldError{"spec.cluster", "required: the name of the cluster to apply to"}
	}
	mv := fields["manifest"]
	ms := mv.GetStructValue()
	if ms == nil {
		if valueType(mv) == "null" {
			return nil, &FieldError{"spec.manifest", "required: the Kubernetes object to apply"}
		}
		return nil, &FieldError{"spec.manifest", "must be an object (one Kubernetes manifest), not " + valueType(mv)}
	}
	m := ms.AsMap()
	normalizeNumbers(m)
	u := &unstructured.Unstructured{Object: m}
	gvk, err := checkManifest(u)
	if err != nil {
		return nil, err
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelApplyNamespace] = owner.Namespace
	labels[LabelApplyName] = owner.Name
	u.SetLabels(labels)
	return &target{owner: owner, cluster: cluster, obj: u, gvk: gvk}, nil
}

// checkManifest validates what jetplane needs of a manifest (the
// apiserver validates the rest) and drops read-only metadata.
func checkManifest(u *unstructured.Unstructured) (schema.GroupVersionKind, error) {
	const p = "spec.manifest."
	av, ok := u.Object["apiVersion"].(string)
	if !ok || av == "" {
		return schema.GroupVersionKind{}, &FieldError{p + "apiVersion", "required: a string such as v1 or apps/v1"}
	}
	gv, err := schema.ParseGroupVersion(av)
	if err != nil {
		return schema.GroupVersionKind{}, &FieldError{p + "apiVersion", err.Error()}
	}
	kind, ok := u.Object["kind"].(string)
	if !ok || kind == "" {
		return schema.GroupVersionKind{}, &FieldError{p + "kind", "required: a string such as Deployment"}
	}
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return schema.GroupVersionKind{}, &FieldError{p + "metadata", "required: an object with at least a name"}
	}
	if name, ok := md["name"].(string); !ok || name == "" {
		reason := "required: a string"
		if _, ok := md["generateName"]; ok {
			reason += " (generateName is not supported: server-side apply needs a fixed name)"
		}
		return schema.GroupVersionKind{}, &FieldError{p + "metadata.name", reason}
	}
	if ns, ok := md["namespace"]; ok {
		if _, ok := ns.(string); !ok && ns != nil {
			return schema.GroupVersionKind{}, &FieldError{p + "metadata.namespace", "must be a string"}
		}
	}
	for _, f := range []string{"labels", "annotations"} {
		v, ok := md[f]
		if !ok || v == nil {
			continue
		}
		mm, ok := v.(map[string]any)
		if !ok {
			return schema.GroupVersionKind{}, &FieldError{p + "metadata." + f, "must be an object of strings"}
		}
		for k, s := range mm {
			if _, ok := s.(string); !ok {
				return schema.GroupVersionKind{}, &FieldError{p + "metadata." + f + "[" + k + "]", "must be a string (quote numbers and booleans)"}
			}
		}
	}
	for _, f := range readOnlyMetadata {
		delete(md, f)
	}
	return gv.WithKind(kind), nil
}

// ObservedKey is the key under which the bridge records u as observed in
// cluster (decision 0009): kind with its API group ("Deployment.apps"),
// namespace "<cluster>/<namespace>" ("<cluster>/" when cluster-scoped),
// name. u's namespace must already be resolved: empty for a cluster-scoped
// kind, set for a namespaced one.
func ObservedKey(cluster string, u *unstructured.Unstructured) projections.Key {
	gvk := u.GroupVersionKind()
	kind := gvk.Kind
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return projections.Key{Kind: kind, Namespace: cluster + "/" + u.GetNamespace(), Name: u.GetName()}
}

// normalizeNumbers turns the whole float64 numbers of a protobuf Struct
// into int64, as a JSON decoder of Kubernetes objects does, so that
// "replicas: 3" compares and encodes as the integer it was written as.
func normalizeNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normalizeNumbers(e)
		}
	case float64:
		if v == math.Trunc(v) && v >= -(1<<63) && v < 1<<63 {
			return int64(v)
		}
	}
	return v
}

func valueType(v *structpb.Value) string {
	switch v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return "a string"
	case *structpb.Value_NumberValue:
		return "a number"
	case *structpb.Value_BoolValue:
		return "a boolean"
	case *structpb.Value_ListValue:
		return "a list"
	case *structpb.Value_StructValue:
		return "an object"
	default:
		return "null"
	}
}
