// Package crd reads apiextensions.k8s.io/v1 CustomResourceDefinitions as
// people write them for Kubernetes and checks objects of the kinds they
// define with apiextensions-apiserver's own libraries: the CRD is
// validated as kube-apiserver validates it (structural schema, CEL rules
// compiled and costed), and each object is pruned of unknown fields (an
// error here, as kubectl's strict field validation makes it), defaulted,
// validated against the version's openAPIV3Schema (types, required, enums,
// patterns, bounds, list types) and its x-kubernetes-validations (CEL, with
// oldSelf for transition rules), and stored at the storage version.
//
// It is pure: a Definition is compiled once from a CRD object and checking
// an object is a function of (definition, object, previous object). It does
// no I/O; which CRDs are in effect is the caller's (the gate folds them from
// the log).
package crd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	sigsjson "sigs.k8s.io/json"

	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/builtin"
)

// Kind is the kind of a CustomResourceDefinition as keys hold it.
const Kind = "CustomResourceDefinition.apiextensions.k8s.io"

// Error is one problem with one field of one object, at its path from the
// top of the object (spec.size); the same type built-in kinds report.
type Error = builtin.FieldError

// Errors is every problem found in one object.
type Errors = builtin.Errors

// Column is one of a version's additionalPrinterColumns.
type Column struct {
	Name, Type, Format, Description, JSONPath string
	// Priority above 0 shows only in wide output, as in kubectl.
	Priority int32
}

// Definition is a compiled CustomResourceDefinition. It is immutable and
// safe for concurrent use.
type Definition struct {
	Group, Kind, Plural, Singular string
	Short                         []string
	Namespaced                    bool
	// Storage is the version objects are stored at.
	Storage string
	// Served are the versions served, in the CRD's order.
	Served   []string
	versions map[string]*version
}

type version struct {
	name       string
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
	columns    []Column
	served     bool
	// open says the schema is the open one (openSchema): nothing to
	// prune, default or validate.
	open bool
	// status and scale are the version's subresources.
	status bool
	scale  *Scale
}

// Scale is where a defined kind's scale subresource reads and writes
// (JSON paths such as .spec.replicas).
type Scale struct {
	SpecReplicasPath, StatusReplicasPath, LabelSelectorPath string
}

// Subresources reports which subresources version (a version or an
// apiVersion) has: status, and scale (nil when none).
func (d *Definition) Subresources(apiVersion string) (status bool, scale *Scale) {
	_, v, _ := strings.Cut(apiVersion, "/")
	if v == "" {
		v = apiVersion
	}
	if ver := d.versions[v]; ver != nil {
		return ver.status, ver.scale
	}
	return false, nil
}

// Key is the defined kind as object keys hold it ("Widget.example.com").
func (d *Definition) Key() string { return d.Kind + "." + d.Group }

// Columns are the printer columns of version (a version or an apiVersion),
// nil when it has none.
func (d *Definition) Columns(apiVersion string) []Column {
	_, v, _ := strings.Cut(apiVersion, "/")
	if v == "" {
		v = apiVersion
	}
	if ver := d.versions[v]; ver != nil {
		return ver.columns
	}
	return nil
}

// Decode reads a CRD as jetplane stores it (its spec under spec) into the
// apiextensions.k8s.io/v1 type, with the defaults kube-apiserver applies.
func Decode(o *schemas.Object) (*apiextensionsv1.CustomResourceDefinition, error) {
	if o.GetApiVersion() != "apiextensions.k8s.io/v1" {
		return nil, Errors{{Field: "apiVersion", Reason: fmt.Sprintf("%q is not served; CustomResourceDefinitions are apiextensions.k8s.io/v1", o.GetApiVersion())}}
	}
	spec, err := o.GetSpec().MarshalJSON()
	if err != nil {
		return nil, Errors{{Field: "spec", Reason: err.Error()}}
	}
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": o.GetApiVersion(), "kind": o.GetKind(),
		"metadata": map[string]any{"name": o.GetMetadata().GetName(), "labels": o.GetMetadata().GetLabels(), "annotations": o.GetMetadata().GetAnnotations()},
		"spec":     json.RawMessage(spec),
	})
	crd := &apiextensionsv1.CustomResourceDefinition{}
	strict, err := sigsjson.UnmarshalStrict(raw, crd)
	if err != nil {
		return nil, Errors{{Field: "spec", Reason: err.Error()}}
	}
	if len(strict) > 0 {
		var errs Errors
		for _, e := range strict {
			errs = append(errs, &Error{Reason: e.Error()})
		}
		return nil, errs
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	return crd, nil
}

// Compile validates the CRD o as kube-apiserver does on create and
// compiles its schemas and CEL rules.
func Compile(o *schemas.Object) (d *Definition, err error) {
	defer recoverInto(&err, "spec")
	v1crd, err := Decode(o)
	if err != nil {
		return nil, err
	}
	if v1crd.Spec.Conversion != nil && v1crd.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
		return nil, Errors{{Field: "spec.conversion.strategy", Reason: "Webhook conversion is not supported: jetplane converts between versions with the None strategy (apiVersion changes, fields do not); keep the versions' schemas compatible"}}
	}
	in := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1crd, in, nil); err != nil {
		return nil, Errors{{Field: "spec", Reason: err.Error()}}
	}
	storage := ""
	for _, v := range in.Spec.Versions {
		if v.Storage {
			storage = v.Name
		}
	}
	if storage != "" {
		in.Status.StoredVersions = []string{storage}
	}
	if fes := crdvalidation.ValidateCustomResourceDefinition(context.Background(), in); len(fes) > 0 {
		return nil, fieldErrors(fes)
	}
	d = &Definition{
		Group: in.Spec.Group, Kind: in.Spec.Names.Kind, Plural: in.Spec.Names.Plural,
		Singular: in.Spec.Names.Singular, Short: in.Spec.Names.ShortNames,
		Namespaced: in.Spec.Scope == apiextensions.NamespaceScoped,
		Storage:    storage, versions: map[string]*version{},
	}
	for i, v := range in.Spec.Versions {
		if !v.Served && !v.Storage {
			continue
		}
		// The conversion to the internal type moves a schema that every
		// version shares to spec.validation.
		var props *apiextensions.JSONSchemaProps
		if v.Schema != nil {
			props = v.Schema.OpenAPIV3Schema
		} else if in.Spec.Validation != nil {
			props = in.Spec.Validation.OpenAPIV3Schema
		}
		path := fmt.Sprintf("spec.versions[%d].schema.openAPIV3Schema", i)
		s, err := structuralschema.NewStructural(props)
		if err != nil {
			return nil, Errors{{Field: path, Reason: err.Error()}}
		}
		val, _, err := apiservervalidation.NewSchemaValidator(props)
		if err != nil {
			return nil, Errors{{Field: path, Reason: err.Error()}}
		}
		ver := &version{name: v.Name, structural: s, validator: val,
			cel: cel.NewValidator(s, true, celconfig.PerCallLimit), open: openSchema(props)}
		cols := v.AdditionalPrinterColumns
		if len(cols) == 0 { // shared by every version, moved like the schema
			cols = in.Spec.AdditionalPrinterColumns
		}
		for _, c := range cols {
			ver.columns = append(ver.columns, Column{Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, JSONPath: c.JSONPath, Priority: c.Priority})
		}
		ver.served = v.Served
		subs := v.Subresources
		if subs == nil { // shared by every version, moved like the schema
			subs = in.Spec.Subresources
		}
		if subs != nil {
			ver.status = subs.Status != nil
			if sc := subs.Scale; sc != nil {
				ver.scale = &Scale{SpecReplicasPath: sc.SpecReplicasPath, StatusReplicasPath: sc.StatusReplicasPath}
				if sc.LabelSelectorPath != nil {
					ver.scale.LabelSelectorPath = *sc.LabelSelectorPath
				}
			}
		}
		d.versions[v.Name] = ver
		if v.Served {
			d.Served = append(d.Served, v.Name)
		}
	}
	return d, nil
}

// Admit checks o, an object of the kind d defines, and returns it as it is
// to be stored: pruned, defaulted and at the storage version. old is the
// object stored now (nil when o is new); transition rules (oldSelf) see it.
// Problems are Errors naming each field. The object returned shares o's
// metadata and status: neither is to be changed in place.
func (d *Definition) Admit(o, old *schemas.Object) (_ *schemas.Object, err error) {
	defer recoverInto(&err, "")
	_, vname, _ := strings.Cut(o.GetApiVersion(), "/")
	ver := d.versions[vname]
	if ver == nil || !ver.served {
		return nil, Errors{{Field: "apiVersion", Reason: fmt.Sprintf("%q is not served for %s; served: %s", o.GetApiVersion(), d.Kind, strings.Join(prefixed(d.Group, d.Served), ", "))}}
	}
	var errs Errors
	ns := o.GetMetadata().GetNamespace()
	switch {
	case d.Namespaced && ns == "":
		errs = append(errs, &Error{Field: "metadata.namespace", Reason: fmt.Sprintf("is required: %s is namespaced", d.Key())})
	case !d.Namespaced && ns != "":
		errs = append(errs, &Error{Field: "metadata.namespace", Reason: fmt.Sprintf("must be empty: %s is cluster-scoped", d.Key())})
	}
	if sv := d.versions[d.Storage]; ver.open && (vname == d.Storage || sv == nil || sv.open) && !negativeZero(o.GetSpec()) {
		// Nothing of the object is unknown to an open schema.
		if len(errs) > 0 {
			return nil, errs
		}
		return admitOpen(d, o), nil
	}
	u := unstructuredOf(o)
	unknown := pruning.PruneWithOptions(u, ver.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	for _, p := range unknown {
		reason := "unknown field: not declared in the schema of " + d.Key() + " " + ver.name
		parent, name := splitLast(p)
		if s := builtin.Suggest(name, propertiesAt(ver.structural, parent)); len(s) > 0 {
			reason += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		errs = append(errs, &Error{Field: p, Reason: reason})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	defaulting.Default(u, ver.structural)
	fes := apiservervalidation.ValidateCustomResource(nil, u, ver.validator)
	fes = append(fes, schemaobjectmeta.Validate(context.Background(), nil, u, ver.structural, false)...)
	fes = append(fes, listtype.ValidateListSetsAndMaps(nil, ver.structural, u)...)
	if len(fes) == 0 && ver.cel != nil {
		var oldU any
		if old != nil {
			oldU = unstructuredOf(old)
		}
		cfes, _ := ver.cel.Validate(context.Background(), nil, ver.structural, u, oldU, celconfig.RuntimeCELCostBudget)
		fes = append(fes, cfes...)
	}
	if len(fes) > 0 {
		return nil, fieldErrors(fes)
	}
	if vname != d.Storage {
		// Stored at the storage version (the None conversion: fields stay
		// as they are), with that version's defaults, as kube-apiserver
		// shows it when read back.
		if sv := d.versions[d.Storage]; sv != nil {
			u["apiVersion"] = d.Group + "/" + d.Storage
			pruning.Prune(u, sv.structural, true)
			defaulting.Default(u, sv.structural)
		}
	}
	spec, _ := u["spec"].(map[string]any)
	s, err := structpb.NewStruct(spec)
	if err != nil {
		return nil, Errors{{Field: "spec", Reason: err.Error()}}
	}
	// o's metadata and status as they are, shared: the spec is the only
	// part replaced, and neither side changes the rest in place.
	out := &schemas.Object{ApiVersion: d.Group + "/" + d.Storage, Kind: o.GetKind(), Metadata: o.GetMetadata(), Spec: s, Status: o.GetStatus()}
	if unknown := o.ProtoReflect().GetUnknown(); len(unknown) > 0 {
		out.ProtoReflect().SetUnknown(slices.Clone(unknown))
	}
	return out, nil
}

// admitOpen is Admit for a version whose schema, and its storage
// version's, is open (version.open): pruning keeps every field, nothing
// has a default, no value can fail validation (an object is an object,
// and nothing below it is constrained), and there are no list types or
// rules. What is stored is then o at the storage version, its spec the
// one the full path would rebuild (the same values: whole numbers go to
// int64 and back), shared.
func admitOpen(d *Definition, o *schemas.Object) *schemas.Object {
	spec := o.GetSpec()
	if spec == nil {
		spec = &structpb.Struct{Fields: map[string]*structpb.Value{}}
	}
	out := &schemas.Object{ApiVersion: d.Group + "/" + d.Storage, Kind: o.GetKind(), Metadata: o.GetMetadata(), Spec: spec, Status: o.GetStatus()}
	if unknown := o.ProtoReflect().GetUnknown(); len(unknown) > 0 {
		out.ProtoReflect().SetUnknown(slices.Clone(unknown))
	}
	return out
}

// negativeZero reports whether a number in s is -0, which the full path
// stores as 0 (a whole number goes to int64 and back) and the short one
// would keep.
func negativeZero(s *structpb.Struct) bool {
	var walk func(v *structpb.Value) bool
	walk = func(v *structpb.Value) bool {
		switch k := v.GetKind().(type) {
		case *structpb.Value_NumberValue:
			return k.NumberValue == 0 && math.Signbit(k.NumberValue)
		case *structpb.Value_StructValue:
			for _, f := range k.StructValue.GetFields() {
				if walk(f) {
					return true
				}
			}
		case *structpb.Value_ListValue:
			for _, e := range k.ListValue.GetValues() {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	for _, f := range s.GetFields() {
		if walk(f) {
			return true
		}
	}
	return false
}

// openSchema reports whether props is the open schema: an object whose
// unknown fields are kept, with nothing else said of it but a
// description.
func openSchema(props *apiextensions.JSONSchemaProps) bool {
	if props == nil || props.XPreserveUnknownFields == nil || !*props.XPreserveUnknownFields {
		return false
	}
	rest := *props
	rest.Description, rest.XPreserveUnknownFields = "", nil
	return reflect.DeepEqual(rest, apiextensions.JSONSchemaProps{Type: "object"})
}

// recoverInto turns a panic in the Kubernetes libraries, on input no test
// foresaw, into an error for that object rather than a failed request
// handler.
func recoverInto(err *error, field string) {
	if r := recover(); r != nil {
		*err = Errors{{Field: field, Reason: fmt.Sprintf("cannot be checked: %v", r)}}
	}
}

// unstructuredOf is o as Kubernetes would decode it: jetplane's metadata
// extensions (group, dependsOn) left out, whole numbers as int64 (the JSON
// decoder kube-apiserver uses keeps them so, and CEL types them by it).
func unstructuredOf(o *schemas.Object) map[string]any {
	m := o.GetMetadata()
	meta := map[string]any{"name": m.GetName()}
	if m.GetNamespace() != "" {
		meta["namespace"] = m.GetNamespace()
	}
	if len(m.GetLabels()) > 0 {
		meta["labels"] = stringMap(m.GetLabels())
	}
	if len(m.GetAnnotations()) > 0 {
		meta["annotations"] = stringMap(m.GetAnnotations())
	}
	if len(m.GetFinalizers()) > 0 {
		fs := make([]any, len(m.GetFinalizers()))
		for i, f := range m.GetFinalizers() {
			fs[i] = f
		}
		meta["finalizers"] = fs
	}
	u := map[string]any{"apiVersion": o.GetApiVersion(), "kind": o.GetKind(), "metadata": meta}
	if len(o.GetSpec().GetFields()) > 0 {
		u["spec"] = ints(o.GetSpec().AsMap())
	}
	return u
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ints turns whole float64 numbers into int64, in place.
func ints(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = ints(e)
		}
	case []any:
		for i, e := range x {
			x[i] = ints(e)
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
			return int64(x)
		}
	}
	return v
}

func fieldErrors(fes field.ErrorList) Errors {
	out := make(Errors, 0, len(fes))
	for _, fe := range fes {
		out = append(out, &Error{Field: strings.TrimPrefix(fe.Field, "."), Reason: fe.ErrorBody()})
	}
	return out
}

func prefixed(group string, versions []string) []string {
	out := make([]string, len(versions))
	for i, v := range versions {
		out[i] = group + "/" + v
	}
	return out
}

// propertiesAt lists the property names of the schema at path
// ("spec.items[0]"), nil when it has none.
func propertiesAt(s *structuralschema.Structural, path string) []string {
	for _, part := range strings.Split(path, ".") {
		if part == "" || s == nil {
			continue
		}
		name, idx, _ := strings.Cut(part, "[")
		if p, ok := s.Properties[name]; ok {
			s = &p
		} else if s.AdditionalProperties != nil && s.AdditionalProperties.Structural != nil {
			s = s.AdditionalProperties.Structural
		} else {
			return nil
		}
		for ; idx != ""; _, idx, _ = strings.Cut(idx, "[") {
			if s.Items == nil {
				return nil
			}
			s = s.Items
		}
	}
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func splitLast(path string) (string, string) {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "", path
	}
	return path[:i], path[i+1:]
}

// ErrUndefined matches an *UndefinedError.
var ErrUndefined = errors.New("kind not defined")

// UndefinedError is an object of a kind that is neither built in nor
// defined by a CustomResourceDefinition in effect.
type UndefinedError struct {
	Kind        string
	Suggestions []string
}

func (e *UndefinedError) Error() string {
	msg := fmt.Sprintf("kind %s is not defined", e.Kind)
	if len(e.Suggestions) > 0 {
		msg += "; did you mean " + orList(e.Suggestions) + "?"
	}
	return msg + " (apply a CustomResourceDefinition to define it; jetplane api-resources lists the kinds)"
}

func (e *UndefinedError) Is(target error) bool { return target == ErrUndefined }

func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
