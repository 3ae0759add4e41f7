package app_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/internal/app"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
)

// statusCounter counts the answers of one status code.
type statusCounter struct {
	rt   http.RoundTripper
	code int
	n    atomic.Int32
}

func (c *statusCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.rt.RoundTrip(r)
	if err == nil && resp.StatusCode == c.code {
		c.n.Add(1)
	}
	return resp, err
}

// TestKubernetesAPIWhileNotReady: while jetplane is not ready (here: a
// Kubernetes cluster it mirrors is not reachable yet), its Kubernetes API
// answers 429 with Retry-After, as kube-apiserver does while it shuts
// down; client-go waits and asks again, and its request succeeds once
// jetplane is ready, with no error reaching the caller.
func TestKubernetesAPIWhileNotReady(t *testing.T) {
	env := kubeenv.Start(t)
	env.StopAPIServer(t)
	cluster := kube.Cluster{Name: "k1", REST: env.RESTConfig(), Resources: []kube.Resource{{Version: "v1", Resource: "configmaps", Namespace: "default"}}}
	a := runApp(t, app.Config{Clusters: kube.Clusters{cluster}})

	var code int
	var body string
	eventuallyApp(t, "the API answers", func() bool {
		code, body = rawGet(t, a.URL()+"/api/v1/namespaces", nil)
		return code != 0
	})
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"reason":"TooManyRequests"`) || !strings.Contains(body, `"retryAfterSeconds":1`) {
		t.Fatalf("not ready: %d %s; want 429, TooManyRequests, retryAfterSeconds", code, body)
	}

	counter := &statusCounter{code: http.StatusTooManyRequests}
	cfg := &rest.Config{Host: a.URL(), WrapTransport: func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter }}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// client-go retries a 429 with Retry-After ten times by default;
		// the cluster takes longer to come back on a loaded machine.
		done <- cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces").MaxRetries(120).Do(ctx).Error()
	}()
	eventuallyApp(t, "client-go told to come back", func() bool { return counter.n.Load() > 0 })
	env.StartAPIServer(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("client-go's request while jetplane was not ready: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("client-go's request did not end within 2 minutes")
	}
	t.Logf("client-go was told to come back %d times", counter.n.Load())
}
