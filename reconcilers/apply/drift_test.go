package apply

import "testing"

func TestInSync(t *testing.T) {
	live := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "uid": "u1", "labels": map[string]any{"app": "web", "extra": "x"}},
		"spec": map[string]any{
			"replicas": int64(2),
			"paused":   nil,
			"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{
					"name": "web", "image": "nginx", "imagePullPolicy": "IfNotPresent", "args": []any{"500m"},
					"resources": map[string]any{"requests": map[string]any{"cpu": "500m", "memory": "64Mi"}},
				}},
			}},
		},
		"status": map[string]any{"replicas": int64(0)},
	}
	tests := []struct {
		name    string
		desired map[string]any
		want    bool
	}{
		{"subset", map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web"}},
			"spec":     map[string]any{"replicas": int64(2)}}, true},
		{"replicas differ", map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false},
		{"float equals int", map[string]any{"spec": map[string]any{"replicas": 2.0}}, true},
		{"label missing live", map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "a"}}}, false},
		{"label differs", map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "api"}}}, false},
		{"other metadata ignored", map[string]any{"metadata": map[string]any{"name": "web", "creationTimestamp": nil, "uid": "u0"}}, true},
		{"status ignored", map[string]any{"status": map[string]any{"replicas": int64(9)}}, true},
		{"zero values match absent", map[string]any{"spec": map[string]any{"paused": false, "minReadySeconds": int64(0),
			"strategy": map[string]any{}, "revisionHistory": []any{}, "x": ""}}, true},
		{"nonzero absent", map[string]any{"spec": map[string]any{"minReadySeconds": int64(5)}}, false},
		{"type differs", map[string]any{"spec": map[string]any{"replicas": "2"}}, false},
		{"list element subset", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "nginx"}}}}}}, true},
		{"list element differs", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "nginx:2"}}}}}}, false},
		{"list length differs", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web"}, map[string]any{"name": "side"}}}}}}, false},
		{"quantity normalized", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "0.5", "memory": "64Mi"}}}}}}}}, true},
		{"quantity differs", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"resources": map[string]any{"requests": map[string]any{"cpu": "1"}}}}}}}}, false},
		{"quantity-like strings elsewhere compare as written", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"args": []any{"0.5"}}}}}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := inSync(tt.desired, live); got != tt.want {
				t.Errorf("inSync = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestInSyncSecretStringData(t *testing.T) {
	live := map[string]any{"apiVersion": "v1", "kind": "Secret", "data": map[string]any{"a": "YQ==", "b": "Yg=="}}
	desired := map[string]any{"apiVersion": "v1", "kind": "Secret",
		"data": map[string]any{"a": "YQ=="}, "stringData": map[string]any{"b": "b"}}
	if !inSync(desired, live) {
		t.Error("stringData b=b not matched against data b=Yg==")
	}
	if _, ok := desired["stringData"]; !ok || len(desired["data"].(map[string]any)) != 1 {
		t.Errorf("desired modified: %v", desired)
	}
	desired["stringData"] = map[string]any{"b": "c"}
	if inSync(desired, live) {
		t.Error("stringData b=c matched data b=Yg==")
	}
}
