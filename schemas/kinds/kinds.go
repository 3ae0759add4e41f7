// Package kinds resolves the kind names people type — "deploy",
// "configmaps", "Deployment.apps", "pod" — to the kind an object key holds
// ("Deployment.apps", "ConfigMap", "Pod"). It is the one resolver every
// command, the HTTP API and the gate's dependsOn check use, so a name that
// works in one place works in all of them.
//
// Resolution is a pure function of the name and the kinds that exist (the
// built-in table below plus the kinds the caller has seen in the log); it
// does no I/O.
package kinds

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Info describes one kind.
type Info struct {
	// Kind is the kind's name as manifests write it, such as "Deployment".
	Kind string
	// Group is the API group ("apps"), empty for the core group and for
	// jetplane's own kinds.
	Group string
	// Plural is the lower-case plural ("deployments").
	Plural string
	// Short are the short names ("deploy").
	Short []string
	// Namespaced is false for cluster-scoped kinds.
	Namespaced bool
}

// Key is the kind as object keys hold it: "Kind.group", or "Kind" for the
// core group.
func (i Info) Key() string {
	if i.Group == "" {
		return i.Kind
	}
	return i.Kind + "." + i.Group
}

// Builtin are the kinds jetplane knows by name before any object of them
// exists: the Kubernetes kinds people apply most, and jetplane's own.
var Builtin = []Info{
	{Kind: "Pod", Plural: "pods", Short: []string{"po"}, Namespaced: true},
	{Kind: "Node", Plural: "nodes", Short: []string{"no"}},
	{Kind: "Namespace", Plural: "namespaces", Short: []string{"ns"}},
	{Kind: "ConfigMap", Plural: "configmaps", Short: []string{"cm"}, Namespaced: true},
	{Kind: "Secret", Plural: "secrets", Namespaced: true},
	{Kind: "Service", Plural: "services", Short: []string{"svc"}, Namespaced: true},
	{Kind: "ServiceAccount", Plural: "serviceaccounts", Short: []string{"sa"}, Namespaced: true},
	{Kind: "PersistentVolumeClaim", Plural: "persistentvolumeclaims", Short: []string{"pvc"}, Namespaced: true},
	{Kind: "PersistentVolume", Plural: "persistentvolumes", Short: []string{"pv"}},
	{Kind: "Event", Plural: "events", Short: []string{"ev"}, Namespaced: true},
	{Kind: "Deployment", Group: "apps", Plural: "deployments", Short: []string{"deploy"}, Namespaced: true},
	{Kind: "StatefulSet", Group: "apps", Plural: "statefulsets", Short: []string{"sts"}, Namespaced: true},
	{Kind: "DaemonSet", Group: "apps", Plural: "daemonsets", Short: []string{"ds"}, Namespaced: true},
	{Kind: "ReplicaSet", Group: "apps", Plural: "replicasets", Short: []string{"rs"}, Namespaced: true},
	{Kind: "Job", Group: "batch", Plural: "jobs", Namespaced: true},
	{Kind: "CronJob", Group: "batch", Plural: "cronjobs", Short: []string{"cj"}, Namespaced: true},
	{Kind: "Ingress", Group: "networking.k8s.io", Plural: "ingresses", Short: []string{"ing"}, Namespaced: true},
	{Kind: "Role", Group: "rbac.authorization.k8s.io", Plural: "roles", Namespaced: true},
	{Kind: "RoleBinding", Group: "rbac.authorization.k8s.io", Plural: "rolebindings", Namespaced: true},
	{Kind: "ClusterRole", Group: "rbac.authorization.k8s.io", Plural: "clusterroles"},
	{Kind: "ClusterRoleBinding", Group: "rbac.authorization.k8s.io", Plural: "clusterrolebindings"},
	{Kind: "CustomResourceDefinition", Group: "apiextensions.k8s.io", Plural: "customresourcedefinitions", Short: []string{"crd", "crds"}},
	// jetplane's own kinds.
	{Kind: "Apply", Plural: "applies", Namespaced: true},
	{Kind: "HelmRelease", Plural: "helmreleases", Short: []string{"hr"}, Namespaced: true},
	{Kind: "Subscription", Plural: "subscriptions", Short: []string{"sub"}, Namespaced: true},
}

var (
	// ErrUnknown matches an *UnknownError.
	ErrUnknown = errors.New("unknown kind")
	// ErrAmbiguous matches an *AmbiguousError.
	ErrAmbiguous = errors.New("ambiguous kind")
)

// UnknownError is a name that matches no kind.
type UnknownError struct {
	Name string
	// Suggestions are kinds whose names are close to Name.
	Suggestions []string
}

func (e *UnknownError) Error() string {
	msg := fmt.Sprintf("unknown kind %q", e.Name)
	if len(e.Suggestions) > 0 {
		msg += "; did you mean " + orList(e.Suggestions) + "?"
	}
	return msg + " (jetplane api-resources lists the kinds)"
}

func (e *UnknownError) Is(target error) bool { return target == ErrUnknown }

// AmbiguousError is a bare kind that exists in more than one group.
type AmbiguousError struct {
	Name       string
	Candidates []string
}

func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("kind %q is ambiguous: it matches %s; name one with its group", e.Name, strings.Join(e.Candidates, ", "))
}

func (e *AmbiguousError) Is(target error) bool { return target == ErrAmbiguous }

func orList(s []string) string {
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Resolve turns name into the kind as keys hold it. seen are the kinds (as
// keys hold them, "Kind.group" or "Kind") that objects in the log have.
//
//   - Kind names, plurals and short names match case-insensitively
//     ("deployments", "deploy", "DEPLOYMENT").
//   - "Kind.group" names the group explicitly ("deploy.apps" too).
//   - A bare kind resolves to the one group it exists in; in more than one
//     it is an *AmbiguousError listing them. A built-in kind nothing has
//     been seen of resolves to its usual group.
//   - A name close to a known one ("Deploymnt", "confgmap") is an
//     *UnknownError with suggestions, and so is any lower-case name that
//     matches nothing; a capitalised Kind name close to nothing known
//     ("Probe") is taken as written: a kind no object has yet.
func Resolve(name string, seen []string) (string, error) {
	return ResolveDefined(name, seen, nil)
}

// ResolveDefined is Resolve that also knows the kinds defined by
// CustomResourceDefinitions in effect (defined), by their plural and short
// names, before any object of them exists.
func ResolveDefined(name string, seen []string, defined []Info) (string, error) {
	table := Builtin
	if len(defined) > 0 {
		table = append(slices.Clip(defined), Builtin...)
	}
	if name == "" {
		return "", &UnknownError{Name: name}
	}
	// The common case, a kind exactly as keys hold it, needs no search.
	if slices.Contains(seen, name) {
		return name, nil
	}
	word, group, hasGroup := strings.Cut(name, ".")
	lw := strings.ToLower(word)

	// The kind's canonical name: the first seen kind, then built-in one,
	// whose kind, plural or short name matches. No catalogue is built
	// unless nothing matches: this runs on every API request.
	kind := ""
	for _, s := range seen {
		if k, _, _ := strings.Cut(s, "."); strings.EqualFold(k, lw) || isPlural(lw, k) {
			kind = k
			break
		}
	}
	if kind == "" {
		for _, in := range table {
			if in.matches(lw) {
				kind = in.Kind
				break
			}
		}
	}
	if kind == "" {
		sugg := suggest(lw, catalogue(seen, table))
		if len(sugg) == 0 && isKindName(word) {
			// A Kind spelled as manifests spell kinds, close to nothing
			// known: a kind no object has yet (a list of it is empty),
			// not a typo.
			if hasGroup {
				return word + "." + strings.ToLower(group), nil
			}
			return word, nil
		}
		return "", &UnknownError{Name: name, Suggestions: sugg}
	}
	if hasGroup {
		// A known spelling of the group keeps it; otherwise the group is
		// taken as written (a kind seen later, or nowhere yet).
		for _, s := range seen {
			if k, g, _ := strings.Cut(s, "."); k == kind && strings.EqualFold(g, group) {
				return s, nil
			}
		}
		return kind + "." + strings.ToLower(group), nil
	}
	// A bare kind: the groups it was seen in.
	var groups []string
	for _, s := range seen {
		if k, _, _ := strings.Cut(s, "."); k == kind && !slices.Contains(groups, s) {
			groups = append(groups, s)
		}
	}
	switch len(groups) {
	case 1:
		return groups[0], nil
	case 0:
		for _, in := range table {
			if in.Kind == kind {
				return in.Key(), nil
			}
		}
		return kind, nil
	}
	sort.Strings(groups)
	return "", &AmbiguousError{Name: name, Candidates: groups}
}

// Lookup returns what is known of kind (as keys hold it): its built-in
// entry, or one derived from its name.
func Lookup(kind string) Info { return lookup(kind, Builtin) }

func lookup(kind string, table []Info) Info {
	k, g, _ := strings.Cut(kind, ".")
	for _, in := range table {
		if in.Kind == k && in.Group == g {
			return in
		}
	}
	for _, in := range table {
		if in.Kind == k {
			in.Group = g
			return in
		}
	}
	return Info{Kind: k, Group: g, Plural: Plural(k), Namespaced: true}
}

// Catalogue lists every kind: the built-in ones and those seen, each once,
// ordered by kind then group.
func Catalogue(seen []string) []Info { return CatalogueDefined(seen, nil) }

// CatalogueDefined is Catalogue with the kinds defined by
// CustomResourceDefinitions in effect.
func CatalogueDefined(seen []string, defined []Info) []Info {
	table := Builtin
	if len(defined) > 0 {
		table = append(slices.Clip(defined), Builtin...)
	}
	out := catalogue(seen, table)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Group < out[j].Group
	})
	return out
}

// catalogue is the seen kinds first (their spelling wins), then the
// built-in ones not seen.
func catalogue(seen []string, table []Info) []Info {
	var out []Info
	have := map[string]bool{}
	for _, s := range seen {
		if s == "" || have[s] {
			continue
		}
		have[s] = true
		out = append(out, lookup(s, table))
	}
	for _, in := range table {
		if !have[in.Key()] {
			have[in.Key()] = true
			out = append(out, in)
		}
	}
	return out
}

func (in Info) matches(lower string) bool {
	if strings.EqualFold(lower, in.Kind) || lower == in.Plural {
		return true
	}
	return slices.Contains(in.Short, lower)
}

// Plural is the English plural of a kind name as Kubernetes forms it for
// resources: lower case, "y" → "ies", "s", "x", "ch", "sh" → "es".
func Plural(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsRune("aeiou", rune(k[len(k)-2])):
		return k[:len(k)-1] + "ies"
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	}
	return k + "s"
}

// suggest returns the kinds with a name within a small edit distance of
// word, closest first.
func suggest(word string, infos []Info) []string {
	type cand struct {
		kind string
		d    int
	}
	best := map[string]int{}
	if len(word) < 3 {
		return nil // one or two letters are close to too much
	}
	for _, in := range infos {
		names := append([]string{strings.ToLower(in.Kind), in.Plural}, in.Short...)
		for _, n := range names {
			d := distance(word, n)
			limit := max(1, min(3, len(n)/3))
			if d > limit && !(len(word) >= 3 && strings.HasPrefix(n, word)) {
				continue
			}
			if cur, ok := best[in.Key()]; !ok || d < cur {
				best[in.Key()] = d
			}
		}
	}
	var cs []cand
	for k, d := range best {
		cs = append(cs, cand{k, d})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].kind < cs[j].kind
	})
	var out []string
	for i, c := range cs {
		if i == 3 {
			break
		}
		out = append(out, c.kind)
	}
	return out
}

// distance is the Damerau–Levenshtein (optimal string alignment) distance:
// a swap of two neighbours counts as one edit, as typing slips do.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// isKindName reports whether s is spelled as manifests spell kinds: an
// upper-case ASCII letter, then ASCII letters and digits.
func isKindName(s string) bool {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// isPlural reports whether lower is the plural of kind (Plural(kind)),
// without allocating for the names it cannot be.
func isPlural(lower, kind string) bool {
	if len(lower) <= len(kind) || len(lower) > len(kind)+2 || !strings.EqualFold(lower[:1], kind[:1]) {
		return false
	}
	return lower == Plural(kind)
}
