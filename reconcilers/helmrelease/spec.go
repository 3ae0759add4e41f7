package helmrelease

import (
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/reconcilers/apply"
	"github.com/jetplane/jetplane/schemas"
)

// Kind is the kind this package reconciles, as keys name it.
const Kind = "HelmRelease"

// Labels on every child: the owning release's namespace and name.
const (
	LabelReleaseNamespace = "jetplane.dev/release-namespace"
	LabelReleaseName      = "jetplane.dev/release-name"
)

// FieldError is a HelmRelease spec that cannot be used: the same error an
// Apply's spec gives, Field the path from the HelmRelease object
// ("spec.chart.version").
type FieldError = apply.FieldError

func fieldError(field, reason string) *FieldError {
	return &FieldError{Field: field, Reason: reason}
}

// ValuesRef names a ConfigMap or Secret (a jetplane object in the
// release's namespace) whose Key holds values as YAML.
type ValuesRef struct {
	Kind, Name, Key string
	Optional        bool
}

// Spec is a HelmRelease's spec, decoded and checked.
type Spec struct {
	// Chart: Name and Version, from Repository (a Helm HTTP repository's
	// URL) or, without one, from the charts pushed with `jetplane chart
	// push`.
	Chart struct{ Name, Version, Repository string }
	// Values override the chart's defaults, after ValuesFrom (in order).
	Values     map[string]any
	ValuesFrom []ValuesRef
	// ReleaseNamespace is .Release.Namespace and where objects without a
	// namespace go (default: the HelmRelease's namespace).
	ReleaseNamespace string
	// Cluster, when set, makes every rendered object an Apply into that
	// cluster; without it the objects are jetplane objects themselves.
	Cluster string
}

// decodeSpec reads and validates obj's spec. Its errors are *FieldError.
func decodeSpec(obj *schemas.Object) (*Spec, error) {
	owner := projections.ObjectKey(obj)
	for _, f := range []struct{ field, value, label string }{
		{"metadata.namespace", owner.Namespace, LabelReleaseNamespace},
		{"metadata.name", owner.Name, LabelReleaseName},
	} {
		if errs := validation.IsValidLabelValue(f.value); len(errs) > 0 || f.value == "" {
			return nil, fieldError(f.field, fmt.Sprintf("%q cannot be the value of label %s on the release's objects: %s",
				f.value, f.label, strings.Join(append(errs, "must not be empty"), "; ")))
		}
	}
	fields := obj.GetSpec().GetFields()
	for name := range fields {
		switch name {
		case "chart", "values", "valuesFrom", "releaseNamespace", "cluster":
		default:
			return nil, fieldError("spec."+name, "unknown field; a HelmRelease has chart, values, valuesFrom, releaseNamespace and cluster")
		}
	}
	s := &Spec{}
	chart := fields["chart"].GetStructValue()
	if chart == nil {
		return nil, fieldError("spec.chart", "required: an object with name and version (and repository for a Helm HTTP repository), not "+valueType(fields["chart"]))
	}
	for name := range chart.GetFields() {
		if name != "name" && name != "version" && name != "repository" {
			return nil, fieldError("spec.chart."+name, "unknown field; chart has name, version and repository")
		}
	}
	var err error
	if s.Chart.Name, err = str(chart.GetFields(), "spec.chart", "name", true); err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Subdomain(s.Chart.Name); len(errs) > 0 {
		return nil, fieldError("spec.chart.name", fmt.Sprintf("%q is not a chart name: %s", s.Chart.Name, strings.Join(errs, "; ")))
	}
	if s.Chart.Version, err = str(chart.GetFields(), "spec.chart", "version", true); err != nil {
		return nil, err
	}
	if _, err := semver.NewConstraint(s.Chart.Version); err != nil {
		return nil, fieldError("spec.chart.version", fmt.Sprintf("%q is not a version or version range: %v", s.Chart.Version, err))
	}
	if s.Chart.Repository, err = str(chart.GetFields(), "spec.chart", "repository", false); err != nil {
		return nil, err
	}
	if r := s.Chart.Repository; r != "" && !strings.HasPrefix(r, "http://") && !strings.HasPrefix(r, "https://") {
		return nil, fieldError("spec.chart.repository", fmt.Sprintf("%q: must be the http:// or https:// URL of a Helm repository (the directory holding index.yaml)", r))
	}
	if r := s.Chart.Repository; r == "" {
		if _, err := semver.StrictNewVersion(s.Chart.Version); err != nil {
			return nil, fieldError("spec.chart.version", fmt.Sprintf("%q: a pushed chart is named by an exact version (NAME:VERSION as pushed), such as 1.2.3", s.Chart.Version))
		}
	}
	if v, ok := fields["values"]; ok && valueType(v) != "null" {
		st := v.GetStructValue()
		if st == nil {
			return nil, fieldError("spec.values", "must be an object (the chart's values), not "+valueType(v))
		}
		s.Values = st.AsMap()
	}
	if v, ok := fields["valuesFrom"]; ok && valueType(v) != "null" {
		list := v.GetListValue()
		if list == nil {
			return nil, fieldError("spec.valuesFrom", "must be a list of {kind, name, key, optional}, not "+valueType(v))
		}
		for i, item := range list.GetValues() {
			path := fmt.Sprintf("spec.valuesFrom[%d]", i)
			m := item.GetStructValue()
			if m == nil {
				return nil, fieldError(path, "must be an object {kind, name, key, optional}, not "+valueType(item))
			}
			for name := range m.GetFields() {
				switch name {
				case "kind", "name", "key", "optional":
				default:
					return nil, fieldError(path+"."+name, "unknown field; valuesFrom entries have kind, name, key and optional")
				}
			}
			var ref ValuesRef
			if ref.Kind, err = str(m.GetFields(), path, "kind", true); err != nil {
				return nil, err
			}
			if ref.Kind != "ConfigMap" && ref.Kind != "Secret" {
				return nil, fieldError(path+".kind", fmt.Sprintf("%q: must be ConfigMap or Secret", ref.Kind))
			}
			if ref.Name, err = str(m.GetFields(), path, "name", true); err != nil {
				return nil, err
			}
			if ref.Key, err = str(m.GetFields(), path, "key", false); err != nil {
				return nil, err
			}
			if ref.Key == "" {
				ref.Key = "values.yaml"
			}
			if o, ok := m.GetFields()["optional"]; ok {
				b, isBool := o.GetKind().(*structpb.Value_BoolValue)
				if !isBool {
					return nil, fieldError(path+".optional", "must be true or false, not "+valueType(o))
				}
				ref.Optional = b.BoolValue
			}
			s.ValuesFrom = append(s.ValuesFrom, ref)
		}
	}
	if s.ReleaseNamespace, err = str(fields, "spec", "releaseNamespace", false); err != nil {
		return nil, err
	}
	if s.ReleaseNamespace == "" {
		s.ReleaseNamespace = owner.Namespace
	}
	if errs := validation.IsDNS1123Label(s.ReleaseNamespace); len(errs) > 0 {
		return nil, fieldError("spec.releaseNamespace", fmt.Sprintf("%q is not a namespace: %s", s.ReleaseNamespace, strings.Join(errs, "; ")))
	}
	if s.Cluster, err = str(fields, "spec", "cluster", false); err != nil {
		return nil, err
	}
	return s, nil
}

func str(fields map[string]*structpb.Value, path, name string, required bool) (string, error) {
	v, ok := fields[name]
	if !ok || valueType(v) == "null" {
		if required {
			return "", fieldError(path+"."+name, "required")
		}
		return "", nil
	}
	s, isStr := v.GetKind().(*structpb.Value_StringValue)
	if !isStr {
		return "", fieldError(path+"."+name, "must be a string, not "+valueType(v))
	}
	if required && s.StringValue == "" {
		return "", fieldError(path+"."+name, "required")
	}
	return s.StringValue, nil
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
	}
	return "null"
}
