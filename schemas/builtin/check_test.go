package builtin_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	"github.com/jetplane/jetplane/schemas/builtin"
)

func spec(t testing.TB, y string) *structpb.Struct {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(y), &m); err != nil {
		t.Fatal(err)
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, apiVersion, kind, spec string
		want                         string // "" = valid
	}{
		{"deployment", "apps/v1", "Deployment", "{replicas: 3, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i, command: [x]}]}}}", ""},
		{"replica misspelled", "apps/v1", "Deployment", "{replica: 3}", "spec.replica: unknown field; did you mean replicas?"},
		{"container field misspelled", "apps/v1", "Deployment", "{template: {spec: {containers: [{name: c, comand: [x]}]}}}", "spec.template.spec.containers[0].comand: unknown field; did you mean command?"},
		{"pod container field", "v1", "Pod", "{containers: [{name: c}, {name: d, imagePullPolicy: Always, imag: x}]}", "spec.containers[1].imag: unknown field; did you mean image?"},
		{"wrong case", "apps/v1", "Deployment", "{Replicas: 3}", "spec.Replicas: unknown field; did you mean replicas?"},
		{"wrong type", "apps/v1", "Deployment", "{replicas: three}", "spec.replicas: must be an integer, got string"},
		{"configmap", "v1", "ConfigMap", "{data: {a: b}}", ""},
		{"configmap misspelled", "v1", "ConfigMap", "{data: {a: b}, binarydata: {}}", "binarydata: unknown field; did you mean binaryData?"},
		{"secret base64", "v1", "Secret", "{data: {a: aGVsbG8=}, stringData: {b: plain}}", ""},
		{"secret not base64", "v1", "Secret", "{data: {a: 'not base64!'}}", "data.a: must be base64-encoded"},
		{"role rules", "rbac.authorization.k8s.io/v1", "Role", "{rules: [{apiGroups: [''], resources: [pods], verb: [get]}]}", "rules[0].verb: unknown field; did you mean verbs?"},
		{"old version", "apps/v1beta1", "Deployment", "{}", `apiVersion: "apps/v1beta1" does not serve Deployment; use apps/v1`},
		{"crd", "apiextensions.k8s.io/v1", "CustomResourceDefinition", "{group: example.com, names: {kind: W, plural: ws}, scope: Namespaced, versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]}", ""},
		{"hpa v2", "autoscaling/v2", "HorizontalPodAutoscaler", "{maxReplicas: 3, scaleTargetRef: {kind: Deployment, name: x}}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := builtin.Check(tc.apiVersion, tc.kind, spec(t, tc.spec))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCheckNotBuiltin(t *testing.T) {
	for _, k := range [][2]string{{"apps/v1", "Deploymnet"}, {"example.com/v1", "Widget"}, {"v1", "HelmRelease"}} {
		if err := builtin.Check(k[0], k[1], &structpb.Struct{}); !errors.Is(err, builtin.ErrNotBuiltin) {
			t.Errorf("Check(%s %s) = %v, want ErrNotBuiltin", k[0], k[1], err)
		}
	}
}
