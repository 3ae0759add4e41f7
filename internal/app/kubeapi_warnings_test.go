package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/jetplane/jetplane/internal/app"
)

// A pod created through the Kubernetes API hears the same warnings as one
// applied through jetplane's own API: the gate returns them with the
// write, and the handler sends them as Kubernetes does, in Warning
// headers (kubectl prints them).
func TestKubeAPIWarnsAboutPorts(t *testing.T) {
	a, _ := startApp(t, app.Config{})
	body := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default"},
"spec":{"containers":[{"name":"main","image":"app:v1","ports":[{"containerPort":80}]}]}}`
	resp, err := http.Post(a.URL()+"/api/v1/namespaces/default/pods", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %s", resp.Status)
	}
	w := resp.Header.Values("Warning")
	if len(w) != 1 || !strings.HasPrefix(w[0], `299 - "Pod default/web: spec.containers[0].ports: nothing will listen`) {
		t.Fatalf("Warning headers %q, want one about spec.containers[0].ports", w)
	}
}
