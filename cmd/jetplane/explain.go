package main

import (
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/jetplane/jetplane/schemas/kinds"
)

// documented are the Go types whose field docs explain prints, by kind as
// object keys hold it: the Kubernetes kinds jetplane knows by name.
var documented = map[string]struct {
	version string
	typ     reflect.Type
}{
	"Pod":                                   {"v1", reflect.TypeFor[corev1.Pod]()},
	"Node":                                  {"v1", reflect.TypeFor[corev1.Node]()},
	"Namespace":                             {"v1", reflect.TypeFor[corev1.Namespace]()},
	"ConfigMap":                             {"v1", reflect.TypeFor[corev1.ConfigMap]()},
	"Secret":                                {"v1", reflect.TypeFor[corev1.Secret]()},
	"Service":                               {"v1", reflect.TypeFor[corev1.Service]()},
	"ServiceAccount":                        {"v1", reflect.TypeFor[corev1.ServiceAccount]()},
	"PersistentVolumeClaim":                 {"v1", reflect.TypeFor[corev1.PersistentVolumeClaim]()},
	"PersistentVolume":                      {"v1", reflect.TypeFor[corev1.PersistentVolume]()},
	"Event":                                 {"v1", reflect.TypeFor[corev1.Event]()},
	"Deployment.apps":                       {"apps/v1", reflect.TypeFor[appsv1.Deployment]()},
	"StatefulSet.apps":                      {"apps/v1", reflect.TypeFor[appsv1.StatefulSet]()},
	"DaemonSet.apps":                        {"apps/v1", reflect.TypeFor[appsv1.DaemonSet]()},
	"ReplicaSet.apps":                       {"apps/v1", reflect.TypeFor[appsv1.ReplicaSet]()},
	"Job.batch":                             {"batch/v1", reflect.TypeFor[batchv1.Job]()},
	"CronJob.batch":                         {"batch/v1", reflect.TypeFor[batchv1.CronJob]()},
	"Ingress.networking.k8s.io":             {"networking.k8s.io/v1", reflect.TypeFor[networkingv1.Ingress]()},
	"Role.rbac.authorization.k8s.io":        {"rbac.authorization.k8s.io/v1", reflect.TypeFor[rbacv1.Role]()},
	"RoleBinding.rbac.authorization.k8s.io": {"rbac.authorization.k8s.io/v1", reflect.TypeFor[rbacv1.RoleBinding]()},
	"ClusterRole.rbac.authorization.k8s.io": {"rbac.authorization.k8s.io/v1", reflect.TypeFor[rbacv1.ClusterRole]()},
	"ClusterRoleBinding.rbac.authorization.k8s.io":  {"rbac.authorization.k8s.io/v1", reflect.TypeFor[rbacv1.ClusterRoleBinding]()},
	"CustomResourceDefinition.apiextensions.k8s.io": {"apiextensions.k8s.io/v1", reflect.TypeFor[apiextensionsv1.CustomResourceDefinition]()},
}

// jetplaneNotes say, at the field they concern, where jetplane differs
// from Kubernetes.
var jetplaneNotes = map[string]string{
	"Pod.spec.containers.ports": "jetplane runs containers as WebAssembly (WASI) modules, which have no network: ports are accepted with a warning and nothing listens on them.",
	"Pod.spec.hostNetwork":      "jetplane refuses hostNetwork: WASI modules have no network.",
}

func newExplain(g *globals) *cobra.Command {
	var f placementFlags
	cmd := &cobra.Command{
		Use:   "explain KIND[.FIELD...]",
		Short: "Document a kind's fields, as kubectl explain does",
		Long: `Print the documentation of a kind, or of one field of it, and the fields
under it: the Kubernetes API's own descriptions (those kubectl explain
prints), for the Kubernetes kinds jetplane knows by name. KIND is resolved
as every command resolves it (pod, po, deploy, Deployment.apps...). Where
jetplane differs from Kubernetes, a JETPLANE line says so.

Why the scheduler put a pod on its node is 'jetplane placement
Pod/NAMESPACE/NAME' (it was 'explain Pod/NAMESPACE/NAME', which still runs
it, with a note).`,
		Example: `  jetplane explain pod
  jetplane explain pod.spec.containers
  jetplane explain deploy.spec.strategy
  jetplane placement Pod/default/web-0          # a scheduling decision`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.Contains(args[0], "/") {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: a scheduling decision is now 'jetplane placement %s'; 'jetplane explain KIND' documents a kind's fields, as kubectl explain does\n", args[0])
				return runPlacement(cmd, g, f, args[0])
			}
			return explainField(cmd.OutOrStdout(), args[0])
		},
	}
	f.add(cmd.Flags())
	for _, name := range []string{"namespace", "replay", "config"} {
		_ = cmd.Flags().MarkHidden(name) // for the old form only
	}
	return cmd
}

// explainField prints the docs of ref, KIND or KIND.field.path.
func explainField(w io.Writer, ref string) error {
	name, path := ref, ""
	// A kind's group has dots too (deploy.apps.spec): the longest prefix
	// that resolves to a documented kind is the kind.
	parts := strings.Split(ref, ".")
	var key string
	for i := len(parts); i >= 1; i-- {
		k, err := kinds.Resolve(strings.Join(parts[:i], "."), nil)
		if _, ok := documented[k]; err == nil && ok {
			key, name, path = k, strings.Join(parts[:i], "."), strings.Join(parts[i:], ".")
			break
		}
	}
	if key == "" {
		k, err := kinds.Resolve(parts[0], nil)
		if err != nil {
			return usage(err)
		}
		info := kinds.Lookup(k)
		if info.Kind != "" && info.Group == "" && (k == "Apply" || k == "HelmRelease") {
			return fmt.Errorf("%s is jetplane's own kind: its fields are described in the README (%q)", k, map[string]string{"Apply": "Kubernetes clusters", "HelmRelease": "Helm charts"}[k])
		}
		return fmt.Errorf("%s: no field docs here; explain documents the Kubernetes kinds jetplane knows by name ('jetplane api-resources')", name)
	}
	d := documented[key]
	t := d.typ
	var doc string
	var trail []string
	for _, field := range strings.Split(path, ".") {
		if field == "" {
			continue
		}
		ft, fdoc, ok := fieldOf(t, field)
		if !ok {
			return fmt.Errorf("field %q does not exist in %s; its fields are %s", field, strings.Join(append([]string{d.typ.Name()}, trail...), "."), strings.Join(fieldNames(t), ", "))
		}
		t, doc = ft, fdoc
		trail = append(trail, field)
	}
	fmt.Fprintf(w, "KIND:       %s\nVERSION:    %s\n\n", d.typ.Name(), d.version)
	if len(trail) > 0 {
		fmt.Fprintf(w, "FIELD: %s <%s>\n\n", trail[len(trail)-1], typeName(t))
	} else {
		doc = swaggerDoc(t)[""]
	}
	fmt.Fprintf(w, "DESCRIPTION:\n%s\n", docIndent(doc, "    "))
	if note, ok := jetplaneNotes[strings.Join(append([]string{d.typ.Name()}, trail...), ".")]; ok {
		fmt.Fprintf(w, "\nJETPLANE:\n%s\n", docIndent(note, "    "))
	}
	st := structOf(t)
	if st == nil {
		return nil
	}
	fmt.Fprintln(w, "\nFIELDS:")
	for _, f := range fields(st) {
		fmt.Fprintf(w, "  %s\t<%s>\n%s\n\n", f.name, typeName(f.typ), docIndent(docOf(st, f.name), "    "))
	}
	return nil
}

type docField struct {
	name string
	typ  reflect.Type
}

// fields are t's fields as manifests write them (JSON names), embedded
// structs' fields included.
func fields(t reflect.Type) []docField {
	var out []docField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			if st := structOf(f.Type); st != nil && !strings.HasPrefix(st.PkgPath(), "k8s.io/apimachinery/pkg/apis/meta/v1") {
				out = append(out, fields(st)...)
			} else if st != nil && st.Name() == "TypeMeta" {
				out = append(out, docField{"apiVersion", reflect.TypeFor[string]()}, docField{"kind", reflect.TypeFor[string]()})
			}
			continue
		}
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, docField{name, f.Type})
	}
	return out
}

func fieldNames(t reflect.Type) []string {
	st := structOf(t)
	if st == nil {
		return nil
	}
	var out []string
	for _, f := range fields(st) {
		out = append(out, f.name)
	}
	return out
}

// fieldOf is the type and doc of t's field name (through slices, maps and
// pointers, as kubectl walks pod.spec.containers.ports).
func fieldOf(t reflect.Type, name string) (reflect.Type, string, bool) {
	st := structOf(t)
	if st == nil {
		return nil, "", false
	}
	for _, f := range fields(st) {
		if f.name == name {
			return f.typ, docOf(st, name), true
		}
	}
	return nil, "", false
}

// structOf is the struct a field of type t holds (itself, or the element
// of a pointer, slice or map); nil for scalars and the types manifests
// write as strings.
func structOf(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || scalarStruct(t) {
		return nil
	}
	return t
}

// scalarStruct reports types that are structs in Go and strings or
// numbers in a manifest.
func scalarStruct(t reflect.Type) bool {
	switch t.Name() {
	case "Time", "MicroTime", "Duration", "Quantity", "IntOrString", "RawExtension", "JSON":
		return true
	}
	return false
}

// typeMetaDocs describe the two fields every object has; apimachinery's
// TypeMeta carries no generated docs.
var typeMetaDocs = map[string]string{
	"apiVersion": "APIVersion defines the versioned schema of this representation of an object.",
	"kind":       "Kind is a string value representing the REST resource this object represents.",
}

// docOf is the doc of t's field name.
func docOf(t reflect.Type, name string) string {
	if d, ok := swaggerDoc(t)[name]; ok {
		return d
	}
	return typeMetaDocs[name]
}

// swaggerDoc is the field docs k8s.io/api generates for t ("" is the
// type's own).
func swaggerDoc(t reflect.Type) map[string]string {
	if d, ok := reflect.New(t).Elem().Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	if d, ok := reflect.New(t).Interface().(interface{ SwaggerDoc() map[string]string }); ok {
		return d.SwaggerDoc()
	}
	return map[string]string{}
}

// typeName is a type as kubectl explain names it.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string" // base64
		}
		return "[]" + typeName(t.Elem())
	case reflect.Map:
		return "map[string]" + typeName(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Struct:
		switch t.Name() {
		case "Time", "MicroTime", "Duration":
			return "string"
		case "IntOrString", "Quantity":
			return t.Name()
		}
		return t.Name()
	}
	return t.Kind().String()
}

func docIndent(s, by string) string {
	if s == "" {
		s = "<empty>"
	}
	var b strings.Builder
	for i, line := range strings.Split(wrap(s, 76), "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(by + line)
	}
	return b.String()
}

// wrap breaks s's lines at spaces so none is longer than width.
func wrap(s string, width int) string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && len(line)+1+len(word) > width {
				out = append(out, line)
				line = word
				continue
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}
