package crd

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/builtin"
	"github.com/jetplane/jetplane/schemas/kinds"
)

// Own are jetplane's own kinds, always defined (their reconcilers check
// their specs).
var Own = []string{"Apply", "HelmRelease"}

// Catalog is the set of kinds defined by CustomResourceDefinitions in
// effect. It is immutable and safe for concurrent use.
type Catalog struct {
	defs map[string]*Definition
	// broken are CRDs in the log that no longer compile (stored by an
	// older version with other rules); their kinds count as undefined.
	broken map[string]error
}

// NewCatalog compiles crds (CustomResourceDefinition objects, as stored).
// A CRD that does not compile is left out, with its error kept for Broken.
func NewCatalog(crds []*schemas.Object) *Catalog {
	c := &Catalog{defs: map[string]*Definition{}, broken: map[string]error{}}
	for _, o := range crds {
		d, err := Compile(o)
		if err != nil {
			c.broken[o.GetMetadata().GetName()] = err
			continue
		}
		c.defs[d.Key()] = d
	}
	return c
}

// with returns a catalog that also holds defs (replacing same kinds).
func (c *Catalog) with(defs []*Definition) *Catalog {
	if len(defs) == 0 {
		return c
	}
	out := &Catalog{defs: make(map[string]*Definition, len(c.defs)+len(defs)), broken: c.broken}
	for k, d := range c.defs {
		out.defs[k] = d
	}
	for _, d := range defs {
		out.defs[d.Key()] = d
	}
	return out
}

// Lookup returns the definition of kind (as keys hold it), or nil.
func (c *Catalog) Lookup(kind string) *Definition {
	if c == nil {
		return nil
	}
	return c.defs[kind]
}

// Kinds lists the defined kinds, sorted.
func (c *Catalog) Kinds() []string {
	out := make([]string, 0, len(c.defs))
	for k := range c.defs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Builtin reports whether kind (as keys hold it) needs no definition: a
// built-in Kubernetes kind or one of jetplane's own.
func Builtin(kind string) bool {
	return builtin.Known(kind) || slices.Contains(Own, kind)
}

// Admission is what Admit needs beyond the objects.
type Admission struct {
	// Current returns the object stored now under o's key, nil when none.
	Current func(k projections.Key) *schemas.Object
	// InUse reports whether the log holds live objects of kind: an
	// undefined kind in use is accepted as written (grandfathered), so a
	// data directory from before kinds were checked keeps working.
	InUse func(kind string) bool
	// Compiled reports whether a reconciler compiled into this server
	// handles kind: such a kind is jetplane's own (as HelmRelease and
	// Apply are) and its reconciler owns its rules.
	Compiled func(kind string) bool
}

// ObjectError is a problem with one object of a request.
type ObjectError struct {
	Key projections.Key
	Err error
}

func (e *ObjectError) Error() string {
	var es Errors
	if errors.As(e.Err, &es) && len(es) > 1 {
		lines := make([]string, len(es))
		for i, fe := range es {
			lines[i] = e.Key.String() + ": " + fe.Error()
		}
		return strings.Join(lines, "\n")
	}
	return e.Key.String() + ": " + e.Err.Error()
}

func (e *ObjectError) Unwrap() error { return e.Err }

// Admit checks a request's objects against the kinds in effect: c plus
// the CRDs in the request itself (so a chart may carry a CRD and objects
// of its kind). A CRD in the request must compile and may not redefine a
// built-in kind. An object of a defined kind is checked by its Definition
// and returned as it is to be stored; built-in kinds pass (the manifest
// decoder checked them); an undefined kind in use passes as written; any
// other kind is an *UndefinedError with suggestions. objs is not modified.
func (c *Catalog) Admit(objs []*schemas.Object, a Admission) ([]*schemas.Object, error) {
	var errs []error
	var defs []*Definition
	keys := make([]projections.Key, len(objs))
	for i, o := range objs {
		keys[i] = projections.ObjectKey(o)
		if keys[i].Kind != Kind {
			continue
		}
		var d *Definition
		var err error
		f := o.GetSpec().GetFields()
		if k := keyOf(f["names"].GetStructValue().GetFields()["kind"].GetStringValue(), f["group"].GetStringValue()); Builtin(k) {
			err = Errors{{Field: "spec.names.kind", Reason: fmt.Sprintf("%s is a built-in kind and cannot be redefined", k)}}
		} else {
			d, err = Compile(o)
		}
		if err != nil {
			errs = append(errs, &ObjectError{Key: keys[i], Err: err})
			continue
		}
		defs = append(defs, d)
	}
	cat := c.with(defs)
	out := objs
	copied := false
	for i, o := range objs {
		k := keys[i].Kind
		if Builtin(k) || a.Compiled != nil && a.Compiled(k) && cat.Lookup(k) == nil {
			continue
		}
		d := cat.Lookup(k)
		if d == nil {
			if a.InUse != nil && a.InUse(k) {
				continue
			}
			errs = append(errs, &ObjectError{Key: keys[i], Err: &UndefinedError{Kind: k, Suggestions: cat.suggest(k)}})
			continue
		}
		var old *schemas.Object
		if a.Current != nil {
			old = a.Current(keys[i])
		}
		stored, err := d.Admit(o, old)
		if err != nil {
			errs = append(errs, &ObjectError{Key: keys[i], Err: err})
			continue
		}
		if !copied {
			out, copied = slices.Clone(objs), true
		}
		out[i] = stored
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// suggest names the known kinds close to kind: by its name alone (a typo
// in the kind, Deploymnet.apps) or with its group (a kind written in the
// wrong group, Deployment.app).
func (c *Catalog) suggest(kind string) []string {
	known := append(builtin.Kinds(), Own...)
	known = append(known, c.Kinds()...)
	name, group, _ := strings.Cut(kind, ".")
	var sameGroup, names []string
	for _, k := range known {
		n, g, _ := strings.Cut(k, ".")
		if g == group {
			sameGroup = append(sameGroup, n)
		}
		names = append(names, k)
	}
	var out []string
	for _, n := range builtin.Suggest(name, sameGroup) {
		out = append(out, keyOf(n, group))
	}
	if len(out) == 0 {
		out = builtin.Suggest(kind, names)
	}
	if len(out) == 0 {
		// The right kind in a group that does not have it.
		for _, k := range known {
			if n, _, _ := strings.Cut(k, "."); strings.EqualFold(n, name) {
				out = append(out, k)
			}
		}
	}
	return out
}

func keyOf(kind, group string) string {
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// Infos describes the defined kinds for name resolution (package kinds):
// kind, group, plural, short names and scope, sorted by kind.
func (c *Catalog) Infos() []kinds.Info {
	out := make([]kinds.Info, 0, len(c.defs))
	for _, k := range c.Kinds() {
		d := c.defs[k]
		out = append(out, kinds.Info{Kind: d.Kind, Group: d.Group, Plural: d.Plural, Short: d.Short, Namespaced: d.Namespaced})
	}
	return out
}
