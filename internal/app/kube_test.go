package app_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/jetplane/jetplane/bridge/api"
	"github.com/jetplane/jetplane/bridge/kube"
	"github.com/jetplane/jetplane/internal/app"
	kubeenv "github.com/jetplane/jetplane/internal/testenv/kube"
	"github.com/jetplane/jetplane/projections"
)

// TestKubernetesClusters runs jetplane with the bridge: a cluster that
// cannot be reached keeps /readyz failing with its name and error while
// GET /v1/clusters explains; with only reachable clusters jetplane gets
// ready, and their objects are in current state under CLUSTER/NAMESPACE.
func TestKubernetesClusters(t *testing.T) {
	env := kubeenv.Start(t)
	good := kube.Cluster{Name: "k1", REST: env.RESTConfig(), Resources: []kube.Resource{{Version: "v1", Resource: "configmaps", Namespace: "default"}}}
	// Nothing listens on port 1.
	dead := kube.Cluster{Name: "dead", REST: &rest.Config{Host: "https://127.0.0.1:1"}, Resources: []kube.Resource{{Version: "v1", Resource: "configmaps"}}}

	t.Run("unreachable cluster", func(t *testing.T) {
		a := runApp(t, app.Config{Clusters: kube.Clusters{good, dead}})
		c := &api.Client{BaseURL: a.URL()}
		var body string
		eventuallyApp(t, "readyz names the unreachable cluster", func() bool {
			var code int
			code, body = rawGet(t, a.URL()+"/readyz", nil)
			return code == http.StatusServiceUnavailable && strings.Contains(body, "cluster dead not synced yet") && strings.Contains(body, "connection refused")
		})
		if strings.Contains(body, "k1") {
			eventuallyApp(t, "k1 synced", func() bool { _, body = rawGet(t, a.URL()+"/readyz", nil); return !strings.Contains(body, "k1") })
		}
		resp, err := c.Clusters(t.Context())
		if err != nil {
			t.Fatalf("clusters while not ready: %v", err)
		}
		if len(resp.Clusters) != 2 || resp.Clusters[0].Name != "k1" || resp.Clusters[0].State != "synced" ||
			resp.Clusters[1].Name != "dead" || resp.Clusters[1].State != "connecting" || !strings.Contains(resp.Clusters[1].LastError, "connection refused") {
			t.Fatalf("clusters: %+v", resp.Clusters)
		}
		if _, err := c.List(t.Context(), api.Query{}); err == nil || !strings.Contains(err.Error(), "cluster dead") {
			t.Fatalf("list while not ready: %v, want 503 naming cluster dead", err)
		}
		_, metrics := rawGet(t, a.URL()+"/metrics", nil)
		for _, want := range []string{`jetplane_bridge_up{cluster="k1"} 1`, `jetplane_bridge_up{cluster="dead"} 0`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		rc, err := a.ClusterConfig("k1")
		if err != nil || rc.Host != env.RESTConfig().Host {
			t.Fatalf("ClusterConfig(k1) = %v, %v", rc, err)
		}
		if _, err := a.ClusterConfig("k2"); err == nil {
			t.Fatal("ClusterConfig of an unknown cluster succeeded")
		}
	})

	t.Run("ready", func(t *testing.T) {
		a, c := startApp(t, app.Config{Clusters: kube.Clusters{good}})
		cs, err := kubernetes.NewForConfig(env.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"mode": "fast"}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		k := projections.Key{Kind: "ConfigMap", Namespace: "k1/default", Name: "settings"}
		eventuallyApp(t, "the ConfigMap is observed", func() bool { return a.Store().GetRecord(k) != nil })
		raw, err := c.Get(t.Context(), api.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), `"mode":"fast"`) {
			t.Fatalf("observed object: %s", raw)
		}
		h, err := c.History(t.Context(), api.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name})
		if err != nil || len(h.Events) != 1 || !strings.Contains(string(h.Events[0]), `"actor":"bridge/k1"`) {
			t.Fatalf("history: %v, %v", h, err)
		}
		if s := a.Clusters(); len(s) != 1 || s[0].State != kube.StateSynced || s[0].Objects != 1 {
			t.Fatalf("clusters: %+v", s)
		}
	})
}

// runApp runs jetplane on a temporary store (unless cfg names one) without
// waiting for it to be ready.
func runApp(tb testing.TB, cfg app.Config) *app.App {
	tb.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = tb.TempDir()
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.NATSPort = -1
	// JETPLANE_TEST_LOG=1 shows the app's warnings (a benchmark's
	// partitions read again, leases lost); quiet otherwise.
	var logTo io.Writer = io.Discard
	if os.Getenv("JETPLANE_TEST_LOG") != "" {
		logTo = os.Stderr
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.New(ctx, cfg)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("app stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Error("app did not stop within 30s")
		}
	})
	return a
}
