// Package render turns a Helm chart and values into the objects a release
// consists of, client-side: helm's own template engine, no cluster, no
// release storage. It is a pure function of its input (chart, values,
// capabilities), so the HelmRelease reconciler and `jetplane template`
// give the same answer.
//
// It owns what a chart means to jetplane: the order of objects (CRDs and
// Namespaces first, then helm's install order), the jetplane.dev/depends-on
// annotation, hooks and tests (set aside here; the HelmRelease reconciler runs them) and errors that name the
// template and line. Every render runs in a child process bounded in
// memory and time (isolate.go); besides that child and its pipes it does
// no I/O and must not know about the log.
package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/manifest"
)

const (
	// AnnotationDependsOn lists, comma-separated, the objects of the same
	// release an object depends on: "Kind/name", "Kind/namespace/name"
	// (Kind with group, as keys name it: ConfigMap, Deployment.apps).
	AnnotationDependsOn = "jetplane.dev/depends-on"
	// DefaultKubeVersion is the Kubernetes version charts see when the
	// release targets no cluster: the version jetplane's object model
	// follows.
	DefaultKubeVersion = "v1.36.3"
	// MaxChartBytes bounds a packaged chart (.tgz), checked before it is
	// unpacked.
	MaxChartBytes = 4 << 20
)

const hookAnnotation = "helm.sh/hook"

// ErrTooLarge marks a chart over MaxChartBytes.
var ErrTooLarge = errors.New("chart too large")

// Options are the release-level inputs of a render.
type Options struct {
	// ReleaseName and Namespace are .Release.Name and .Release.Namespace;
	// objects without a namespace go to Namespace.
	ReleaseName, Namespace string
	// Revision is .Release.Revision; IsUpgrade says it is not the first.
	Revision  int
	IsUpgrade bool
	// KubeVersion is .Capabilities.KubeVersion (default DefaultKubeVersion).
	KubeVersion string
	// APIVersions are the cluster's group/versions and group/version/Kind
	// resources; empty uses helm's built-in set.
	APIVersions []string
	// ForCluster says the objects are bound for a Kubernetes cluster (the
	// release names one): they are checked by Kubernetes' own types only,
	// not by the rules of the Pods jetplane runs itself.
	ForCluster bool
	// Lookup answers the chart's `lookup` calls; nil finds nothing, as
	// helm template does.
	Lookup engine.ClientProvider `json:"-"`
	// Values are the release's values, merged over the chart's defaults.
	Values map[string]any
}

// Object is one rendered object.
type Object struct {
	// Template is the template file it came from ("web/templates/cm.yaml",
	// or "web/crds/x.yaml"), Line the line its document starts on.
	Template string
	Line     int
	// Object is the object as jetplane stores it (content fields such as a
	// ConfigMap's data under spec, dependsOn from the annotation).
	Object *schemas.Object
	// Manifest is the Kubernetes manifest as rendered (the namespace set
	// when it lacked one and the kind is namespaced).
	Manifest map[string]any
}

// Key is the object's key.
func (o Object) Key() projections.Key { return projections.ObjectKey(o.Object) }

// Result is a rendered release.
type Result struct {
	// Objects in apply order: CRDs, Namespaces, then helm's install order;
	// within a kind, by namespace and name.
	Objects []Object
	// Unsupported lists what the chart holds that jetplane does not run:
	// hooks and tests, as "template: Kind/name (hook events)".
	Unsupported []string
	// Hooks are the hook and test objects, set aside as helm sets them
	// aside, in template order.
	Hooks []Object
	// Notes is the rendered NOTES.txt, if any.
	Notes string
}

// Error is a chart that does not render, or renders into something that
// is not a valid object. Template and Line name the place when known.
type Error struct {
	Template string
	Line     int
	Reason   string
}

func (e *Error) Error() string {
	switch {
	case e.Template == "":
		return e.Reason
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.Template, e.Line, e.Reason)
	default:
		return e.Template + ": " + e.Reason
	}
}

// Load reads a chart from a packaged archive (.tgz), refusing one over
// MaxChartBytes.
func Load(archive []byte) (*chart.Chart, error) {
	if len(archive) > MaxChartBytes {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(archive), MaxChartBytes)
	}
	c, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	return c, nil
}

// render renders c with opts in this process; Render runs it in a render
// child. It returns *Error for anything the chart or values are to blame
// for.
func render(c *chart.Chart, opts Options) (*Result, error) {
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	caps := chartutil.DefaultCapabilities.Copy()
	kv := opts.KubeVersion
	if kv == "" {
		kv = DefaultKubeVersion
	}
	v, err := chartutil.ParseKubeVersion(kv)
	if err != nil {
		return nil, &Error{Reason: fmt.Sprintf("kube version %q: %v", kv, err)}
	}
	caps.KubeVersion = *v
	if len(opts.APIVersions) > 0 {
		caps.APIVersions = slices.Clone(opts.APIVersions)
	}
	if c.Metadata != nil && c.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(c.Metadata.KubeVersion, caps.KubeVersion.Version) {
		return nil, &Error{Template: "Chart.yaml", Reason: fmt.Sprintf("kubeVersion: chart requires %s; the target is %s",
			c.Metadata.KubeVersion, caps.KubeVersion.Version)}
	}
	if err := checkDependencies(c); err != nil {
		return nil, err
	}
	if err := chartutil.ProcessDependenciesWithMerge(c, opts.Values); err != nil {
		return nil, &Error{Reason: "dependencies: " + err.Error()}
	}
	vals, err := chartutil.ToRenderValues(c, opts.Values, chartutil.ReleaseOptions{
		Name: opts.ReleaseName, Namespace: opts.Namespace, Revision: max(opts.Revision, 1),
		IsUpgrade: opts.IsUpgrade, IsInstall: !opts.IsUpgrade,
	}, caps)
	if err != nil {
		return nil, &Error{Template: "values", Reason: err.Error()}
	}
	var files map[string]string
	if opts.Lookup != nil {
		files, err = engine.RenderWithClientProvider(c, vals, opts.Lookup)
	} else {
		files, err = engine.Engine{}.Render(c, vals)
	}
	if err != nil {
		return nil, &Error{Reason: strings.TrimPrefix(err.Error(), "template: ")}
	}
	res := &Result{}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			if !strings.Contains(strings.TrimPrefix(name, c.Name()+"/"), "charts/") {
				res.Notes = files[name]
			}
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	// CRDs in crds/ are not templates: helm installs them as they are,
	// before everything else.
	sources := templateSources(c)
	for _, crd := range c.CRDObjects() {
		objs, _, err := decodeFile(crd.Filename, string(crd.File.Data), string(crd.File.Data), opts)
		if err != nil {
			return nil, err
		}
		res.Objects = append(res.Objects, objs...)
	}
	for _, name := range names {
		// As helm: every template but partials is a manifest.
		if base := name[strings.LastIndexByte(name, '/')+1:]; strings.HasPrefix(base, "_") {
			continue
		}
		objs, hooks, err := decodeFile(name, files[name], sources[name], opts)
		if err != nil {
			return nil, err
		}
		for _, o := range hooks {
			hook := o.Object.GetMetadata().GetAnnotations()[hookAnnotation]
			res.Hooks = append(res.Hooks, o)
			res.Unsupported = append(res.Unsupported, fmt.Sprintf("%s: %s (%s)", o.Template, o.Key(), hook))
		}
		res.Objects = append(res.Objects, objs...)
	}
	if err := checkDuplicates(res.Objects); err != nil {
		return nil, err
	}
	sortObjects(res.Objects)
	if err := linkDependencies(res.Objects); err != nil {
		return nil, err
	}
	return res, nil
}

// checkDependencies refuses a chart whose Chart.yaml names a dependency
// its charts/ directory lacks, with the message helm install gives.
func checkDependencies(c *chart.Chart) error {
	if missing := MissingDependencies(c); len(missing) > 0 {
		return DependencyError(missing, "vendor them: helm dependency build")
	}
	return nil
}

// MissingDependencies lists the dependencies c's Chart.yaml names that
// its charts/ directory lacks, in Chart.yaml's order.
func MissingDependencies(c *chart.Chart) []*chart.Dependency {
	if c.Metadata == nil {
		return nil
	}
	have := map[string]bool{}
	for _, d := range c.Dependencies() {
		have[d.Name()] = true
	}
	var missing []*chart.Dependency
	for _, d := range c.Metadata.Dependencies {
		if d != nil && !have[d.Name] {
			missing = append(missing, d)
		}
	}
	return missing
}

// DependencyError is helm's refusal of a chart whose dependencies are
// missing from charts/, followed by why, in parentheses.
func DependencyError(missing []*chart.Dependency, why string) *Error {
	names := make([]string, len(missing))
	for i, d := range missing {
		names[i] = d.Name
	}
	return &Error{Template: "Chart.yaml", Reason: "dependencies: found in Chart.yaml, but missing in charts/ directory: " + strings.Join(names, ", ") +
		" (" + why + ")"}
}

// templateSources maps each template's rendered name (chart path and
// file, as helm's engine names it) to its source text.
func templateSources(c *chart.Chart) map[string]string {
	out := map[string]string{}
	var walk func(c *chart.Chart)
	walk = func(c *chart.Chart) {
		for _, t := range c.Templates {
			out[path.Join(c.ChartFullPath(), t.Name)] = string(t.Data)
		}
		for _, d := range c.Dependencies() {
			walk(d)
		}
	}
	walk(c)
	return out
}

// decodeFile splits one rendered file into documents as helm does and
// decodes each; hooks and tests are returned apart, undecoded. Errors name
// the template file and the template's line.
func decodeFile(name, content, source string, opts Options) (objs []Object, hooks []Object, err error) {
	lines := newLineMap(source, content)
	for _, d := range splitDocs(content) {
		at := func(rendered int) int { return lines.line(d.line + rendered - 1) }
		j, yerr := sigsyaml.YAMLToJSON([]byte(d.text))
		if yerr != nil {
			line := d.line
			if m := yamlLineRE.FindStringSubmatch(yerr.Error()); m != nil {
				n, _ := strconv.Atoi(m[1])
				line = d.line + n - 1
			}
			return nil, nil, &Error{Template: name, Line: lines.line(line), Reason: "invalid YAML: " + strings.TrimPrefix(yerr.Error(), "error converting YAML to JSON: yaml: ")}
		}
		var raw any
		if err := json.Unmarshal(j, &raw); err != nil {
			return nil, nil, &Error{Template: name, Line: at(1), Reason: err.Error()}
		}
		if raw == nil {
			continue // only comments
		}
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, nil, &Error{Template: name, Line: at(1), Reason: "expected a mapping with apiVersion, kind and metadata"}
		}
		// A kind: List is flattened, as helm's Kubernetes client does.
		items := []map[string]any{m}
		prefix := []string{""}
		if kind, _ := m["kind"].(string); strings.HasSuffix(kind, "List") {
			if list, ok := m["items"].([]any); ok {
				items, prefix = nil, nil
				for i, it := range list {
					im, ok := it.(map[string]any)
					if !ok {
						return nil, nil, &Error{Template: name, Line: at(fieldLine(d.text, fmt.Sprintf("items[%d]", i))),
							Reason: fmt.Sprintf("items[%d]: expected an object", i)}
					}
					items = append(items, im)
					prefix = append(prefix, fmt.Sprintf("items[%d]", i))
				}
			}
		}
		for i, item := range items {
			if isHook(item) {
				// Set aside as helm sets hooks and tests aside: they are
				// not objects of the release, and not checked as such.
				o, err := hookObject(item, opts.Namespace)
				if err != nil {
					return nil, nil, &Error{Template: name, Line: at(1), Reason: "hook: " + err.Error()}
				}
				o.Template, o.Line = name, at(1)
				hooks = append(hooks, o)
				continue
			}
			o, err := decodeObject(item, opts)
			if err != nil {
				var es manifest.Errors
				reason := err.Error()
				line := 1
				if errors.As(err, &es) && len(es) > 0 {
					parts := make([]string, len(es))
					for k, e := range es {
						e.Doc, e.Source = 0, ""
						if prefix[i] != "" && e.Field != "" {
							e.Field = prefix[i] + "." + e.Field
						}
						parts[k] = e.Error()
					}
					reason = strings.Join(parts, "; ")
					line = fieldLine(d.text, es[0].Field)
				}
				if kind, _ := item["kind"].(string); !opts.ForCluster && (kind == "Pod" || kind == "Node") {
					reason += " (jetplane runs this " + kind + " itself, so jetplane's own rules apply; a release with spec.cluster installs it into Kubernetes instead)"
				}
				return nil, nil, &Error{Template: name, Line: at(line), Reason: reason}
			}
			o.Template, o.Line = name, at(1)
			objs = append(objs, o)
		}
	}
	return objs, hooks, nil
}

// decodeObject turns one rendered Kubernetes object into jetplane's form.
func decodeObject(m map[string]any, opts Options) (Object, error) {
	namespace := opts.Namespace
	j, err := json.Marshal(m)
	if err != nil {
		return Object{}, err
	}
	decode := manifest.Decode
	if opts.ForCluster {
		decode = manifest.DecodeKubernetes
	}
	objs, err := decode("", j)
	if err != nil {
		return Object{}, err
	}
	if len(objs) != 1 {
		return Object{}, fmt.Errorf("expected one object, got %d", len(objs))
	}
	o := objs[0]
	md := o.Metadata
	scoped := manifest.IsClusterScoped(projections.ObjectKey(o).Kind)
	if !scoped && md.GetNamespace() == "" {
		md.Namespace = namespace
		meta, _ := m["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			m["metadata"] = meta
		}
		meta["namespace"] = namespace
	}
	if scoped {
		md.Namespace = ""
	}
	return Object{Object: o, Manifest: m}, nil
}

// hookObject reads what jetplane needs of a hook or test object (its
// kind, name, namespace and annotations), without the checks of an object
// jetplane stores.
func hookObject(m map[string]any, namespace string) (Object, error) {
	str := func(v any) string { s, _ := v.(string); return s }
	md, _ := m["metadata"].(map[string]any)
	kind, apiVersion, name := str(m["kind"]), str(m["apiVersion"]), str(md["name"])
	if kind == "" || apiVersion == "" || name == "" {
		return Object{}, errors.New("apiVersion, kind and metadata.name are required")
	}
	ann := map[string]string{}
	if a, ok := md["annotations"].(map[string]any); ok {
		for k, v := range a {
			ann[k] = str(v)
		}
	}
	o := &schemas.Object{ApiVersion: apiVersion, Kind: kind, Metadata: &schemas.ObjectMeta{Name: name, Namespace: str(md["namespace"]), Annotations: ann}}
	scoped := manifest.IsClusterScoped(projections.ObjectKey(o).Kind)
	switch {
	case scoped:
		o.Metadata.Namespace = ""
	case o.Metadata.Namespace == "":
		o.Metadata.Namespace = namespace
		md["namespace"] = namespace
	}
	return Object{Object: o, Manifest: m}, nil
}

func isHook(m map[string]any) bool {
	md, _ := m["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	h, _ := ann[hookAnnotation].(string)
	return h != ""
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// helmSeparator is where helm splits a rendered file into documents
// (releaseutil.SplitManifests): "---" at the start of the file or after a
// newline, with the whitespace around it, so "---# comment", which a
// template's "---" followed by "{{- if … -}}" renders, is a separator too.
var helmSeparator = regexp.MustCompile("(?:^|\\s*\n)---\\s*")

type doc struct {
	text string
	line int // 1-based line of the rendered output the document starts on
}

// splitDocs splits a rendered file as helm does: the file is trimmed, cut
// at helmSeparator, and each document trimmed of the whitespace around it;
// helm then writes each document followed by one newline, so a final
// "|+" block keeps exactly one.
func splitDocs(s string) []doc {
	trimmed := strings.TrimSpace(s)
	lead := len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
	first := 1 + strings.Count(s[:lead], "\n")
	var docs []doc
	prev := 0
	cuts := append(helmSeparator.FindAllStringIndex(trimmed, -1), []int{len(trimmed), len(trimmed)})
	for _, c := range cuts {
		part := trimmed[prev:c[0]]
		t := strings.TrimSpace(part)
		if t != "" {
			skip := len(part) - len(strings.TrimLeftFunc(part, unicode.IsSpace))
			line := first + strings.Count(trimmed[:prev+skip], "\n")
			docs = append(docs, doc{text: t + "\n", line: line})
		}
		prev = c[1]
	}
	return docs
}

// lineMap maps lines of a template's rendered output back to the
// template's own lines: rendered lines that appear verbatim in the
// template anchor the mapping (in order); a line between anchors is
// counted from the anchor before it, and kept before the anchor after it.
// It is built once per rendered file: a template that renders a thousand
// documents asks for a line of each.
type lineMap struct {
	// anchors[i] is the template line (1-based) of rendered line i+1, or 0.
	anchors []int
}

func newLineMap(source, rendered string) lineMap {
	if source == "" {
		return lineMap{}
	}
	src := strings.Split(source, "\n")
	out := strings.Split(rendered, "\n")
	anchors := make([]int, len(out))
	next := 0
	for i, l := range out {
		if strings.TrimSpace(l) == "" {
			continue
		}
		for k := next; k < len(src); k++ {
			if src[k] == l {
				anchors[i] = k + 1
				next = k + 1
				break
			}
		}
	}
	return lineMap{anchors: anchors}
}

// line is the template line of rendered line n.
func (m lineMap) line(n int) int {
	anchors := m.anchors
	if anchors == nil || n < 1 || n > len(anchors) {
		return n
	}
	if anchors[n-1] > 0 {
		return anchors[n-1]
	}
	before, beforeT := 0, 0
	for i := n - 2; i >= 0; i-- {
		if anchors[i] > 0 {
			before, beforeT = i+1, anchors[i]
			break
		}
	}
	line := beforeT + (n - before)
	for i := n; i < len(anchors); i++ {
		if anchors[i] > 0 {
			line = min(line, anchors[i]-1)
			break
		}
	}
	return max(line, 1)
}

// fieldLine is the 1-based line, in a YAML document, of the field a
// manifest error names (such as metadata.name or spec.volumes[0]); the
// deepest part found, or 1. For a key given twice, the last one, which
// is the one that counts.
func fieldLine(text, field string) int {
	var root yaml.Node
	if yaml.Unmarshal([]byte(text), &root) != nil || len(root.Content) == 0 {
		return 1
	}
	n := root.Content[0]
	line := n.Line
	for _, part := range fieldParts(field) {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part {
					next = n.Content[i+1]
					line = n.Content[i].Line
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				line = next.Line
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return max(line, 1)
}

// fieldParts splits a manifest field path: a.b[0]["c.d"] → a, b, 0, c.d.
func fieldParts(field string) []string {
	var parts []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			parts = append(parts, b.String())
			b.Reset()
		}
	}
	for i := 0; i < len(field); i++ {
		switch c := field[i]; c {
		case '.':
			flush()
		case '[':
			flush()
			end := strings.IndexByte(field[i:], ']')
			if end < 0 {
				return parts
			}
			inner := field[i+1 : i+end]
			if uq, err := strconv.Unquote(inner); err == nil {
				inner = uq
			}
			parts = append(parts, inner)
			i += end
		default:
			b.WriteByte(c)
		}
	}
	flush()
	return parts
}

func checkDuplicates(objs []Object) error {
	seen := map[projections.Key]Object{}
	for _, o := range objs {
		k := o.Key()
		if p, ok := seen[k]; ok {
			return &Error{Template: o.Template, Line: o.Line, Reason: fmt.Sprintf("%s is also rendered by %s:%d; every object of a release must be unique", k, p.Template, p.Line)}
		}
		seen[k] = o
	}
	return nil
}

// rank orders kinds: CRDs, Namespaces, then helm's install order, then
// everything else.
func rank(o Object) int {
	kind, _, _ := strings.Cut(o.Key().Kind, ".")
	switch kind {
	case "CustomResourceDefinition":
		return 0
	case "Namespace":
		return 1
	}
	if i := slices.Index(releaseutil.InstallOrder, kind); i >= 0 {
		return 2 + i
	}
	return 2 + len(releaseutil.InstallOrder)
}

func sortObjects(objs []Object) {
	slices.SortStableFunc(objs, func(a, b Object) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Key().String(), b.Key().String())
	})
}

// linkDependencies sets each object's dependsOn: the objects its
// AnnotationDependsOn names, and, for objects that are neither CRDs nor
// Namespaces, the release's CRDs and the Namespace it lives in, so those
// exist first and go last. A reference to an object the release does not
// render is an error naming the template.
func linkDependencies(objs []Object) error {
	byKey := map[projections.Key]bool{}
	var crds []projections.Key
	namespaces := map[string]projections.Key{}
	for _, o := range objs {
		k := o.Key()
		byKey[k] = true
		switch rank(o) {
		case 0:
			crds = append(crds, k)
		case 1:
			namespaces[k.Name] = k
		}
	}
	for _, o := range objs {
		var deps []projections.Key
		if r := rank(o); r > 1 {
			deps = append(deps, crds...)
			if ns, ok := namespaces[o.Object.GetMetadata().GetNamespace()]; ok {
				deps = append(deps, ns)
			}
		}
		if ann := o.Object.GetMetadata().GetAnnotations()[AnnotationDependsOn]; ann != "" {
			for ref := range strings.SplitSeq(ann, ",") {
				k, err := parseRef(strings.TrimSpace(ref), o.Object.GetMetadata().GetNamespace())
				if err != nil {
					return &Error{Template: o.Template, Line: o.Line, Reason: fmt.Sprintf("annotation %s: %v", AnnotationDependsOn, err)}
				}
				if !byKey[k] {
					return &Error{Template: o.Template, Line: o.Line, Reason: fmt.Sprintf("annotation %s: %s is not rendered by this release", AnnotationDependsOn, k)}
				}
				deps = append(deps, k)
			}
		}
		md := o.Object.Metadata
		for _, d := range md.GetDependsOn() {
			deps = append(deps, projections.KeyOf(d))
		}
		md.DependsOn = nil
		seen := map[projections.Key]bool{o.Key(): true}
		for _, d := range deps {
			if !seen[d] {
				seen[d] = true
				md.DependsOn = append(md.DependsOn, d.Proto())
			}
		}
	}
	return nil
}

// parseRef reads "Kind/name" (in namespace ns, or cluster-scoped for
// cluster-scoped kinds) or "Kind/namespace/name".
func parseRef(s, ns string) (projections.Key, error) {
	parts := strings.Split(s, "/")
	switch {
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		if manifest.IsClusterScoped(parts[0]) {
			ns = ""
		}
		return projections.Key{Kind: parts[0], Namespace: ns, Name: parts[1]}, nil
	case len(parts) == 3 && parts[0] != "" && parts[1] != "" && parts[2] != "":
		return projections.Key{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, nil
	}
	return projections.Key{}, fmt.Errorf("%s: write Kind/name or Kind/namespace/name, such as ConfigMap/settings", strconv.Quote(s))
}
