package kubeapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/jetplane/jetplane/projections"
)

// OpenAPI v3, as kubectl reads it: /openapi/v3 lists one document per
// group/version; each document has the paths of its resources (kubectl
// learns there which patch types and query parameters the server takes)
// and the schemas of its kinds (kubectl explain; the merge keys kubectl
// apply computes strategic merge patches with). Built-in kinds' schemas
// are derived from their k8s.io/api Go types and their documentation
// (SwaggerDoc); defined kinds' from their CustomResourceDefinition.

func (s *Server) openapi(w http.ResponseWriter, r *http.Request, cat *catalog, path string) error {
	rest := strings.TrimPrefix(path, "openapi/v3")
	if rest == "" {
		paths := map[string]any{}
		for _, gv := range cat.groupVersions() {
			doc := s.openapiDoc(cat, gv)
			paths[gvPath(gv)] = map[string]any{"serverRelativeURL": "/openapi/v3/" + gvPath(gv) + "?hash=" + hashOf(doc)}
		}
		return writeJSON(w, http.StatusOK, map[string]any{"paths": paths})
	}
	rest = strings.TrimPrefix(rest, "/")
	for _, gv := range cat.groupVersions() {
		if gvPath(gv) == rest {
			return writeJSON(w, http.StatusOK, s.openapiDoc(cat, gv))
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: "openapi"}, rest)
}

func hashOf(v any) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return strings.ToUpper(hex.EncodeToString(h[:]))
}

func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

// groupVersions are the served group/versions, core first.
func (c *catalog) groupVersions() []schema.GroupVersion {
	seen := map[schema.GroupVersion]bool{}
	var out []schema.GroupVersion
	for _, r := range c.list {
		gv := schema.GroupVersion{Group: r.group, Version: r.version}
		if !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

func param(name, desc string) map[string]any {
	return map[string]any{"name": name, "in": "query", "description": desc, "schema": map[string]any{"type": "string"}, "uniqueItems": true}
}

var writeParams = []any{
	param("dryRun", "When present, indicates that modifications should not be persisted. Valid values: All."),
	param("fieldManager", "A name associated with the actor or entity that is making these changes."),
	param("fieldValidation", "Ignore, Warn or Strict: how unknown and duplicate fields are treated. jetplane is always Strict."),
}

func (s *Server) openapiDoc(cat *catalog, gv schema.GroupVersion) map[string]any {
	paths := map[string]any{}
	schemas := map[string]any{}
	g := &schemaGen{defs: schemas}
	for _, r := range cat.list {
		if r.group != gv.Group || r.version != gv.Version {
			continue
		}
		gvk := map[string]any{"group": r.group, "version": r.version, "kind": r.kind}
		ref := s.kindSchema(g, r)
		body := func(types ...string) map[string]any {
			content := map[string]any{}
			for _, t := range types {
				content[t] = map[string]any{"schema": ref}
			}
			return map[string]any{"content": content, "required": true}
		}
		op := func(action string, params []any, reqBody map[string]any) map[string]any {
			o := map[string]any{"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": action,
				"responses": map[string]any{"200": map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": ref}}}}}
			if params != nil {
				o["parameters"] = params
			}
			if reqBody != nil {
				o["requestBody"] = reqBody
			}
			return o
		}
		patchTypes := []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}
		if r.def == nil {
			patchTypes = append(patchTypes, "application/strategic-merge-patch+json")
		}
		base := "/" + gvPath(gv)
		if r.namespaced {
			base += "/namespaces/{namespace}"
		}
		base += "/" + r.plural
		paths[base] = map[string]any{
			"get":  op("list", nil, nil),
			"post": op("post", writeParams, body("application/json", "application/yaml")),
		}
		paths[base+"/{name}"] = map[string]any{
			"get":    op("get", nil, nil),
			"put":    op("put", writeParams, body("application/json", "application/yaml")),
			"patch":  op("patch", append(append([]any{}, writeParams...), param("force", "Force is going to \"force\" Apply requests.")), body(patchTypes...)),
			"delete": op("delete", []any{param("dryRun", "When present, indicates that modifications should not be persisted.")}, nil),
		}
	}
	return map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "jetplane", "version": gvPath(gv)},
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}
}

// kindSchema adds r's schema to g and returns a reference to it.
func (s *Server) kindSchema(g *schemaGen, r resource) map[string]any {
	gvk := []any{map[string]any{"group": r.group, "version": r.version, "kind": r.kind}}
	if r.def != nil {
		name := reverseDNS(r.group) + "." + r.version + "." + r.kind
		sch := s.crdSchema(r)
		if sch == nil {
			sch = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		}
		sch["x-kubernetes-group-version-kind"] = gvk
		props, _ := sch["properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
			sch["properties"] = props
		}
		props["metadata"] = g.ref(reflect.TypeOf(metav1.ObjectMeta{}), "Standard object's metadata.")
		g.defs[name] = sch
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	t, err := scheme.Scheme.New(kindOf(r))
	if err != nil {
		// jetplane's own kinds: any spec, checked by their reconcilers.
		name := "dev.jetplane." + r.version + "." + r.kind
		g.defs[name] = map[string]any{"type": "object", "x-kubernetes-group-version-kind": gvk,
			"description": r.kind + " is one of jetplane's own kinds; see `jetplane explain " + strings.ToLower(r.kind) + "`.",
			"properties": map[string]any{
				"apiVersion": map[string]any{"type": "string"}, "kind": map[string]any{"type": "string"},
				"metadata": g.ref(reflect.TypeOf(metav1.ObjectMeta{}), "Standard object's metadata."),
				"spec":     map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
				"status":   map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true},
			}}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	typ := reflect.TypeOf(t).Elem()
	ref := g.ref(typ, "")
	g.defs[g.name(typ)].(map[string]any)["x-kubernetes-group-version-kind"] = gvk
	return ref
}

// crdSchema is the openAPIV3Schema of r's version in its
// CustomResourceDefinition as stored, nil when it has none.
func (s *Server) crdSchema(r resource) map[string]any {
	crd := s.cfg.Store.Get(projections.Key{Kind: "CustomResourceDefinition.apiextensions.k8s.io", Name: r.plural + "." + r.group})
	if crd == nil {
		return nil
	}
	vs, _ := crd.GetSpec().AsMap()["versions"].([]any)
	for _, v := range vs {
		vm, _ := v.(map[string]any)
		if vm["name"] != r.version {
			continue
		}
		sch, _ := vm["schema"].(map[string]any)
		if o, ok := sch["openAPIV3Schema"].(map[string]any); ok {
			return o
		}
	}
	return nil
}

func reverseDNS(group string) string {
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".")
}

// schemaGen derives OpenAPI schemas from Go types into defs, one
// component per named struct type.
type schemaGen struct {
	defs map[string]any
}

var (
	timeType     = reflect.TypeOf(metav1.Time{})
	microType    = reflect.TypeOf(metav1.MicroTime{})
	quantityType = reflect.TypeOf(apiresource.Quantity{})
	intstrType   = reflect.TypeOf(intstr.IntOrString{})
	rawType      = reflect.TypeOf(runtime.RawExtension{})
	durationType = reflect.TypeOf(metav1.Duration{})
)

// name is the component name Kubernetes gives t: io.k8s.api.core.v1.Pod.
func (g *schemaGen) name(t reflect.Type) string {
	p := t.PkgPath()
	if rest, ok := strings.CutPrefix(p, "k8s.io/"); ok {
		p = "io.k8s." + strings.ReplaceAll(rest, "/", ".")
	} else {
		p = strings.ReplaceAll(p, "/", ".")
	}
	return p + "." + t.Name()
}

type swaggerDoc interface{ SwaggerDoc() map[string]string }

// ref returns the schema of a field of type t: a reference for named
// structs (adding the component once), inline otherwise.
func (g *schemaGen) ref(t reflect.Type, desc string) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out map[string]any
	switch t {
	case timeType, microType:
		out = map[string]any{"type": "string", "format": "date-time"}
	case quantityType:
		out = map[string]any{"x-kubernetes-int-or-string": true, "anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}}
	case intstrType:
		out = map[string]any{"x-kubernetes-int-or-string": true, "anyOf": []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}}
	case rawType:
		out = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	case durationType:
		out = map[string]any{"type": "string"}
	}
	if out == nil {
		switch t.Kind() {
		case reflect.Struct:
			name := g.name(t)
			if _, ok := g.defs[name]; !ok {
				g.defs[name] = map[string]any{} // placeholder: recursive types
				g.defs[name] = g.structSchema(t)
			}
			out = map[string]any{"allOf": []any{map[string]any{"$ref": "#/components/schemas/" + name}}}
			if desc == "" {
				return map[string]any{"$ref": "#/components/schemas/" + name}
			}
		case reflect.Slice:
			if t.Elem().Kind() == reflect.Uint8 {
				out = map[string]any{"type": "string", "format": "byte"}
			} else {
				out = map[string]any{"type": "array", "items": g.ref(t.Elem(), "")}
			}
		case reflect.Map:
			out = map[string]any{"type": "object", "additionalProperties": g.ref(t.Elem(), "")}
		case reflect.String:
			out = map[string]any{"type": "string"}
		case reflect.Bool:
			out = map[string]any{"type": "boolean"}
		case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Int8, reflect.Int16, reflect.Uint8, reflect.Uint16:
			out = map[string]any{"type": "integer"}
		case reflect.Float32, reflect.Float64:
			out = map[string]any{"type": "number"}
		default:
			out = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		}
	}
	if desc != "" {
		out["description"] = desc
	}
	return out
}

func (g *schemaGen) structSchema(t reflect.Type) map[string]any {
	docs := map[string]string{}
	if d, ok := reflect.New(t).Elem().Interface().(swaggerDoc); ok {
		docs = d.SwaggerDoc()
	}
	props := map[string]any{}
	g.fields(t, props, docs)
	s := map[string]any{"type": "object", "properties": props}
	if d := docs[""]; d != "" {
		s["description"] = d
	}
	return s
}

func (g *schemaGen) fields(t reflect.Type, props map[string]any, docs map[string]string) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") || (f.Anonymous && name == "") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				inner := map[string]string{}
				if d, ok := reflect.New(ft).Elem().Interface().(swaggerDoc); ok {
					inner = d.SwaggerDoc()
				}
				g.fields(ft, props, inner)
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		p := g.ref(f.Type, docs[name])
		if ps := f.Tag.Get("patchStrategy"); ps != "" {
			p["x-kubernetes-patch-strategy"] = ps
		}
		if mk := f.Tag.Get("patchMergeKey"); mk != "" {
			p["x-kubernetes-patch-merge-key"] = mk
		}
		props[name] = p
	}
}
