package app_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jetplane/jetplane/internal/app"
	"github.com/jetplane/jetplane/internal/testenv"
	"github.com/jetplane/jetplane/projections"
	"github.com/jetplane/jetplane/schemas"
)

// TestHelmReleaseDependencies: a pushed chart whose dependency is missing
// from charts/ gets it from the Helm HTTP repository its Chart.yaml
// names, and renders the subchart's objects with the parent's values; a
// repository that does not answer is reported with helm's message and
// the repository and retried; one named by a `helm repo add` name fails.
func TestHelmReleaseDependencies(t *testing.T) {
	common := testenv.Chart(t, map[string]string{
		"Chart.yaml":               "apiVersion: v2\nname: common\nversion: 1.2.0\n",
		"values.yaml":              "greeting: hello\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: common\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
	})
	mux := http.NewServeMux()
	testenv.ServeChartRepository(mux, "/repo", "common", "1.2.0", common)
	// /flaky is the same repository, answering 503 until flaky is false.
	var flaky atomic.Bool
	flaky.Store(true)
	mux.HandleFunc("GET /flaky/{file}", func(w http.ResponseWriter, r *http.Request) {
		if flaky.Load() {
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/repo/" + r.PathValue("file")
		mux.ServeHTTP(w, r2)
	})
	repo := httptest.NewServer(mux)
	t.Cleanup(repo.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()

	web := func(version, repository string) []byte {
		return testenv.Chart(t, map[string]string{
			"Chart.yaml":               "apiVersion: v2\nname: web\nversion: " + version + "\ndependencies:\n- {name: common, version: ^1.0.0, repository: \"" + repository + "\"}\n",
			"values.yaml":              "common:\n  greeting: hi\n",
			"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-settings\ndata:\n  mode: fast\n",
		})
	}
	a, c := startApp(t, app.Config{})
	ctx := t.Context()
	if _, err := c.PushChart(ctx, "web", "0.1.0", web("0.1.0", repo.URL+"/repo")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PushChart(ctx, "web", "0.2.0", web("0.2.0", down.URL+"/repo")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PushChart(ctx, "web", "0.3.0", web("0.3.0", "@stable")); err != nil {
		t.Fatal(err)
	}
	applyYAML(t, c, releaseYAML("", "0.1.0", "{}"))
	waitRelease(t, a, "Ready with its dependency", isReady)
	cm := a.Store().Get(projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "common"})
	if g := cm.GetSpec().GetFields()["data"].GetStructValue().GetFields()["greeting"].GetStringValue(); g != "hi" {
		t.Fatalf("the subchart's ConfigMap has greeting %q, want the parent's hi", g)
	}

	applyYAML(t, c, releaseYAML("", "0.2.0", "{}"))
	rel := waitRelease(t, a, "an unreachable repository reported", func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Error" })
	msg := rel.GetStatus().GetMessage()
	for _, w := range []string{"found in Chart.yaml, but missing in charts/ directory: common", "repository " + down.URL + "/repo"} {
		if !strings.Contains(msg, w) {
			t.Errorf("status %q lacks %q", msg, w)
		}
	}
	// A repository jetplane cannot reach by itself is the chart's fault:
	// no retry helps.
	applyYAML(t, c, releaseYAML("", "0.3.0", "{}"))
	rel = waitRelease(t, a, "a repository name refused", func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Failed" })
	if msg := rel.GetStatus().GetMessage(); !strings.Contains(msg, `missing in charts/ directory: common (common: repository "@stable" is not an http(s) URL`) {
		t.Errorf("status %q", msg)
	}
	if a.Store().Get(projections.Key{Kind: "ConfigMap", Namespace: "shop", Name: "common"}) == nil {
		t.Fatal("a revision that failed to fetch removed the running one's objects")
	}

	// A repository that fails is tried again: once it answers, the
	// release renders.
	if _, err := c.PushChart(ctx, "web", "0.4.0", web("0.4.0", repo.URL+"/flaky")); err != nil {
		t.Fatal(err)
	}
	applyYAML(t, c, releaseYAML("", "0.4.0", "{}"))
	rel = waitRelease(t, a, "a failing repository reported", func(o *schemas.Object) bool { return o.GetStatus().GetPhase() == "Error" })
	if msg := rel.GetStatus().GetMessage(); !strings.Contains(msg, "503 Service Unavailable") || !strings.Contains(msg, repo.URL+"/flaky") {
		t.Errorf("status %q", msg)
	}
	flaky.Store(false)
	rel = waitRelease(t, a, "Ready once the repository answers", isReady)
	if msg := rel.GetStatus().GetMessage(); !strings.Contains(msg, "chart web 0.4.0") {
		t.Errorf("status %q", msg)
	}
}
