package apply

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
)

// TestCapabilities reads the version and API versions charts see from a
// real apiserver.
func TestCapabilities(t *testing.T) {
	env := kubeenv.Start(t)
	r, err := New(Config{Clusters: map[string]*rest.Config{"k1": env.RESTConfig()}, State: projections.NewStore(projections.StoreOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	v, apis, err := r.Capabilities(t.Context(), "k1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v, "v1.36.") {
		t.Errorf("version %q, want the test apiserver's v1.36", v)
	}
	for _, want := range []string{"v1", "apps/v1", "apps/v1/Deployment", "v1/ConfigMap"} {
		if !slices.Contains(apis, want) {
			t.Errorf("API versions lack %s", want)
		}
	}
	if _, _, err := r.Capabilities(t.Context(), "k2"); !errors.Is(err, ErrUnknownCluster) {
		t.Errorf("unknown cluster: %v", err)
	}
}
