package manifest

import (
	"strings"
	"testing"
)

func TestKubernetesContentFields(t *testing.T) {
	objs, err := Decode("cm.yaml", []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop, dependsOn: [{kind: Namespace, name: shop}, {kind: Secret, name: creds}]}
data: {LOG_LEVEL: info}
immutable: true
`))
	if err != nil {
		t.Fatal(err)
	}
	spec := objs[0].Spec.AsMap()
	if data, _ := spec["data"].(map[string]any); data["LOG_LEVEL"] != "info" || spec["immutable"] != true {
		t.Fatalf("content fields not carried under spec: %v", spec)
	}
	deps := objs[0].Metadata.DependsOn
	if deps[0].Namespace != "" || deps[1].Namespace != "shop" {
		t.Fatalf("dependsOn namespaces = %q, %q; want cluster scope for Namespace, own namespace for Secret", deps[0].Namespace, deps[1].Namespace)
	}

	tests := []struct {
		name, doc, wantErr string
	}{
		{"data on a kind without content fields", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\ndata: {a: b}\n", `data: unknown field "data"`},
		{"data twice", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\nspec: {data: {a: c}}\n", "data: is given both at the top level and under spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode("x.yaml", []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
