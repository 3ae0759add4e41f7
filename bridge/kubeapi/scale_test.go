package kubeapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
)

// TestScaleWriteTakesReplicas: a scale write's manager takes
// spec.replicas from the object's other managers, with subresource
// "scale", as in kube-apiserver.
func TestScaleWriteTakesReplicas(t *testing.T) {
	s := &Server{}
	r := httptest.NewRequest("PATCH", "/apis/apps/v1/namespaces/shop/deployments/web/scale", nil)
	r.Header.Set("User-Agent", "kubectl-x/v1")
	q := &request{r: r, res: resource{group: "apps", version: "v1", kind: "Deployment", plural: "deployments"}}
	var live map[string]any
	_ = json.Unmarshal([]byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop","managedFields":[{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"apps/v1","time":"2026-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{},"f:selector":{}}}}]},"spec":{"replicas":1}}`), &live)
	old := &autoscalingv1.Scale{}
	old.Name, old.Namespace, old.Spec.Replicas = "web", "shop", 1
	old.TypeMeta.Kind, old.TypeMeta.APIVersion = "Scale", "autoscaling/v1"
	want := old.DeepCopy()
	want.Spec.Replicas = 3
	mf, err := s.scaleManagedFields(q, live, old, want, builtinScale)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(mf)
	want1 := `[{"apiVersion":"apps/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}},"manager":"kubectl-x","operation":"Update","subresource":"scale"},` +
		`{"apiVersion":"apps/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:selector":{}}},"manager":"kubectl-client-side-apply","operation":"Update","time":"2026-01-01T00:00:00Z"}]`
	if string(b) != want1 {
		t.Errorf("managedFields:\n%s\nwant\n%s", b, want1)
	}
}
