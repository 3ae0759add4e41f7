package kubeapi

import (
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetplane/jetplane/schemas/crd"
	"github.com/jetplane/jetplane/schemas/kinds"
)

// resource is one kind as the Kubernetes API serves it at one version.
type resource struct {
	group, version, kind, plural string
	short                        []string
	namespaced                   bool
	// def is the kind's CustomResourceDefinition; nil for built-in kinds.
	def *crd.Definition
}

// key is the kind as object keys hold it ("Deployment.apps", "ConfigMap").
func (r resource) key() string {
	if r.group == "" {
		return r.kind
	}
	return r.kind + "." + r.group
}

func (r resource) groupVersion() string {
	if r.group == "" {
		return r.version
	}
	return r.group + "/" + r.version
}

// verbs are what every served resource answers.
var verbs = metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}

// catalog is the resources served now: the built-in kinds (each group of
// them at v1, jetplane's own kinds in the core group, as their manifests
// write them) and every served version of each defined kind.
type catalog struct {
	list []resource
}

func newCatalog(defined *crd.Catalog) *catalog {
	c := &catalog{}
	for _, in := range kinds.Builtin {
		c.list = append(c.list, resource{group: in.Group, version: "v1", kind: in.Kind, plural: in.Plural, short: in.Short, namespaced: in.Namespaced})
	}
	if defined != nil {
		for _, k := range defined.Kinds() {
			d := defined.Lookup(k)
			if d == nil {
				continue
			}
			for _, v := range d.Served {
				c.list = append(c.list, resource{group: d.Group, version: v, kind: d.Kind, plural: d.Plural, short: d.Short, namespaced: d.Namespaced, def: d})
			}
		}
	}
	return c
}

// find returns the resource plural of group/version.
func (c *catalog) find(group, version, plural string) (resource, bool) {
	for _, r := range c.list {
		if r.group == group && r.version == version && r.plural == plural {
			return r, true
		}
	}
	return resource{}, false
}

// groups returns the groups other than core, each with its versions, the
// storage (or only) version first, sorted by name.
func (c *catalog) groups() []metav1.APIGroup {
	byName := map[string]*metav1.APIGroup{}
	var names []string
	for _, r := range c.list {
		if r.group == "" {
			continue
		}
		g := byName[r.group]
		if g == nil {
			g = &metav1.APIGroup{Name: r.group}
			byName[r.group] = g
			names = append(names, r.group)
		}
		gv := metav1.GroupVersionForDiscovery{GroupVersion: r.groupVersion(), Version: r.version}
		have := false
		for _, v := range g.Versions {
			have = have || v == gv
		}
		if !have {
			g.Versions = append(g.Versions, gv)
			if r.def == nil || r.def.Storage == r.version {
				g.PreferredVersion = gv
			}
		}
	}
	sort.Strings(names)
	out := make([]metav1.APIGroup, 0, len(names))
	for _, n := range names {
		g := byName[n]
		if g.PreferredVersion.Version == "" {
			g.PreferredVersion = g.Versions[0]
		}
		out = append(out, *g)
	}
	return out
}

// resources lists what group/version serves; ok is false when it serves
// nothing.
func (c *catalog) resources(group, version string) (*metav1.APIResourceList, bool) {
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	l := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
	for _, r := range c.list {
		if r.group != group || r.version != version {
			continue
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{
			Name: r.plural, SingularName: strings.ToLower(r.kind), Namespaced: r.namespaced,
			Kind: r.kind, Verbs: verbs, ShortNames: r.short,
		})
		l.APIResources = append(l.APIResources, r.subresourceList()...)
	}
	return l, len(l.APIResources) > 0
}
