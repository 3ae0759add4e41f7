package kube

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// MaxConfigBytes bounds a clusters file; it is read before it is parsed.
const MaxConfigBytes = 1 << 20

// Cluster is one Kubernetes cluster the bridge watches.
type Cluster struct {
	// Name names the cluster in jetplane: observed keys live in namespaces
	// "<name>/<namespace>" and events are written by "bridge/<name>". A
	// DNS-1123 label; renaming a cluster makes its objects new keys.
	Name string `yaml:"name" json:"name"`
	// Kubeconfig is the path of a kubeconfig file; in a clusters file, ~/
	// is the home directory and relative paths are relative to the file.
	// Empty uses the usual
	// lookup: $KUBECONFIG, ~/.kube/config, or the in-cluster service
	// account when jetplane runs in a pod.
	Kubeconfig string `yaml:"kubeconfig,omitempty" json:"kubeconfig,omitempty"`
	// Context picks a context of the kubeconfig; empty is its current one.
	Context string `yaml:"context,omitempty" json:"context,omitempty"`
	// Resources are what to watch; at least one.
	Resources []Resource `yaml:"resources" json:"resources"`
	// REST, when set, is used instead of Kubeconfig and Context: for tests
	// and for programs that embed jetplane and build their own config.
	REST *rest.Config `yaml:"-" json:"-"`
}

// Resource is one resource to watch in a cluster.
type Resource struct {
	// Group is the API group; empty for the core group (ConfigMap, Pod).
	Group string `yaml:"group,omitempty" json:"group,omitempty"`
	// Version is the API version to read the resource in, such as v1.
	Version string `yaml:"version" json:"version"`
	// Resource is the plural resource name, such as configmaps or deployments.
	Resource string `yaml:"resource" json:"resource"`
	// Namespace limits the watch to one namespace; empty watches all of
	// them (and is the only choice for cluster-scoped resources).
	Namespace string `yaml:"namespace,omitempty" json:"namespace,omitempty"`
	// LabelSelector limits the watch to matching objects, in Kubernetes
	// syntax (app=web,tier in (front,back)). An object whose labels stop
	// matching leaves the watch, and so leaves jetplane's current state.
	LabelSelector string `yaml:"labelSelector,omitempty" json:"labelSelector,omitempty"`
}

// GVR is the resource's group, version and resource.
func (r Resource) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

// String is the resource as kubectl names it, with its scope:
// "deployments.v1.apps in shop", "configmaps.v1 (app=web)".
func (r Resource) String() string {
	s := r.Resource + "." + r.Version
	if r.Group != "" {
		s += "." + r.Group
	}
	if r.Namespace != "" {
		s += " in " + r.Namespace
	}
	if r.LabelSelector != "" {
		s += " (" + r.LabelSelector + ")"
	}
	return s
}

// ConfigError is a problem with one field of the clusters configuration.
type ConfigError struct {
	// Source is the file the configuration came from, if any.
	Source string
	// Field is the path of the field, such as clusters[0].resources[1].version.
	Field string
	// Reason says what is wrong and what to do.
	Reason string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Clusters is the bridge's configuration: every cluster it watches.
type Clusters []Cluster

// Validate checks every field and reports the first problem as a
// *ConfigError naming it. It does not read kubeconfig files (LoadFile
// does) nor contact any cluster.
func (cs Clusters) Validate() error {
	seen := map[string]int{}
	for i, c := range cs {
		if err := c.validate(fmt.Sprintf("clusters[%d]", i)); err != nil {
			return err
		}
		if j, dup := seen[c.Name]; dup {
			return &ConfigError{Field: fmt.Sprintf("clusters[%d].name", i), Reason: fmt.Sprintf("%q is already the name of clusters[%d]; names must be unique", c.Name, j)}
		}
		seen[c.Name] = i
	}
	return nil
}

// Names lists the clusters' names in order.
func (cs Clusters) Names() []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// RESTConfig returns a fresh copy of the client config of the named
// cluster, for other parts of jetplane that talk to the same cluster (the
// apply reconciler). The caller may change the copy.
func (cs Clusters) RESTConfig(name string) (*rest.Config, error) {
	for _, c := range cs {
		if c.Name == name {
			return c.RESTConfig()
		}
	}
	return nil, fmt.Errorf("cluster %q is not configured; configured: %s", name, strings.Join(cs.Names(), ", "))
}

// RESTConfigs returns a fresh client config for every cluster, by name.
func (cs Clusters) RESTConfigs() (map[string]*rest.Config, error) {
	out := make(map[string]*rest.Config, len(cs))
	for _, c := range cs {
		rc, err := c.RESTConfig()
		if err != nil {
			return nil, err
		}
		out[c.Name] = rc
	}
	return out, nil
}

func (c Cluster) validate(p string) error {
	field := func(f, reason string) error { return &ConfigError{Field: p + "." + f, Reason: reason} }
	switch {
	case c.Name == "":
		return field("name", "required; a DNS-1123 label such as prod-eu")
	case len(validation.IsDNS1123Label(c.Name)) > 0:
		return field("name", fmt.Sprintf("%q is not a DNS-1123 label: %s", c.Name, strings.Join(validation.IsDNS1123Label(c.Name), "; ")))
	case c.REST != nil && (c.Kubeconfig != "" || c.Context != ""):
		return field("kubeconfig", "give either a REST config or a kubeconfig and context, not both")
	case len(c.Resources) == 0:
		return field("resources", "required; list at least one resource to watch, such as {version: v1, resource: configmaps}")
	}
	for i, r := range c.Resources {
		if err := r.validate(fmt.Sprintf("%s.resources[%d]", p, i)); err != nil {
			return err
		}
		for j, o := range c.Resources[:i] {
			if o.Group == r.Group && o.Resource == r.Resource && (o.Namespace == r.Namespace || o.Namespace == "" || r.Namespace == "") {
				return &ConfigError{Field: fmt.Sprintf("%s.resources[%d]", p, i), Reason: fmt.Sprintf(
					"watches objects that resources[%d] already watches (%s); an object must be watched once: merge them, or use distinct namespaces", j, o)}
			}
		}
	}
	return nil
}

func (r Resource) validate(p string) error {
	field := func(f, reason string) error { return &ConfigError{Field: p + "." + f, Reason: reason} }
	switch {
	case r.Group != "" && len(validation.IsDNS1123Subdomain(r.Group)) > 0:
		return field("group", fmt.Sprintf("%q is not an API group such as apps or example.com (leave it empty for the core group)", r.Group))
	case r.Version == "":
		return field("version", "required; the API version, such as v1")
	case len(validation.IsDNS1123Label(r.Version)) > 0:
		return field("version", fmt.Sprintf("%q is not an API version such as v1 or v1beta1 (the group goes in group)", r.Version))
	case r.Resource == "":
		return field("resource", "required; the plural resource name, such as configmaps or deployments")
	case len(validation.IsDNS1123Label(r.Resource)) > 0:
		return field("resource", fmt.Sprintf("%q is not a resource name: use the lower-case plural, such as deployments", r.Resource))
	case r.Namespace != "" && len(validation.IsDNS1123Label(r.Namespace)) > 0:
		return field("namespace", fmt.Sprintf("%q is not a namespace name (DNS-1123 label)", r.Namespace))
	}
	if r.LabelSelector != "" {
		if _, err := labels.Parse(r.LabelSelector); err != nil {
			return field("labelSelector", fmt.Sprintf("%q: %v", r.LabelSelector, err))
		}
	}
	return nil
}

// RESTConfig builds the cluster's client config: a copy of REST when set,
// else from the kubeconfig and context.
func (c Cluster) RESTConfig() (*rest.Config, error) {
	if c.REST != nil {
		return rest.CopyConfig(c.REST), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.Kubeconfig != "" {
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return rc, nil
}

// file is the shape of a clusters file.
type file struct {
	Clusters Clusters `yaml:"clusters"`
}

// LoadFile reads a clusters file (YAML or JSON, see README "Kubernetes
// clusters"), validates it, and checks that each cluster's kubeconfig and
// context load. Errors are *ConfigError naming the file and the field.
func LoadFile(path string) (Clusters, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &ConfigError{Source: path, Reason: err.Error()}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, &ConfigError{Source: path, Reason: err.Error()}
	}
	if len(data) > MaxConfigBytes {
		return nil, &ConfigError{Source: path, Reason: fmt.Sprintf("over %d bytes; is this the right file?", MaxConfigBytes)}
	}
	cs, err := Parse(data)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.Source = path
		}
		return nil, err
	}
	for i := range cs {
		c := &cs[i]
		if rest, ok := strings.CutPrefix(c.Kubeconfig, "~/"); ok {
			home, err := os.UserHomeDir()
			if err != nil {
				return nil, &ConfigError{Source: path, Field: fmt.Sprintf("clusters[%d].kubeconfig", i), Reason: err.Error()}
			}
			c.Kubeconfig = filepath.Join(home, rest)
		} else if c.Kubeconfig != "" && !filepath.IsAbs(c.Kubeconfig) {
			c.Kubeconfig = filepath.Join(filepath.Dir(path), c.Kubeconfig)
		}
		if err := c.checkKubeconfig(); err != nil {
			err.Source, err.Field = path, fmt.Sprintf("clusters[%d].%s", i, err.Field)
			return nil, err
		}
	}
	return cs, nil
}

// Parse decodes and validates a clusters document (YAML or JSON) without
// reading the kubeconfig files it names.
func Parse(data []byte) (Clusters, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigError{Reason: "empty; want a document with clusters: [...]"}
		}
		return nil, &ConfigError{Reason: yamlReason(err)}
	}
	if len(f.Clusters) == 0 {
		return nil, &ConfigError{Field: "clusters", Reason: "required; list at least one cluster, or leave out --clusters"}
	}
	if err := f.Clusters.Validate(); err != nil {
		return nil, err
	}
	return f.Clusters, nil
}

// yamlReason rewords a decoding error in the words of the file's format.
func yamlReason(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	r := strings.NewReplacer(
		"in type kube.file", "at the top level (known: clusters)",
		"in type kube.Cluster", "in a cluster (known: name, kubeconfig, context, resources)",
		"in type kube.Resource", "in a resource (known: group, version, resource, namespace, labelSelector)",
		"into kube.Clusters", "into clusters, a list",
		"into []kube.Resource", "into resources, a list",
		"into kube.Cluster", "into a cluster, a mapping",
		"into kube.Resource", "into a resource, a mapping",
	)
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = r.Replace(m)
	}
	return strings.Join(msgs, "; ")
}

// checkKubeconfig loads the kubeconfig so that a missing file or context
// is reported at start, naming the field, not later as a watch error.
func (c Cluster) checkKubeconfig() *ConfigError {
	if c.REST != nil {
		return nil
	}
	if c.Kubeconfig != "" {
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			return &ConfigError{Field: "kubeconfig", Reason: err.Error()}
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.Kubeconfig != "" {
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: c.Kubeconfig}
	}
	raw, err := rules.Load()
	if err != nil {
		return &ConfigError{Field: "kubeconfig", Reason: err.Error()}
	}
	if c.Context != "" {
		if _, ok := raw.Contexts[c.Context]; !ok {
			names := slices.Sorted(maps.Keys(raw.Contexts))
			return &ConfigError{Field: "context", Reason: fmt.Sprintf("%q is not a context of the kubeconfig; it has: %s", c.Context, strings.Join(names, ", "))}
		}
	}
	if _, err := c.RESTConfig(); err != nil {
		return &ConfigError{Field: "kubeconfig", Reason: err.Error()}
	}
	return nil
}
