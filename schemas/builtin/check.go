package builtin

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	sigsjson "sigs.k8s.io/json"
)

// FieldError is one problem with one field, at its path from the top of
// the object as Kubernetes writes it ("spec.replica", "data.key").
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Errors is every problem Check found, in path order.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// ErrNotBuiltin is returned by Check for a kind that is not built in.
var ErrNotBuiltin = errors.New("not a built-in Kubernetes kind")

// Check decodes the content of an object of a built-in kind strictly into
// its k8s.io/api type. spec is the object's spec as jetplane stores it:
// for a kind whose type has a spec (Deployment), the spec itself; for one
// that keeps its content beside metadata (ConfigMap's data, Role's rules),
// those top-level fields. It returns nil, Errors, or ErrNotBuiltin (wrapped,
// with the version to use when only the version is wrong).
func Check(apiVersion, kind string, spec *structpb.Struct) error {
	gv := gvk(apiVersion, kind)
	k := key(gv.Group, gv.Kind)
	versions, ok := kinds[k]
	if !ok {
		return fmt.Errorf("%s: %w", k, ErrNotBuiltin)
	}
	if !slices.Contains(versions, gv.Version) {
		return Errors{{Field: "apiVersion", Reason: fmt.Sprintf("%q does not serve %s; use %s", apiVersion, kind, groupVersion(gv.Group, versions[0]))}}
	}
	obj, err := scheme.New(gv)
	if err != nil {
		return fmt.Errorf("%s: %w", k, ErrNotBuiltin)
	}
	t := reflect.TypeOf(obj).Elem()
	fields := spec.GetFields()
	if len(fields) == 0 {
		return nil
	}
	var doc map[string]any
	if _, hasSpec := jsonFields(t)["spec"]; hasSpec {
		doc = map[string]any{"spec": spec.AsMap()}
	} else {
		doc = spec.AsMap()
		var errs Errors
		for _, f := range sortedKeys(doc) {
			if f == "apiVersion" || f == "kind" || f == "metadata" || f == "status" {
				errs = append(errs, &FieldError{Field: "spec." + f, Reason: fmt.Sprintf("a %s keeps %s at the top level, not under spec", kind, f)})
			}
		}
		if len(errs) > 0 {
			return errs
		}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return Errors{{Field: "spec", Reason: err.Error()}}
	}
	if errs := precheck(kind, gv.Group, doc); len(errs) > 0 {
		return errs
	}
	strictErrs, err := sigsjson.UnmarshalStrict(raw, obj)
	var errs Errors
	for _, se := range strictErrs {
		errs = append(errs, strictError(t, se))
	}
	if err != nil {
		errs = append(errs, decodeError(err, doc))
	}
	if len(errs) == 0 {
		return nil
	}
	slices.SortStableFunc(errs, func(a, b *FieldError) int { return strings.Compare(a.Field, b.Field) })
	return errs
}

func groupVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

// precheck finds what encoding/json reports without a path: a Secret's
// data that is not base64.
func precheck(kind, group string, doc map[string]any) Errors {
	if kind != "Secret" || group != "" {
		return nil
	}
	data, _ := doc["data"].(map[string]any)
	var errs Errors
	for _, k := range sortedKeys(data) {
		s, ok := data[k].(string)
		if !ok {
			continue // the decoder names the type
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			errs = append(errs, &FieldError{Field: pathKey("data", k), Reason: "must be base64-encoded (a Secret's data is base64, as in Kubernetes); put plain text under stringData instead"})
		}
	}
	return errs
}

var (
	unknownRE   = regexp.MustCompile(`^unknown field "(.*)"$`)
	duplicateRE = regexp.MustCompile(`^duplicate field "(.*)"$`)
)

// strictError turns one of sigs.k8s.io/json's strict errors into a
// FieldError with suggestions.
func strictError(t reflect.Type, err error) *FieldError {
	msg := err.Error()
	if m := unknownRE.FindStringSubmatch(msg); m != nil {
		path := m[1]
		reason := "unknown field"
		parent, name := splitLast(path)
		if cands := fieldsAt(t, parent); len(cands) > 0 {
			if s := Suggest(name, cands); len(s) > 0 {
				reason += "; did you mean " + orList(s) + "?"
			}
		}
		return &FieldError{Field: path, Reason: reason}
	}
	if m := duplicateRE.FindStringSubmatch(msg); m != nil {
		return &FieldError{Field: m[1], Reason: "is given twice"}
	}
	return &FieldError{Reason: msg}
}

// decodeError names the field of a type mismatch. encoding/json names a
// map's field, not the key whose value is wrong; that key is found in doc.
func decodeError(err error, doc map[string]any) *FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if m, ok := valueAt(doc, field).(map[string]any); ok {
			for _, k := range sortedKeys(m) {
				if jsonKind(m[k]) == te.Value {
					field = pathKey(field, k)
					break
				}
			}
		}
		return &FieldError{Field: field, Reason: fmt.Sprintf("must be %s, got %s", typeName(te.Type), te.Value)}
	}
	msg := err.Error()
	// Quantities, times and int-or-strings report their own parse errors.
	msg = strings.TrimPrefix(msg, "json: ")
	return &FieldError{Reason: msg}
}

// valueAt follows a dotted path of object fields (no indices) in doc.
func valueAt(doc map[string]any, path string) any {
	var v any = doc
	for _, step := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[step]
	}
	return v
}

// jsonKind names v's JSON type as encoding/json's errors do.
func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	case reflect.Pointer:
		return typeName(t.Elem())
	}
	return t.String()
}

// fieldsAt lists the JSON field names of the struct at path within t
// ("spec.template.spec.containers[0]"), nil when path leads elsewhere.
func fieldsAt(t reflect.Type, path string) []string {
	for _, step := range steps(path) {
		t = deref(t)
		switch {
		case step == "[]":
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return nil
			}
			t = t.Elem()
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := jsonFields(t)[step]
			if !ok {
				return nil
			}
			t = f
		default:
			return nil
		}
	}
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return nil
	}
	names := make([]string, 0, t.NumField())
	for n := range jsonFields(t) {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonFields maps the JSON names of t's fields, inline ones flattened, to
// their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	t = deref(t)
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			for n, ft := range jsonFields(f.Type) {
				out[n] = ft
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// steps splits "a.b[0].c" into a, b, [], c.
func steps(path string) []string {
	var out []string
	for _, part := range strings.Split(path, ".") {
		if part == "" {
			continue
		}
		name, rest, _ := strings.Cut(part, "[")
		if name != "" {
			out = append(out, name)
		}
		for rest != "" {
			_, after, ok := strings.Cut(rest, "]")
			out = append(out, "[]")
			if !ok {
				break
			}
			_, rest, _ = strings.Cut(after, "[")
		}
	}
	return out
}

func splitLast(path string) (string, string) {
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return "", path
	}
	return path[:i], path[i+1:]
}

func pathKey(parent, key string) string {
	for _, c := range key {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return parent + "[" + strconv.Quote(key) + "]"
		}
	}
	return parent + "." + key
}

func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
