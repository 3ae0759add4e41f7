package podspec_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/jetplane/jetplane/schemas/podspec"
)

func spec(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func container(extra map[string]any) []any {
	c := map[string]any{"name": "main", "image": "hello:v1"}
	for k, v := range extra {
		c[k] = v
	}
	return []any{c}
}

func withMount(m map[string]any) map[string]any {
	return map[string]any{
		"containers": container(map[string]any{"volumeMounts": []any{m}}),
		"volumes":    []any{map[string]any{"name": "v", "emptyDir": map[string]any{}}},
	}
}

func TestPodSpecs(t *testing.T) {
	tests := []struct {
		name      string
		spec      map[string]any
		wantField string // "" = valid
	}{
		{"minimal", map[string]any{"containers": container(nil)}, ""},
		{"digest", map[string]any{"containers": []any{map[string]any{"name": "m", "image": "hello@sha256:0123456789012345678901234567890123456789012345678901234567890123"}}}, ""},
		{"no containers", map[string]any{}, "spec.containers"},
		{"host network", map[string]any{"hostNetwork": true, "containers": container(nil)}, "spec.hostNetwork"},
		{"host pid", map[string]any{"hostPID": true, "containers": container(nil)}, "spec.hostPID"},
		{"privileged", map[string]any{"containers": container(map[string]any{"securityContext": map[string]any{"privileged": true}})}, "spec.containers[0].securityContext.privileged"},
		{"host port", map[string]any{"containers": container(map[string]any{"ports": []any{map[string]any{"containerPort": 80, "hostPort": 80}}})}, "spec.containers[0].ports[0].hostPort"},
		{"unknown field", map[string]any{"containers": container(nil), "flavour": "x"}, "spec.flavour"},
		{"no image", map[string]any{"containers": []any{map[string]any{"name": "m"}}}, "spec.containers[0].image"},
		{"bad image", map[string]any{"containers": []any{map[string]any{"name": "m", "image": "hello"}}}, "spec.containers[0].image"},
		{"tiny memory", map[string]any{"containers": container(map[string]any{"resources": map[string]any{"limits": map[string]any{"memory": "1Ki"}}})}, "spec.containers[0].resources.limits.memory"},
		{"nfs volume", map[string]any{"containers": container(nil), "volumes": []any{map[string]any{"name": "v", "nfs": map[string]any{"server": "s", "path": "/"}}}}, "spec.volumes[0]"},
		{"relative host path", map[string]any{"containers": container(nil), "volumes": []any{map[string]any{"name": "v", "hostPath": map[string]any{"path": "data"}}}}, "spec.volumes[0].hostPath.path"},
		{"mount of no volume", map[string]any{"containers": container(map[string]any{"volumeMounts": []any{map[string]any{"name": "v", "mountPath": "/d"}}})}, "spec.containers[0].volumeMounts[0].name"},
		{"restart policy", map[string]any{"restartPolicy": "Sometimes", "containers": container(nil)}, "spec.restartPolicy"},
		{"relative mount path", withMount(map[string]any{"name": "v", "mountPath": "data"}), "spec.containers[0].volumeMounts[0].mountPath"},
		{"mount path with ..", withMount(map[string]any{"name": "v", "mountPath": "/data/../etc"}), "spec.containers[0].volumeMounts[0].mountPath"},
		{"sub path", withMount(map[string]any{"name": "v", "mountPath": "/data", "subPath": "../x"}), "spec.containers[0].volumeMounts[0].subPath"},
		{"image with ..", map[string]any{"containers": []any{map[string]any{"name": "m", "image": "../../etc:v1"}}}, "spec.containers[0].image"},
		{"image with three parts", map[string]any{"containers": []any{map[string]any{"name": "m", "image": "a/b/c:v1"}}}, "spec.containers[0].image"},
		{"mount", withMount(map[string]any{"name": "v", "mountPath": "/data", "readOnly": true}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := podspec.Pod(spec(t, tt.spec))
			var fe *podspec.FieldError
			switch {
			case tt.wantField == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantField != "" && !errors.As(err, &fe):
				t.Fatalf("err = %v, want a field error on %s", err, tt.wantField)
			case tt.wantField != "" && fe.Field != tt.wantField:
				t.Fatalf("field %s (%s), want %s", fe.Field, fe.Reason, tt.wantField)
			}
		})
	}
}

func TestNodeSpecs(t *testing.T) {
	if _, err := podspec.Node(spec(t, map[string]any{"taints": []any{map[string]any{"key": "gpu", "effect": "NoSchedule"}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := podspec.Node(spec(t, map[string]any{"taints": []any{map[string]any{"key": "gpu", "effect": "Sometimes"}}})); err == nil {
		t.Fatal("a bad taint effect passed")
	}
}
