package helmrelease

import (
	"context"
	"strings"

	"helm.sh/helm/v3/pkg/engine"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/jetplane/jetplane/schemas"
	"github.com/jetplane/jetplane/schemas/manifest"
)

// lookupObjects answers a chart's `lookup` from the objects the release's
// previous revision wrote, as Kubernetes manifests: what `lookup` finds on
// a cluster helm upgrades, for the objects the release made (a Secret
// holding a generated password). Objects the release did not make are
// not found, as during helm template.
type lookupObjects struct {
	objs []map[string]any
}

// kubeManifest is o as Kubernetes writes it: an Apply child's manifest,
// or a jetplane object with its content fields back at the top level.
func kubeManifest(o *schemas.Object) map[string]any {
	if o.GetKind() == "Apply" {
		m, _ := o.GetSpec().AsMap()["manifest"].(map[string]any)
		return m
	}
	md := o.GetMetadata()
	meta := map[string]any{"name": md.GetName()}
	if md.GetNamespace() != "" {
		meta["namespace"] = md.GetNamespace()
	}
	if len(md.GetLabels()) > 0 {
		l := map[string]any{}
		for k, v := range md.GetLabels() {
			l[k] = v
		}
		meta["labels"] = l
	}
	if len(md.GetAnnotations()) > 0 {
		a := map[string]any{}
		for k, v := range md.GetAnnotations() {
			if !strings.HasPrefix(k, gatePrefix) {
				a[k] = v
			}
		}
		meta["annotations"] = a
	}
	m := map[string]any{"apiVersion": o.GetApiVersion(), "kind": o.GetKind(), "metadata": meta}
	spec := o.GetSpec().AsMap()
	if content := manifest.ContentFields(o.GetKind()); content != nil {
		for _, f := range content {
			if v, ok := spec[f]; ok {
				m[f] = v
			}
		}
	} else if len(spec) > 0 {
		m["spec"] = spec
	}
	return m
}

// GetClientFor implements engine.ClientProvider.
func (l lookupObjects) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, false, err
	}
	var of []map[string]any
	for _, m := range l.objs {
		if m["apiVersion"] == apiVersion && m["kind"] == kind {
			of = append(of, m)
		}
	}
	key := kind
	if gv.Group != "" {
		key += "." + gv.Group
	}
	namespaced := !manifest.IsClusterScoped(key)
	return lookupResource{objs: of, gvr: gv.WithResource(strings.ToLower(kind) + "s")}, namespaced, nil
}

// lookupResource is the part of a dynamic client `lookup` uses: Get and
// List, in a namespace or across all.
type lookupResource struct {
	dynamic.NamespaceableResourceInterface // not called: only lookup's methods are implemented
	objs                                   []map[string]any
	gvr                                    schema.GroupVersionResource
	namespace                              string
}

func (r lookupResource) Namespace(ns string) dynamic.ResourceInterface {
	r.namespace = ns
	return r
}

func (r lookupResource) matches(m map[string]any) bool {
	if r.namespace == "" {
		return true
	}
	md, _ := m["metadata"].(map[string]any)
	return md["namespace"] == r.namespace
}

func (r lookupResource) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	for _, m := range r.objs {
		md, _ := m["metadata"].(map[string]any)
		if md["name"] == name && r.matches(m) {
			return &unstructured.Unstructured{Object: runtimeCopy(m)}, nil
		}
	}
	return nil, apierrors.NewNotFound(r.gvr.GroupResource(), name)
}

func (r lookupResource) List(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	out := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": r.gvr.GroupVersion().String(), "kind": "List"}}
	for _, m := range r.objs {
		if r.matches(m) {
			out.Items = append(out.Items, unstructured.Unstructured{Object: runtimeCopy(m)})
		}
	}
	return out, nil
}

func runtimeCopy(m map[string]any) map[string]any { return deepCopy(m) }

// ClusterLookup answers a chart's lookup from a Kubernetes cluster's live
// objects, as helm's lookup does on the cluster it installs into: kinds
// are mapped to resources by the cluster's discovery, read once and
// refreshed when a kind is unknown. Without a rate of its own, cfg's client
// makes up to 50 requests/s (bursts of 100).
func ClusterLookup(cfg *rest.Config) (engine.ClientProvider, error) {
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		// A revision's dry run checks each of its objects; client-go's
		// default of 5 requests/s would hold a 100-object release 20 s.
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = 50, 100
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return clusterLookup{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

type clusterLookup struct {
	client dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func (c clusterLookup) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	gvk := schema.FromAPIVersionAndKind(apiVersion, kind)
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, false, err
	}
	return c.client.Resource(m.Resource), m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}
