package apply

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/client-go/discovery"
)

// Capabilities reports what a chart rendered for cluster may ask about
// it: the apiserver's version ("v1.36.3") and its API versions, as
// "group/version" and "group/version/Kind" (helm's .Capabilities). It asks
// the apiserver each time; a release renders only when it changes.
func (r *Reconciler) Capabilities(ctx context.Context, cluster string) (string, []string, error) {
	c, ok := r.clusters[cluster]
	if !ok {
		return "", nil, fmt.Errorf("spec.cluster: %w %q (configured: %s)", ErrUnknownCluster, cluster, strings.Join(r.names, ", "))
	}
	v, err := c.disc.ServerVersion()
	if err != nil {
		return "", nil, fmt.Errorf("cluster %s: version: %w", cluster, err)
	}
	_, lists, err := c.disc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return "", nil, fmt.Errorf("cluster %s: discovery: %w", cluster, err)
	}
	var out []string
	for _, l := range lists {
		out = append(out, l.GroupVersion)
		for _, res := range l.APIResources {
			if !strings.Contains(res.Name, "/") {
				out = append(out, l.GroupVersion+"/"+res.Kind)
			}
		}
	}
	return v.GitVersion, out, nil
}
