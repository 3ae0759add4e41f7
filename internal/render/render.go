// Package render turns a Helm chart and values into the objects a release
// consists of, client-side: helm's own template engine, no cluster, no
// release storage. It is a pure function of its input (chart, values,
// capabilities), so the HelmRelease reconciler and `jetplane template`
// give the same answer.
//
// It owns what a chart means to jetplane: the order of objects (CRDs and
// Namespaces first, then helm's install order), the jetplane.dev/depends-on
// annotation, hooks and tests (reported, never run) and errors that name the
// template and line. It does no I/O and must not know about the log.
package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

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

// render renders c with opts in this process (Render runs it in a child
// process). It returns *Error for anything the chart or
// values are to blame for.
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
	files, err := engine.Engine{}.Render(c, vals)
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
	for _, crd := range c.CRDObjects() {
		objs, err := decodeFile(crd.Filename, string(crd.File.Data), opts.Namespace)
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
		objs, err := decodeFile(name, files[name], opts.Namespace)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if hook := o.Object.GetMetadata().GetAnnotations()[hookAnnotation]; hook != "" {
				res.Unsupported = append(res.Unsupported, fmt.Sprintf("%s: %s (%s)", o.Template, o.Key(), hook))
				continue
			}
			res.Objects = append(res.Objects, o)
		}
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

// decodeFile splits one rendered file into documents and decodes each,
// with errors naming the file and the line the document starts on.
func decodeFile(name, content, namespace string) ([]Object, error) {
	var out []Object
	for _, d := range splitDocs(content) {
		if strings.TrimSpace(stripComments(d.text)) == "" {
			continue
		}
		objs, err := manifest.Decode("", []byte(d.text))
		if err != nil {
			var es manifest.Errors
			reason := err.Error()
			if errors.As(err, &es) && len(es) > 0 {
				parts := make([]string, len(es))
				for i, e := range es {
					e.Doc, e.Source = 0, ""
					parts[i] = e.Error()
				}
				reason = strings.Join(parts, "; ")
			}
			return nil, &Error{Template: name, Line: d.line, Reason: reason}
		}
		var raw map[string]any
		j, err := yaml.YAMLToJSON([]byte(d.text))
		if err == nil {
			err = json.Unmarshal(j, &raw)
		}
		if err != nil || len(objs) != 1 {
			return nil, &Error{Template: name, Line: d.line, Reason: "expected one object per document (a List is not supported in a chart)"}
		}
		o := objs[0]
		md := o.Metadata
		scoped := manifest.IsClusterScoped(projections.ObjectKey(o).Kind)
		if !scoped && md.GetNamespace() == "" {
			md.Namespace = namespace
			meta, _ := raw["metadata"].(map[string]any)
			meta["namespace"] = namespace
		}
		if scoped {
			md.Namespace = ""
		}
		out = append(out, Object{Template: name, Line: d.line, Object: o, Manifest: raw})
	}
	return out, nil
}

type doc struct {
	text string
	line int // 1-based line of the document's first line
}

// splitDocs splits a YAML stream at "---" lines.
func splitDocs(s string) []doc {
	var docs []doc
	lines := strings.SplitAfter(s, "\n")
	start := 0
	var b strings.Builder
	for i, l := range lines {
		t := strings.TrimRight(l, " \t\r\n")
		if t == "---" || strings.HasPrefix(t, "--- ") {
			docs = append(docs, doc{text: b.String(), line: start + 1})
			b.Reset()
			start = i + 1
			continue
		}
		b.WriteString(l)
	}
	return append(docs, doc{text: b.String(), line: start + 1})
}

func stripComments(s string) string {
	var b strings.Builder
	for l := range strings.Lines(s) {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l)
		}
	}
	return b.String()
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
