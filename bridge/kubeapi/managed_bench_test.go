package kubeapi

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
)

const benchDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","labels":{"app":"web"}},
"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
"spec":{"containers":[{"name":"web","image":"web:1","args":["serve"],"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}]},{"name":"side","image":"side:1"}]}}}}`

const benchConfigMap = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"shop"},"data":{"a":"1","b":"2","c":"3"}}`

// BenchmarkWritePath measures what field management adds to a write
// through the Kubernetes API: the decoding every write pays (prepare, the
// reference) and the same with the manager's entry recorded (track, then
// prepare), for a create of a ConfigMap and an update of a Deployment.
func BenchmarkWritePath(b *testing.B) {
	s := &Server{cfg: Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	for _, tc := range []struct {
		name, body string
		res        resource
		update     bool
	}{
		{"configmap create", benchConfigMap, resource{version: "v1", kind: "ConfigMap", plural: "configmaps", namespaced: true}, false},
		{"deployment update", benchDeployment, resource{group: "apps", version: "v1", kind: "Deployment", plural: "deployments", namespaced: true}, true},
	} {
		var live map[string]any
		if tc.update {
			_ = json.Unmarshal([]byte(tc.body), &live)
		}
		for _, tracked := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/tracked=%v", tc.name, tracked), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					var m map[string]any
					_ = json.Unmarshal([]byte(tc.body), &m)
					q := &request{r: httptest.NewRequest("PUT", "/", nil), res: tc.res, namespace: "shop", name: "web"}
					if tc.update {
						m["spec"].(map[string]any)["replicas"] = float64(i % 7)
					}
					if tracked {
						s.track(q, live, m)
					}
					if _, _, err := s.prepare(q, m); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
