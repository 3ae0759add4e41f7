package apply

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// userAgent names jetplane's apply calls in the apiserver's audit log.
const userAgent = "jetplane-apply"

// cluster is the clients of one cluster. Safe for concurrent use.
type cluster struct {
	dyn    dynamic.Interface
	disc   discovery.DiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu        sync.Mutex
	refreshed time.Time // when the discovery cache was last dropped
}

func newCluster(cfg *rest.Config) (*cluster, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.UserAgent == "" {
		cfg.UserAgent = userAgent
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &cluster{dyn: dyn, disc: dc, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// mapping resolves gvk to its resource through the cluster's discovery
// cache. A kind the cache does not know drops the cache and asks the
// apiserver again (a CRD may have been installed since); lookups that
// failed while another caller refreshed reuse that refresh, so a burst of
// Applies of an unknown kind costs one discovery, not one each. The
// client's own refresh cannot serve here: it refreshes only a cache that
// was never filled.
func (c *cluster) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	start := time.Now()
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil || !meta.IsNoMatchError(err) {
		return m, err
	}
	c.mu.Lock()
	if !c.refreshed.After(start) {
		c.mapper.Reset()
		c.refreshed = time.Now()
	}
	c.mu.Unlock()
	m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", gvk, err)
	}
	return m, nil
}
